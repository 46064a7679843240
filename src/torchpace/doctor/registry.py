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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from torchpace.doctor.finding import Finding

# What a rule reads:
#   "trace": one rank's normalised Trace (torchpace.trace.Trace)
#   "ranks": every rank's Trace of one run (a sequence, one per rank)
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
    """The rule called `name`; ValueError listing the known names otherwise."""
    _load_all()
    try:
        return _RULES[name]
    except KeyError:
        known = ", ".join(sorted(_RULES))
        raise ValueError(
            f"unknown rule {name!r}; run 'torchpace rules' to list them ({known})"
        ) from None
