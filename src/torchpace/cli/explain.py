"""`torchpace explain RULE`: print the rule's page (what it detects, why it is slow, the fix)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from torchpace.cli import reporting
from torchpace.cli.formatting import subcommand
from torchpace.errors import UsageError

EPILOG = """\
examples:
  torchpace explain dataloader-stall
  torchpace explain sync-point | less
  torchpace rules                      the rule ids
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `explain`."""
    parser = subcommand(
        subparsers,
        "explain",
        help="explain one rule: what it detects, why it is slow, how to fix it",
        description="Print a rule's page: what it detects, why it is slow, an example, the fix,\n"
        "how its saving is estimated and its known false positives.",
        epilog=EPILOG,
    )
    parser.add_argument("rule", metavar="RULE", help="a rule id, as 'torchpace rules' lists them")
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the page, rendered with rich on a colour terminal and as plain Markdown otherwise."""
    page = read_page(args.rule)
    if reporting.wants_color(sys.stdout):
        reporting.write_stdout(_rich(page))
    else:
        reporting.write_stdout(page if page.endswith("\n") else page + "\n")
    return 0


def read_page(rule_id: str) -> str:
    """The rule's Markdown page shipped in the package (docs/rules/<rule>.md); UsageError if none."""
    from torchpace.doctor.registry import check_rule_ids

    check_rule_ids([rule_id])
    from importlib import resources  # 10 ms: only `explain` reads the pages

    page = resources.files("torchpace") / "docs" / "rules" / f"{rule_id}.md"
    if not page.is_file():
        raise UsageError(
            f"rule {rule_id!r} has no page (torchpace/docs/rules/{rule_id}.md is missing from "
            f"this install); 'torchpace rules' shows its summary and thresholds"
        )
    return page.read_text(encoding="utf-8")


def _rich(page: str) -> str:
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console(force_terminal=True)  # only called for a colour terminal
    with console.capture() as capture:
        console.print(Markdown(page))
    return capture.get()
