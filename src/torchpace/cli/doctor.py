"""`torchpace doctor [options] SCRIPT [ARGS...]`: diagnose an unmodified training script.

Runs the script in-process (or one process per rank through torchrun), profiles a few steps after a
warm-up, inspects live objects, and reports with the same reporters as `analyze`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchpace.cli import reporting
from torchpace.cli.formatting import subcommand
from torchpace.errors import UsageError

if TYPE_CHECKING:
    from torchpace.runner.run import DoctorOptions, RunResult, Target
    from torchpace.runner.terminal import Terminal
    from torchpace.verify import VerifyOptions

EPILOG = """\
examples:
  torchpace doctor train.py --epochs 1          the script's own arguments follow its path
  torchpace doctor -m mypkg.train --lr 3e-4     a module, as with python -m
  torchpace doctor --steps 20 --warmup 10 train.py
  torchpace doctor --full train.py              let the script finish after profiling
  torchpace doctor --max-seconds 120 train.py   bound a script that would run for hours
  torchpace doctor --follow --epochs 2 train.py where two epochs' minutes go, whole-run findings
  torchpace doctor --nproc-per-node 2 train.py  torchrun: one trace per rank, cross-rank analysis
  torchpace doctor -o report.html train.py      format from the extension (.json .md .html)
  torchpace doctor --fail-on high train.py      CI gate
  torchpace doctor -v train.py                  the profiler's own log lines, every skipped rule
  torchpace doctor --verify train.py            measure each fix on fresh runs of the script
  torchpace doctor --verify --verify-budget 600 train.py   give the measurement 10 minutes

Options go before SCRIPT; everything after SCRIPT is passed to it unchanged.
exit status: the script's own status when it failed; else 0 analysed, 1 a finding at or above
--fail-on, 2 bad usage or no step recorded.
"""


# long: one flat list of argparse options, in the order --help shows them.
def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `doctor` and its options."""
    p = subcommand(
        subparsers,
        "doctor",
        help="run a training script under the profiler and report what slows it",
        description="Run an unmodified training script exactly as `python SCRIPT ARGS` would, "
        "find its steps, profile a few after a warm-up, inspect its DataLoaders, model and "
        "flags, and report what slows it down with the fix as code.",
        epilog=EPILOG,
    )
    p.add_argument("--warmup", type=int, default=5, metavar="N", help="steps to skip (default 5)")
    p.add_argument("--steps", type=int, default=10, metavar="N", help="steps to profile (10)")
    p.add_argument("--full", action="store_true", help="let the script finish after profiling")
    p.add_argument("--max-seconds", type=float, metavar="S", help="stop the script after S s")
    p.add_argument(
        "--follow",
        action="store_true",
        help="profile the window, then follow the whole run to its end (or --max-seconds, "
        "--epochs): the report opens with where its wall time went (docs/doctor.md)",
    )
    p.add_argument(
        "--epochs",
        type=int,
        metavar="N",
        help="with --follow: stop as the training loader begins epoch N+1 (epoch N evaluated)",
    )
    p.add_argument("--out", metavar="DIR", help="trace folder (default ./torchpace-out/<time>/)")
    p.add_argument("--no-memory", action="store_true", help="do not record memory events")
    p.add_argument("--nproc-per-node", type=int, default=1, metavar="N", help="ranks (torchrun)")
    reporting.add_report_options(p)
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="keep the profiler's own log lines on stderr; list every rule not analysed",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="after the diagnosis, measure each fix that needs no code change on fresh, "
        "unprofiled runs of the script, interleaved with the plain script (docs/verify.md)",
    )
    p.add_argument(
        "--verify-budget",
        type=float,
        default=180.0,
        metavar="S",
        help="seconds --verify may take in all (default 180); fixes with the largest estimated "
        "saving are measured first",
    )
    p.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        metavar="MODULE",
        help="run a module as python -m does (its arguments follow it)",
    )
    p.add_argument("script", nargs="?", metavar="SCRIPT", help="the training script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")
    return p


def _target(args: argparse.Namespace) -> Target:
    from torchpace.runner.run import Target

    if args.module:
        return Target(args.module[0], tuple(args.module[1:]), module=True)
    if not args.script:
        raise UsageError("no script given; usage: torchpace doctor [options] SCRIPT [ARGS...]")
    return Target(args.script, tuple(args.args))


def _options(args: argparse.Namespace) -> DoctorOptions:
    from torchpace.policy.window import check_window
    from torchpace.runner.run import DoctorOptions, default_out_dir

    try:
        check_window(args.warmup, args.steps, prefix="--")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.max_seconds is not None and args.max_seconds <= 0:
        raise UsageError(f"--max-seconds must be positive; got {args.max_seconds:g}")
    if args.epochs is not None and (args.epochs < 1 or not args.follow):
        raise UsageError(
            f"--epochs {args.epochs} stops a followed run after that many epochs: give a "
            "positive count, with --follow (e.g. --follow --epochs 1)"
        )
    if args.verify_budget <= 0:
        raise UsageError(f"--verify-budget must be positive; got {args.verify_budget:g}")
    if args.verify and args.nproc_per_node > 1:
        raise UsageError(
            "--verify measures one process; drop --nproc-per-node "
            f"{args.nproc_per_node} to verify the fixes on one rank"
        )
    return DoctorOptions(
        out_dir=Path(args.out) if args.out else default_out_dir(),
        warmup=args.warmup,
        steps=args.steps,
        full=args.full,
        max_seconds=args.max_seconds,
        profile_memory=not args.no_memory,
        follow=args.follow,
        epochs=args.epochs,
    )


def run(args: argparse.Namespace) -> int:
    """Run the script under the doctor, report, and exit with the script's or the gate's status."""
    from torchpace.runner.terminal import Terminal

    terminal = Terminal.open(verbose=args.verbose)  # before the script writes anything
    try:
        return _run_and_report(args, terminal)
    finally:
        if terminal is not None:
            terminal.close()


def _run_and_report(args: argparse.Namespace, terminal: Terminal | None) -> int:
    from torchpace.checkup import command, run
    from torchpace.runner.run import RunHooks

    report = reporting.report_options(args)  # pyproject.toml, --config, then these options
    target, options = _target(args), _options(args)
    output = os.path.abspath(report.output) if report.output else None  # the script may chdir
    if output is not None:
        _check_writable(output)  # before the script runs, not after it
    say = terminal.stage if terminal is not None else None
    out = _Output(report, output, args.verbose, say, _verify_options(args))
    aside = _StdoutAside(output is None and report.fmt != "text")

    def give_up(result: RunResult) -> None:
        # The process ends here (the script called os._exit, or it is deaf to --max-seconds:
        # its threads, signal handlers and `except BaseException` would keep it alive).
        aside.restore()
        if terminal is not None:
            terminal.close()
        code = _report([result], options, target, replace(out, verify=None))
        _flush()
        os._exit(code)

    if say is not None:
        say(f"starting {command(target)}")
    with aside:
        results = run(target, options, args.nproc_per_node, RunHooks(stage=say, give_up=give_up))
    if results[0].child:
        # A forked copy of the script: the parent reports. Ended with os._exit, as a forked
        # child should be: a normal exit would tear down the parent's profiler state.
        _flush()
        os._exit(results[0].exit_code)
    code = _report(results, options, target, out, terminal)
    if any(r.threads_left for r in results):
        _flush()  # the script's threads would keep the process alive after its report
        os._exit(code)
    return code


def _check_writable(output: str) -> None:
    """UsageError (exit 2) when the report could not be written where -o says."""
    folder = os.path.dirname(output) or "."
    if not os.path.isdir(folder):
        raise UsageError(
            f"cannot write the report to {output!r}: the folder {folder!r} does not exist; "
            "create it first or choose another path"
        )
    if not os.access(folder, os.W_OK):
        raise UsageError(
            f"cannot write the report to {output!r}: the folder {folder!r} is not writable; "
            "choose a path in a writable folder"
        )


class _StdoutAside:
    """While the script runs, its stdout (and its processes': DataLoader workers, torchrun's
    ranks) goes to stderr, so that `doctor --format json > out.json` holds the report alone."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self._saved: int | None = None

    def __enter__(self) -> _StdoutAside:
        if self.active:
            _flush()
            self._saved = os.dup(1)
            os.dup2(2, 1)
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """Give stdout back to the report (once; also before a report written on give-up)."""
        if self._saved is not None:
            _flush()
            os.dup2(self._saved, 1)
            os.close(self._saved)
            self._saved = None


@dataclass(frozen=True)
class _Output:
    """Where and how the report goes."""

    report: reporting.ReportOptions
    path: str | None  # absolute: the script may have changed the working directory
    verbose: bool
    say: Callable[[str], None] | None  # the progress line, when there is one
    verify: VerifyOptions | None = None  # with --verify


def _report(
    results: list[RunResult],
    options: DoctorOptions,
    target: Target,
    out: _Output,
    terminal: Terminal | None = None,
) -> int:
    from torchpace.checkup import checkup, no_steps_message

    head, report = results[0], out.report
    diagnosis = checkup(
        results, options, target, only=report.only, ignore=report.ignore,
        thresholds=report.thresholds, verify=out.verify, say=out.say,
    )  # fmt: skip
    if terminal is not None:
        terminal.close()  # the script's last output, then the report on a clean line
    for r in results:
        if r.error:
            print(r.error, file=sys.stderr, end="")
    failed = next((r.exit_code for r in results if r.exit_code != 0), 0)
    if diagnosis is None:
        print(f"torchpace: error: {no_steps_message(head, options)}", file=sys.stderr)
        return failed or 2
    render = report.renderer(verbose=out.verbose)
    reporting.emit(render(diagnosis), out.path)
    if head.last_step_end is not None and sys.stderr.isatty():
        ready = time.perf_counter() - head.last_step_end
        print(
            f"torchpace: report ready {ready:.1f} s after the last profiled step", file=sys.stderr
        )
    return failed or reporting.exit_code(diagnosis, report.fail_on)


def _verify_options(args: argparse.Namespace) -> VerifyOptions | None:
    if not args.verify:
        return None
    from torchpace.verify import VerifyOptions

    return VerifyOptions(budget_s=args.verify_budget)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
