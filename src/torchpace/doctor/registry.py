"""The rule registry: `@rule("name")` on a function in `doctor/rules/<name>.py` is all a rule needs.

Rules are discovered by importing every module of `torchpace.doctor.rules`, so adding a rule touches
no other file. A rule's keyword parameters with defaults are its thresholds: its signature is its
configuration.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from torchpace.doctor.finding import Finding
from torchpace.errors import RuleChoiceError
from torchpace.policy.threads import LOADING

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

# What a rule reads:
#   "trace": one rank's normalised Trace (torchpace.trace.Trace)
#   "ranks": every rank of one run, as doctor.facts.RankFacts (a sequence, one per rank)
#   "live":  what the doctor saw of live objects while the script ran (torchpace.runner.sensors.inspector)
RuleInput = Literal["trace", "ranks", "live"]
RuleFunc = Callable[..., list[Finding]]

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_RULES: dict[str, RuleSpec] = {}
_loaded = False


class NotApplicable(Exception):
    """Raised by a rule whose input lacks what it needs; reported as skipped, never as "nothing found".

    Args:
        reason: what is missing, e.g. "the trace has no kernels (CPU-only run)".
        enable: how to record it, e.g. "torch.profiler.profile(record_shapes=True)".
    """

    def __init__(self, reason: str, enable: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.enable = enable

    def __reduce__(self) -> tuple[type[NotApplicable], tuple[str, str]]:
        # A rank summarised in a worker process sends back why a fact was not measurable.
        return NotApplicable, (self.reason, self.enable)


def judged_under_load(
    live: Inspection | None, share: float, least: float, what: str, stretched: str = LOADING
) -> str | None:
    """A share of the step under a rule's line `least`, read while other processes held the
    cores, which stretch the step's other work more than the share's own (pytorch/examples'
    MNIST loading: 24% of the step quiet, 6% beside two busy loops, 13.7% without the wait for a
    core; matmul shares are not judged so: no-mixed-precision's doc page says why). None
    without that contention: the share describes the script, nothing is found. The caveat of a
    finding judged on the share with the load's stretch taken out (Contention.unloaded), when
    that passes. Still under the line: nothing found where steps at fewer threads put even its
    quiet ceiling under it (Contention.cleared), else NotApplicable, never nothing found (the
    compute's threads also spin at each op's barrier, which the wait for a core does not
    count). `what`: the figures, the reason's first words."""
    c = live.contention() if live else None
    if c is None:
        return None
    if c.judges(share, least, stretched):
        return c.judged(share, stretched)
    if c.cleared(share, least, stretched):
        return None
    raise NotApplicable(
        f"{what}, but that share was not judged: {c.unjudged(share, least, stretched)}",
        c.enable(),
    )


def judged_so(
    finding: Finding, live: Inspection | None, caveat: str | None, stretched: str = LOADING
) -> Finding:
    """The finding with `caveat` (from `judged_under_load`, "" or None when its share passed as
    read) added, and, when it was judged with the load's stretch taken out, that stretch: its
    severity then follows the share without it (doctor/severity.py), so a busy machine does not
    lower it (pytorch/examples' MNIST decoding: 15% of the step quiet, HIGH; 10.0% beside two
    busy loops, 20% without the wait for a core)."""
    if not caveat:
        return finding
    c = live.contention() if live else None
    return replace(
        finding,
        caveat=" ".join(x for x in (finding.caveat, caveat) if x),
        stretch=c.factor(stretched) if c else 1.0,
    )


@dataclass(frozen=True)
class RuleSpec:
    """A registered rule: its kebab-case name, what it reads and the function that runs it."""

    name: str
    input: RuleInput
    func: RuleFunc
    summary: str  # first line of the rule module's docstring
    # Also reads live facts: called with live=Inspection | None (None when only a trace is read).
    live: bool = False

    def thresholds(self) -> dict[str, Any]:
        """The rule's keyword-only parameters and their defaults (its configuration)."""
        params = inspect.signature(self.func).parameters.values()
        return {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY and p.name != "live"}


def rule(
    name: str, *, input: RuleInput = "trace", live: bool = False
) -> Callable[[RuleFunc], RuleFunc]:
    """Register a rule function under `name` (kebab-case; the module is `name` with underscores).

    With `live=True` a "trace" rule also takes the keyword `live` (a runner.sensors.inspection.Inspection, or None
    when only a trace is analysed), so one rule can weigh trace evidence and live facts together.
    """
    if not _NAME.match(name):
        raise ValueError(f"rule name {name!r} is not kebab-case (e.g. 'dataloader-stall')")

    def register(func: RuleFunc) -> RuleFunc:
        module = importlib.import_module(func.__module__)
        doc = (module.__doc__ or func.__doc__ or "").strip().splitlines()
        if name in _RULES and _RULES[name].func.__qualname__ != func.__qualname__:
            raise ValueError(f"rule {name!r} is registered twice")
        _RULES[name] = RuleSpec(name, input, func, doc[0] if doc else "", live)
        return func

    return register


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    package = importlib.import_module("torchpace.doctor.rules")
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    _loaded = True


def all_rules(input: RuleInput | None = None) -> list[RuleSpec]:
    """Every registered rule (optionally only those reading `input`), sorted by name."""
    _load_all()
    specs = sorted(_RULES.values(), key=lambda s: s.name)
    return [s for s in specs if input is None or s.input == input]


def get_rule(name: str) -> RuleSpec:
    """The rule called `name`; RuleChoiceError (a ValueError) otherwise, as check_rule_ids."""
    return check_rule_ids([name])[0]


# The checks every entry point (the CLI's flags, a config file, the Python API, the callbacks)
# makes of the rules it is given, with one wording. `where` leads the message ("pyproject.toml:
# [tool.torchpace] only: "), empty where the user typed the value themselves.


def check_rule_ids(names: Iterable[str], where: str = "") -> list[RuleSpec]:
    """The rules `names` name; RuleChoiceError naming `torchpace rules` (and the closest id)
    for one that names none."""
    _load_all()
    specs = []
    for name in names:
        if name not in _RULES:
            import difflib  # only for a mistyped rule id

            close = difflib.get_close_matches(name, list(_RULES), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise RuleChoiceError(
                f"{where}unknown rule {name!r}; run 'torchpace rules' to list them{hint}"
            )
        specs.append(_RULES[name])
    return specs


def check_thresholds(
    spec: RuleSpec, given: Mapping[str, object], where: str = ""
) -> dict[str, Any]:
    """`given` if each is one of the rule's thresholds and of its kind and range (a whole number
    where the default is one, 0 to 1 for a `_fraction` or `_share`, never negative): its values
    as the rule takes them; RuleChoiceError otherwise."""
    known = spec.thresholds()
    return {name: _threshold(spec, name, value, known, where) for name, value in given.items()}


def _threshold(spec: RuleSpec, name: str, value: object, known: dict[str, Any], where: str) -> Any:
    if name not in known:
        allowed = ", ".join(sorted(known)) or "none"
        raise RuleChoiceError(
            f"{where}rule {spec.name!r} has no threshold {name!r}; its thresholds are: {allowed}"
        )
    default = known[name]
    whole = isinstance(default, int) and not isinstance(default, bool)
    fraction = name.endswith(("_fraction", "_share"))
    kind = "a number from 0 to 1" if fraction else f"a {'whole ' * whole}number, 0 or more"
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (isinstance(value, int) or not whole)
        and value >= 0
        and not (fraction and value > 1)
    ):
        return value if whole else float(value)
    raise RuleChoiceError(
        f"{where}rule {spec.name!r} threshold {name} = {value!r}; give {kind} (default {default!r})"
    )


def check_choice(
    only: Collection[str] | None,
    ignore: Collection[str] | None,
    thresholds: Mapping[str, Mapping[str, object]] | None,
) -> dict[str, dict[str, Any]]:
    """Check which rules run and their thresholds, as the Python API and the callbacks take them:
    the thresholds as the rules take them; RuleChoiceError for the first that is wrong."""
    check_rule_ids([*(only or ()), *(ignore or ())])
    given = thresholds or {}
    specs = check_rule_ids(given)
    return {s.name: check_thresholds(s, given[s.name]) for s in specs}
