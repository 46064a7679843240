"""`torchpace analyze PATH`: diagnose a torch.profiler trace (or one per rank) and report.

The arguments are parsed here, the analysis is the library's (torchpace.analyze: the trace read
on a thread while the engine is imported, then decoded on every usable core) and the report's
tail is shared with `doctor` (cli/reporting.py). Import-light on purpose: no torch, and rich only
when colour is wanted: the whole command must finish a 54 MB trace in under a second.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from torchpace.cli import reporting
from torchpace.cli.formatting import subcommand
from torchpace.cli.status import StatusLine
from torchpace.errors import TorchpaceError, TraceError, UsageError

if TYPE_CHECKING:
    from torchpace.doctor.diagnosis import Diagnosis

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
    parser = subcommand(
        subparsers,
        "analyze",
        help="diagnose a torch.profiler trace: what slows training, with fixes",
        description="Diagnose a torch.profiler (Kineto) trace, .json or .json.gz, or a directory\n"
        "holding one trace per rank: what slows each step, the evidence, an estimated saving\n"
        "and the fix as code.",
        epilog=EPILOG,
    )
    parser.add_argument(
        "path", metavar="PATH", help="trace file, or a directory of per-rank traces"
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
    reporting.add_report_options(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Check the options, diagnose, write the report; the exit status follows --fail-on."""
    check_output(args.output, args.path)
    check_jobs(args.jobs)
    options = reporting.report_options(args, target=args.path)
    check_trace_rules(reporting.parse_rule_ids(args.only))
    render = options.renderer(verbose=args.verbose)
    diagnosis = diagnose_path(args.path, options, jobs=args.jobs)
    reporting.emit(render(diagnosis), options.output)
    return reporting.exit_code(diagnosis, options.fail_on)


def diagnose_path(path: str, options: reporting.ReportOptions, *, jobs: int) -> Diagnosis:
    """torchpace.analyze with a status line on a watching terminal; a failure that is not bad
    input (a bug of ours) still ends in one line, with what to do."""
    from torchpace.analysis import analyze

    status = StatusLine(sys.stderr)
    try:
        return analyze(
            path,
            only=options.only,
            ignore=options.ignore,
            jobs=jobs,
            thresholds=options.thresholds,
            top=options.fmt == "html",
            progress=lambda message: status.say(f"{message}..."),
        )
    except TorchpaceError:
        raise
    except Exception as exc:
        if os.environ.get("TORCHPACE_DEBUG"):
            raise
        detail = (str(exc).splitlines() or [""])[0]
        raise TraceError(
            f"{path}: analysis failed ({type(exc).__name__}: {detail}); this is a torchpace bug, "
            "please report it with the trace (TORCHPACE_DEBUG=1 prints the traceback)"
        ) from None
    finally:
        status.clear()


def check_trace_rules(only: list[str] | None) -> None:
    """UsageError when --only names a rule that reads live objects, which no trace holds."""
    from torchpace.doctor.registry import get_rule

    for name in only or []:
        if get_rule(name).input == "live":
            raise UsageError(
                f"rule {name!r} inspects the live script (DataLoaders, model, flags), which a "
                f"trace does not record; run it with 'torchpace doctor --only {name} SCRIPT'"
            )


def check_jobs(jobs: int) -> None:
    """UsageError for a negative --jobs."""
    if jobs < 0:
        raise UsageError(
            f"--jobs {jobs}: give a number of processes (1 or more), or 0 for automatic"
        )


def check_output(output: str | None, trace_path: str) -> None:
    """UsageError when -o would overwrite the trace being analysed."""
    if output is None or not os.path.isfile(trace_path):
        return
    if os.path.exists(output) and os.path.samefile(output, trace_path):
        raise UsageError(
            f"-o {output!r} is the trace being analysed; writing the report there would destroy "
            "it: choose another file"
        )
