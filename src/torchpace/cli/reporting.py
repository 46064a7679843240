"""What commands that produce a report share: rule filters, when to use colour, writing the report."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from pathlib import Path
from typing import TextIO

from torchpace.errors import OutputError, UsageError


def add_rule_filters(parser: argparse.ArgumentParser) -> None:
    """Add --only and --ignore (rule ids; repeatable and/or comma-separated)."""
    for flag, verb in (("--only", "run only"), ("--ignore", "skip")):
        parser.add_argument(
            flag,
            action="append",
            metavar="RULE",
            help=f"{verb} these rules (repeatable or comma-separated; see 'torchpace rules')",
        )


def rule_filters(args: argparse.Namespace) -> tuple[list[str] | None, list[str] | None]:
    """The --only and --ignore rule ids, checked against the registry."""
    return parse_rule_ids(args.only), parse_rule_ids(args.ignore)


def parse_rule_ids(values: list[str] | None) -> list[str] | None:
    """Split comma-separated ids, drop repeats and check each names a rule; None when not given."""
    if values is None:
        return None
    ids = [part.strip() for value in values for part in value.split(",") if part.strip()]
    for rule_id in ids:
        check_rule_id(rule_id)
    return list(dict.fromkeys(ids))


def check_rule_id(rule_id: str) -> None:
    """UsageError naming `torchpace rules` (and the closest id) unless `rule_id` is a rule."""
    from torchpace.doctor.registry import all_rules

    known = [spec.name for spec in all_rules()]
    if rule_id in known:
        return
    import difflib  # only for a mistyped rule id; every command imports this module

    close = difflib.get_close_matches(rule_id, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UsageError(f"unknown rule {rule_id!r}; run 'torchpace rules' to list them{hint}")


def wants_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


def emit(text: str, output: str | None) -> None:
    """Write the report to stdout, or to `output` and say on stderr where it went."""
    if output is None:
        write_stdout(text)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(
            f"cannot write the report to {output!r}: {reason}; choose a path in a writable folder"
        ) from None
    print(f"torchpace: report written to {output}", file=sys.stderr)


def write_stdout(text: str) -> None:
    """Write `text` to stdout and flush it; OutputError (exit 2, one line) when that fails.

    A full disk or a pipe whose reader went away (`| head -c1`) must not read as exit 1, which CI
    takes for "findings at or above --fail-on", nor end in a traceback.
    """
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        _silence_stdout()
        raise OutputError(f"cannot write to stdout: {_why(exc)}") from None


def _why(exc: OSError) -> str:
    if exc.errno == errno.EPIPE:
        return (
            "its reader closed the pipe (e.g. head); read the whole output, or write it to a "
            "file (-o FILE where the command has it)"
        )
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device; free some space or write the output elsewhere"
    return f"{exc.strerror or type(exc).__name__}; write the output to a file instead"


def _silence_stdout() -> None:
    # What stayed in the buffer would fail again in the interpreter's final flush (a second
    # message, exit status 120): drop it and point the descriptor at devnull.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
