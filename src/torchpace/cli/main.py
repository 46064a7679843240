"""Entry point: `torchpace <subcommand>`; each subcommand lives in cli/<name>.py."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from torchpace import __version__
from torchpace.cli.formatting import HelpFormatter
from torchpace.cli.reporting import EXIT_USAGE
from torchpace.errors import TorchpaceError
from torchpace.teardown import no_teardown

# Order shown in --help. Each module defines add_parser(subparsers) and run(args) -> int.
SUBCOMMANDS = ("doctor", "analyze", "compare", "bench", "env", "rules", "explain")
# Commands that build much and then end: no cyclic GC, no freeing at exit (torchpace.teardown).
SHORT_LIVED = ("analyze",)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand registered (or `only` that one: the others' modules
    are not imported, so `torchpace analyze` starts reading its trace ~10 ms sooner)."""
    parser = argparse.ArgumentParser(
        prog="torchpace",
        description="Find and fix what slows PyTorch training.",
        epilog="Run 'torchpace <command> --help' for a command's options and examples.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"torchpace {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"torchpace.cli.{name}")
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the subcommand, and turn bad input into one line and exit code 2."""
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(only=words[0] if words and words[0] in SUBCOMMANDS else None)
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    # From a shell (argv None), a short command skips the interpreter's tear-down; called
    # in-process, main([...]) returns its status and frees what the command built.
    with no_teardown(argv is None and args.command in SHORT_LIVED) as finish:
        try:
            code: int = args._run(args)
        except TorchpaceError as exc:
            print(f"torchpace: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print("torchpace: interrupted", file=sys.stderr)
            return 130
        return finish(code)
