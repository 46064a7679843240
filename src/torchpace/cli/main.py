"""Entry point: `torchpace <subcommand>`; each subcommand lives in cli/<name>.py."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from torchpace import __version__
from torchpace.cli.formatting import HelpFormatter
from torchpace.errors import TorchpaceError

# Order shown in --help. Each module defines add_parser(subparsers) and run(args) -> int.
SUBCOMMANDS = ("doctor", "analyze", "compare", "bench", "env", "rules", "explain")

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


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
    fast_exit = argv is None and getattr(args, "_fast_exit", False)
    args._fast_exit = fast_exit  # the subcommand may then skip freeing what it built
    if fast_exit:
        _no_teardown()
    try:
        code: int = args._run(args)
    except TorchpaceError as exc:
        print(f"torchpace: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("torchpace: interrupted", file=sys.stderr)
        return 130
    if fast_exit:
        _exit_now(code)
    return code


def _no_teardown() -> None:
    """A short command that ends with os._exit: no cyclic GC passes.

    The trace model is hundreds of thousands of acyclic objects: the collector's passes over them
    find nothing (~30 ms), and whatever cycles the rules leave are reclaimed with the process.
    The command itself also keeps what it decoded (torchpace.trace.load.keep_decoded): freeing it
    costs ~30 ms that the OS does for free at exit.
    """
    gc.disable()


def _exit_now(code: int) -> None:
    """Flush and end the process without tearing down what the command built.

    Freeing a large trace's hundreds of thousands of objects at exit costs a tenth of a second of
    a command that must finish in one; the OS reclaims the memory at once. Only for a real command
    line (argv None): callers of main([...]) in-process get their return value.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe: nothing to save
            stream.flush()
    os._exit(code)
