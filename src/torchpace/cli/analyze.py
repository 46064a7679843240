"""`torchpace analyze PATH`: diagnose a torch.profiler trace (or one per rank) and report.

Import-light on purpose: no torch, and rich only when colour is wanted. The trace is read on a
second thread while the engine is imported, then decoded on every usable core (see
torchpace.trace.parallel): the whole command must finish a 54 MB trace in under a second.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from torchpace.cli import config, reporting
from torchpace.cli.formatting import HelpFormatter
from torchpace.errors import TorchpaceError, TraceError, UsageError
from torchpace.report import FORMATS, choose_format, renderer

if TYPE_CHECKING:
    from torchpace.doctor.diagnosis import Diagnosis
    from torchpace.doctor.finding import Severity
    from torchpace.trace.read import ReadAhead

EXIT_OK, EXIT_FINDINGS = 0, 1

EPILOG = """\
examples:
  torchpace analyze trace.pt.trace.json.gz         report on the terminal
  torchpace analyze run/traces/                    one trace per rank: ranks side by side
  torchpace analyze trace.json -o report.html      format from the extension (.json .md .html)
  torchpace analyze trace.json --format json | jq '.findings[] | {rule, saving_ms}'
  torchpace analyze trace.json -o report.md --fail-on high    CI: a comment to post, and a gate
  torchpace analyze trace.json --only dataloader-stall,sync-point
  torchpace analyze trace.json --ignore allocator-churn
  torchpace analyze trace.json --config ci.toml     settings: see docs/cli.md (configuration)

settings: [tool.torchpace] in the first pyproject.toml from the current folder upward, then
--config FILE, then these options (rules, thresholds, --fail-on; 'torchpace rules' shows them).
exit status: 0 analysed, 1 a finding at or above --fail-on, 2 bad usage or input.
'torchpace rules' lists the rule ids; 'torchpace explain RULE' says what one checks.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `analyze` and its options."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "analyze",
        help="diagnose a torch.profiler trace: what slows training, with fixes",
        description="Diagnose a torch.profiler (Kineto) trace, .json or .json.gz, or a directory\n"
        "holding one trace per rank: what slows each step, the evidence, an estimated saving\n"
        "and the fix as code.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "path", metavar="PATH", help="trace file, or a directory of per-rank traces"
    )
    parser.add_argument(
        "--format",
        metavar="{" + ",".join(FORMATS) + "}",
        help="report format (default: from -o's extension, else text)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")
    parser.add_argument(
        "--fail-on",
        metavar="{low,medium,high}",
        help="exit with status 1 when a finding has this severity or higher (for CI)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="processes that decode the trace(s): 0 (default) as many as pay off on the usable "
        "cores, 1 to stay in one process",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every rule that could not run with its reason (else one line per cause)",
    )
    reporting.add_rule_filters(parser)
    config.add_option(parser)
    # Nothing to tear down after the report is written: main() may skip the interpreter's exit.
    parser.set_defaults(_fast_exit=True)
    return parser


def run(args: argparse.Namespace) -> int:
    """Load, diagnose, render and write the report; the exit status follows --fail-on."""
    fmt = choose_format(args.output, args.format)
    check_output(args.output, args.path)
    check_jobs(args.jobs)
    ahead = read_ahead(args.path)  # reads while the rest of the engine is imported
    parse_fail_on(args.fail_on)  # the command line's own value is checked first
    only, ignore = reporting.rule_filters(args)
    check_trace_rules(only)
    settings = config.resolve(args, only, ignore, target=args.path)
    fail_on = parse_fail_on(settings.fail_on)
    only, ignore = settings.rule_filters()
    if args._fast_exit:
        from torchpace.trace.load import keep_decoded

        keep_decoded()
    color = fmt == "text" and args.output is None and reporting.wants_color(sys.stdout)
    on_screen = args.output is None and sys.stdout.isatty()
    width = terminal_width() if on_screen else None
    # imported while the trace is read
    render = renderer(fmt, color=color, width=width, verbose=args.verbose)
    diagnosis = analyse(
        args.path,
        only=only,
        ignore=ignore,
        top=fmt == "html",
        progress=Progress(sys.stderr),
        jobs=args.jobs,
        ahead=ahead,
        thresholds=settings.thresholds,
    )
    reporting.emit(render(diagnosis), args.output)
    return exit_code(diagnosis, fail_on)


def terminal_width() -> int:
    """Columns of the terminal (COLUMNS wins, as shutil reads it)."""
    import shutil  # only on a terminal: its import pulls in the archive modules

    return shutil.get_terminal_size().columns


def check_jobs(jobs: int) -> None:
    """UsageError for a negative --jobs."""
    if jobs < 0:
        raise UsageError(
            f"--jobs {jobs}: give a number of processes (1 or more), or 0 for automatic"
        )


def read_ahead(path: str) -> ReadAhead | None:
    """Start reading a single trace file on a thread; None for a directory (read later)."""
    if not os.path.isfile(path):
        return None
    from torchpace.trace.read import ReadAhead

    return ReadAhead(path)


def check_output(output: str | None, trace_path: str) -> None:
    """UsageError when -o would overwrite the trace being analysed."""
    if output is None or not os.path.isfile(trace_path):
        return
    if os.path.exists(output) and os.path.samefile(output, trace_path):
        raise UsageError(
            f"-o {output!r} is the trace being analysed; writing the report there would destroy "
            "it: choose another file"
        )


def check_trace_rules(only: list[str] | None) -> None:
    """UsageError when --only names a rule that reads live objects, which no trace holds."""
    from torchpace.doctor.registry import get_rule

    for name in only or []:
        if get_rule(name).input == "live":
            raise UsageError(
                f"rule {name!r} inspects the live script (DataLoaders, model, flags), which a "
                f"trace does not record; run it with 'torchpace doctor --only {name} SCRIPT'"
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


def analyse(
    path: str,
    *,
    only: list[str] | None,
    ignore: list[str] | None,
    top: bool = False,
    progress: Progress,
    jobs: int = 1,
    ahead: ReadAhead | None = None,
    thresholds: Mapping[str, Mapping[str, float]] | None = None,
) -> Diagnosis:
    """Load the trace(s) at `path` and run the rules, telling a watching terminal how far it got.

    `top`: also compute the top kernels/operators tables (the HTML report shows them).
    `jobs`: decoding processes (see load_trace); `ahead`: the file already being read;
    `thresholds`: per-rule keyword overrides (from the configuration).
    """
    from torchpace.doctor.diagnose import diagnose
    from torchpace.doctor.registry import all_rules
    from torchpace.trace.load import load_trace, load_traces

    all_rules()  # imports every rule module while the read-ahead thread is still reading
    try:
        progress.say(f"reading {path}")
        if ahead is not None:
            traces = [load_trace(path, jobs=jobs, data=ahead.result())]
        else:
            traces = load_traces(path, jobs=jobs)
        progress.say(f"analysing {path}")
        # ids and thresholds checked by the CLI
        return diagnose(traces, only=only, ignore=ignore, top=top, thresholds=thresholds)
    except TorchpaceError:
        raise
    except MemoryError:  # a trace this machine cannot hold: input too large, not a bug of ours
        raise TraceError(
            f"{path}: not enough memory to analyse it (decoding needs about 3x the JSON); free "
            "memory, or analyse one rank's file at a time"
        ) from None
    except Exception as exc:
        # A bug of ours, not bad input: still one line, with what to do; the traceback on request.
        if os.environ.get("TORCHPACE_DEBUG"):
            raise
        detail = (str(exc).splitlines() or [""])[0]
        raise TraceError(
            f"{path}: analysis failed ({type(exc).__name__}: {detail}); this is a torchpace bug, "
            "please report it with the trace (TORCHPACE_DEBUG=1 prints the traceback)"
        ) from None
    finally:
        progress.clear()


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


class Progress:
    """One self-erasing status line on stderr, shown only when stderr is a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty() and os.environ.get("TERM") != "dumb"
        self.shown = False

    def say(self, message: str) -> None:
        """Replace the status line with `message`."""
        if self.enabled:
            self.stream.write(f"\r\033[Ktorchpace: {message}...")
            self.stream.flush()
            self.shown = True

    def clear(self) -> None:
        """Erase the status line so the report or an error starts on a clean line."""
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False
