"""`torchpace rules`: every rule, what it reads, what it checks and its thresholds."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from torchpace.cli import reporting
from torchpace.cli.formatting import HelpFormatter

if TYPE_CHECKING:
    from torchpace.doctor.registry import RuleSpec

EPILOG = """\
examples:
  torchpace rules                      every rule with its thresholds
  torchpace rules --json               the same as JSON, for tools
  torchpace explain dataloader-stall   one rule's page: what, why, example, fix

'reads' says what a rule needs: trace (one profiler trace), ranks (every rank's trace of one run)
or live (what 'torchpace doctor' sees while the script runs); "+live" means a trace rule also weighs
live facts when the doctor has them.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `rules`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "rules",
        help="list the rules, what each reads and its thresholds",
        description="List every rule: its id (for --only, --ignore and 'torchpace explain'),\n"
        "what it reads, what it checks and its thresholds with their defaults.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the rule list."""
    from torchpace.doctor.registry import all_rules  # imports every rule: only when listing

    specs = all_rules()
    width = min(100, shutil.get_terminal_size().columns) if sys.stdout.isatty() else 100
    text = render_json(specs) if args.json else render_text(specs, width=width)
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


def render_text(specs: list[RuleSpec], *, width: int = 100) -> str:
    """The rules grouped by what they read: id, summary and thresholds, wrapped to `width`."""
    if not specs:
        return "No rules are registered.\n"
    lines = [f"{len(specs)} rules; 'torchpace explain RULE' prints one's page."]
    for kinds, heading in SECTIONS:
        chosen = [s for s in specs if reads(s) in kinds]
        if chosen:
            lines += ["", f"{heading}:"]
            for spec in chosen:
                lines += _rule_block(spec, width)
    return "\n".join(lines) + "\n"


def _rule_block(spec: RuleSpec, width: int) -> list[str]:
    live = "  (+ live facts under doctor)" if reads(spec).endswith("+live") else ""
    block = [f"  {spec.name}{live}"]
    block += textwrap.wrap(spec.summary, width, initial_indent="      ", subsequent_indent="      ")
    thresholds = ", ".join(f"{k}={v!r}" for k, v in spec.thresholds().items())
    if thresholds:
        block += textwrap.wrap(
            f"thresholds: {thresholds}",
            width,
            initial_indent="      ",
            subsequent_indent="        ",
        )
    return block


def render_json(specs: list[RuleSpec]) -> str:
    """The rule list as JSON: id, reads, summary, thresholds (name -> default)."""
    rules = [
        {
            "rule": spec.name,
            "reads": reads(spec),
            "summary": spec.summary,
            "thresholds": {k: _plain(v) for k, v in spec.thresholds().items()},
        }
        for spec in specs
    ]
    return json.dumps({"rules": rules}, indent=2) + "\n"


def _plain(value: Any) -> Any:
    # Thresholds are numbers, strings or tuples; anything else is shown as its repr.
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return repr(value)
