"""`torchpace env`: torch, CUDA, cuDNN, driver, GPUs and CPU facts, with verdicts."""

from __future__ import annotations

import argparse
from typing import Any

from torchpace.cli import reporting
from torchpace.cli.formatting import subcommand

EPILOG = """examples:
  torchpace env                 facts and verdicts as text
  torchpace env --format json   the same as JSON (schema_version 1)
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `env` and its options."""
    parser = subcommand(
        subparsers,
        "env",
        help="show torch/CUDA/cuDNN/driver versions, GPUs and CPU, with verdicts",
        description="Show what this machine and torch build offer for training, with verdicts.",
        epilog=EPILOG,
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the environment report; exit 0 (verdicts never fail the command)."""
    from torchpace.environment import probe as environment
    from torchpace.report.env import render_json, render_text

    facts = environment.gather()
    found = environment.verdicts(facts)

    render = render_json if args.format == "json" else render_text
    reporting.write_stdout(render(facts, found))
    return 0
