"""The tail every command that reports a diagnosis shares: its options (--format, -o, --fail-on,
--only/--ignore, --config), the report written where asked, and the exit status."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from torchpace.cli.formatting import terminal_columns
from torchpace.errors import OutputError, UsageError
from torchpace.report import FORMATS, Format, choose_format, renderer

if TYPE_CHECKING:
    from torchpace.cli.config import Settings
    from torchpace.doctor.diagnosis import Diagnosis
    from torchpace.doctor.finding import Severity

# Exit status: 0 analysed, 1 a finding at or above --fail-on, 2 bad usage or input.
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """Add --format and -o/--output (the format from -o's extension when --format is not given)."""
    parser.add_argument(
        "--format",
        metavar="{" + ",".join(FORMATS) + "}",
        help="report format (default: from -o's extension, else text)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """Add --format, -o/--output, --fail-on, --only/--ignore (rule ids; repeatable and/or
    comma-separated) and --config."""
    from torchpace.cli import config

    add_output_options(parser)
    parser.add_argument(
        "--fail-on",
        metavar="{low,medium,high}",
        help="exit with status 1 when a finding has this severity or higher (for CI)",
    )
    for flag, verb in (("--only", "run only"), ("--ignore", "skip")):
        parser.add_argument(
            flag,
            action="append",
            metavar="RULE",
            help=f"{verb} these rules (repeatable or comma-separated; see 'torchpace rules')",
        )
    config.add_option(parser)


@dataclass(frozen=True)
class ReportOptions:
    """What the command line and the settings files say about the report and the rules."""

    fmt: Format
    output: str | None
    fail_on: Severity | None
    only: list[str] | None
    ignore: list[str] | None
    thresholds: Mapping[str, Mapping[str, float]]

    def renderer(self, *, verbose: bool = False) -> Callable[[Diagnosis], str]:
        """The function that renders the report (its module imported now): in colour and at the
        terminal's width when it goes to a terminal."""
        on_screen = self.output is None and sys.stdout.isatty()
        color = self.fmt == "text" and self.output is None and wants_color(sys.stdout)
        width = terminal_columns() if on_screen else None
        return renderer(self.fmt, color=color, width=width, verbose=verbose)


def report_options(args: argparse.Namespace, *, target: str | None = None) -> ReportOptions:
    """Check the report options and resolve the settings (pyproject.toml, --config, then the
    command line); `target`: the trace whose path the settings' overrides match."""
    from torchpace.cli import config

    fmt = choose_format(args.output, args.format)
    parse_fail_on(args.fail_on)  # the command line's own value is checked first
    only, ignore = parse_rule_ids(args.only), parse_rule_ids(args.ignore)
    settings: Settings = config.resolve(args, only, ignore, target=target)
    only, ignore = settings.rule_filters()
    return ReportOptions(
        fmt, args.output, parse_fail_on(settings.fail_on), only, ignore, settings.thresholds
    )


def parse_fail_on(text: str | None) -> Severity | None:
    """--fail-on as a Severity; UsageError naming the choices otherwise."""
    from torchpace.doctor.finding import Severity

    if text is None:
        return None
    try:
        return Severity.parse(text)
    except ValueError:
        raise UsageError(f"unknown --fail-on {text!r}; choose one of: low, medium, high") from None


def exit_code(diagnosis: Diagnosis, fail_on: Severity | None) -> int:
    """1 when a finding is at or above `fail_on` (said on stderr for CI logs), else 0."""
    if fail_on is None:
        return EXIT_OK
    failing = [f.rule for f in diagnosis.findings if f.severity >= fail_on]
    if not failing:
        return EXIT_OK
    names = ", ".join(dict.fromkeys(failing))
    plural = "s" if len(failing) > 1 else ""
    print(
        f"torchpace: {len(failing)} finding{plural} at or above --fail-on {fail_on.label}: {names}",
        file=sys.stderr,
    )
    return EXIT_FINDINGS


def parse_rule_ids(values: list[str] | None) -> list[str] | None:
    """Split comma-separated ids, drop repeats and check each names a rule; None when not given."""
    if values is None:
        return None
    from torchpace.doctor.registry import check_rule_ids

    ids = [part.strip() for value in values for part in value.split(",") if part.strip()]
    check_rule_ids(ids)
    return list(dict.fromkeys(ids))


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
