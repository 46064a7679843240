"""`torchpace compare BEFORE AFTER`: what changed between two runs, with verdicts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from torchpace.cli import reporting
from torchpace.cli.formatting import subcommand
from torchpace.errors import UsageError
from torchpace.report import choose_format

EPILOG = """\
examples:
  torchpace compare before.pt.trace.json.gz after.pt.trace.json.gz
  torchpace compare run1/traces/ run2/traces/          folders of per-rank traces
  torchpace compare before.json after.json             two torchpace JSON reports
  torchpace compare before.json.gz after.json.gz -o diff.md    a comment for the pull request
  torchpace compare a.json.gz b.json.gz --format json | jq .verdict

Each change is a difference of per-step medians with a 95% interval over the steps of each run;
inside the noise it reads "no measurable change". Kernel and operator tables need traces.
exit status: 0 compared, 2 bad usage or input.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `compare` and its options."""
    parser = subcommand(
        subparsers,
        "compare",
        help="compare two runs (traces, folders of ranks or JSON reports) with verdicts",
        description="Compare BEFORE with AFTER: the step time and each phase, the kernels and\n"
        "host operators that changed most, and the findings resolved, new and changed.",
        epilog=EPILOG,
    )
    parser.add_argument("before", metavar="BEFORE", help="trace, folder of traces or JSON report")
    parser.add_argument("after", metavar="AFTER", help="the same kind of input, after the change")
    reporting.add_output_options(parser)
    parser.add_argument(
        "--top", type=int, default=10, metavar="N", help="kernels and operators shown (default 10)"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Load both sides, compare, render and write."""
    fmt = choose_format(args.output, args.format)
    if args.top < 1:
        raise UsageError(f"--top {args.top}: show at least 1 kernel and operator")
    from torchpace.compare import compare_paths
    from torchpace.report.compare import renderer

    render = renderer(fmt)
    comparison = compare_paths(args.before, args.after, top=args.top)
    reporting.emit(render(comparison), args.output)
    if args.output is not None:
        print(f"torchpace: {comparison.headline()}", file=sys.stderr)
    return 0
