"""`torchpace rules`: every rule, what it reads, what it checks and its thresholds."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from torchpace.cli import config, reporting
from torchpace.cli.formatting import subcommand, terminal_columns

if TYPE_CHECKING:
    from torchpace.doctor.registry import RuleSpec

EPILOG = """\
examples:
  torchpace rules                      every rule with its thresholds
  torchpace rules --json               the same as JSON, for tools
  torchpace rules --config ci.toml     the values a settings file gives, and where each comes from
  torchpace explain dataloader-stall   one rule's page: what, why, example, fix

'reads' says what a rule needs: trace (one profiler trace), ranks (every rank's trace of one run)
or live (what 'torchpace doctor' sees while the script runs); "+live" means a trace rule also weighs
live facts when the doctor has them.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `rules`."""
    parser = subcommand(
        subparsers,
        "rules",
        help="list the rules, what each reads and its thresholds",
        description="List every rule: its id (for --only, --ignore and 'torchpace explain'),\n"
        "what it reads, what it checks and its thresholds with their defaults.",
        epilog=EPILOG,
    )
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    config.add_option(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the rule list."""
    from torchpace.doctor.registry import all_rules  # imports every rule: only when listing

    specs = all_rules()
    settings = config.resolve(args)  # pyproject.toml from here upward, then --config
    width = min(100, terminal_columns()) if sys.stdout.isatty() else 100
    if args.json:
        text = render_json(specs, settings)
    else:
        text = render_text(specs, width=width, settings=settings)
    reporting.write_stdout(text)
    return 0


def reads(spec: RuleSpec) -> str:
    """What the rule reads: 'trace', 'ranks', 'live' or 'trace+live'."""
    return f"{spec.input}+live" if spec.live and spec.input != "live" else spec.input


# Sections of the listing: what input lets a rule run.
SECTIONS = (
    (("trace", "trace+live"), "Read from a trace (analyze and doctor)"),
    (("ranks", "ranks+live"), "Across ranks (a directory with one trace per rank)"),
    (("live",), "Live objects (torchpace doctor only)"),
)


def render_text(
    specs: list[RuleSpec], *, width: int = 100, settings: config.Settings | None = None
) -> str:
    """The rules grouped by what they read: id, summary and the thresholds in effect (with where
    each set value comes from), wrapped to `width`."""
    if not specs:
        return "No rules are registered.\n"
    lines = [f"{len(specs)} rules; 'torchpace explain RULE' prints one's page."]
    lines += _config_lines(settings, width)
    for kinds, heading in SECTIONS:
        chosen = [s for s in specs if reads(s) in kinds]
        if chosen:
            lines += ["", f"{heading}:"]
            for spec in chosen:
                lines += _rule_block(spec, width, settings)
    return "\n".join(lines) + "\n"


def _config_lines(settings: config.Settings | None, width: int) -> list[str]:
    if settings is None or not settings.files:
        return ["Settings: the defaults (no [tool.torchpace] in a pyproject.toml here or above)."]
    text = f"Settings from {', '.join(settings.files)}"
    if settings.fail_on:
        text += f"; --fail-on {settings.fail_on} ({settings.fail_on_source})"
    off = len(settings.off)
    if off:
        text += f"; {off} rule{'s' if off != 1 else ''} off"
    return textwrap.wrap(text + ".", width, subsequent_indent="  ")


def effective(spec: RuleSpec, settings: config.Settings | None) -> dict[str, tuple[Any, str]]:
    """Each threshold's value in effect and where it comes from ("default" or a settings file)."""
    given = settings.thresholds.get(spec.name, {}) if settings else {}
    out = {}
    for name, default in spec.thresholds().items():
        if name in given and settings is not None:
            out[name] = (given[name], settings.sources[(spec.name, name)])
        else:
            out[name] = (default, config.DEFAULT)
    return out


def _rule_block(spec: RuleSpec, width: int, settings: config.Settings | None = None) -> list[str]:
    live = "  (+ live facts under doctor)" if reads(spec).endswith("+live") else ""
    off = settings.off.get(spec.name) if settings else None
    state = f"  [off: {off}]" if off else ""
    block = [f"  {spec.name}{live}{state}"]
    block += textwrap.wrap(spec.summary, width, initial_indent="      ", subsequent_indent="      ")
    thresholds = ", ".join(
        f"{k}={v!r}" + (f" [{source}]" if source != config.DEFAULT else "")
        for k, (v, source) in effective(spec, settings).items()
    )
    if thresholds:
        block += textwrap.wrap(
            f"thresholds: {thresholds}",
            width,
            initial_indent="      ",
            subsequent_indent="        ",
        )
    return block


def render_json(specs: list[RuleSpec], settings: config.Settings | None = None) -> str:
    """The rule list as JSON: id, reads, summary, whether it runs, its thresholds in effect
    (name -> value) and where each comes from ("default" or a settings file)."""
    rules = []
    for spec in specs:
        values = effective(spec, settings)
        off = settings.off.get(spec.name) if settings else None
        rules.append(
            {
                "rule": spec.name,
                "reads": reads(spec),
                "summary": spec.summary,
                "enabled": off is None,
                "disabled_by": off,
                "thresholds": {k: _plain(v) for k, (v, _) in values.items()},
                "threshold_sources": {k: source for k, (_, source) in values.items()},
            }
        )
    settings_doc = {
        "files": list(settings.files) if settings else [],
        "fail_on": settings.fail_on if settings else None,
        "fail_on_source": settings.fail_on_source if settings else config.DEFAULT,
    }
    return json.dumps({"settings": settings_doc, "rules": rules}, indent=2) + "\n"


def _plain(value: Any) -> Any:
    # Thresholds are numbers, strings or tuples; anything else is shown as its repr.
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return repr(value)
