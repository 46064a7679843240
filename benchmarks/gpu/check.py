"""The one-call GPU check (issues 27 and 28): run check_plan's steps in order, each time-boxed, a
failing step never stopping the next, all inside one time budget; pack the results into one
archive and print a summary table last. Start it through check.sh (wheels, PYTHONPATH).

    bash benchmarks/gpu/check.sh --wheels .whl          # on the GPU machine: $OUT gets the archive
    bash benchmarks/gpu/check.sh --rehearse             # here, CPU-sized: same steps, same files
    python benchmarks/gpu/check.py --dry-run --rehearse # the plan as JSON lines, nothing run

Only `cuda-visible` can stop the run: without a GPU the rest would spend the device minutes
measuring a CPU at GPU sizes. The archive is rewritten after every step, so a call killed at its
limit still brings back everything finished before.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from check_plan import Command, Mode, Step, plan

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = "gpu-check.tar.gz"
PACK_RESERVE_S = 15  # kept back from the budget for the last pack and the summary
MIN_STEP_S = 20  # a step with less time than this left is skipped, not started
# The rehearsal checks that every step runs, not how fast: a shared two-core CPU is 10x slower
# than the GPU machine's at the same steps, and a busy one slower still.
REHEARSAL_SLACK = 10
MAX_ARCHIVE_BYTES = 15 << 20  # what comes back from the device: 16 MiB a file


@dataclass
class Outcome:
    """How one step went: ok, failed (rc), timeout, skipped (why), not-run (cuda-visible failed)."""

    name: str
    issue: int
    status: str = "not run"
    seconds: float = 0.0
    figure: str = ""


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """End the step's process group (its DataLoader workers, torchrun ranks): TERM, then KILL."""
    for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_command(cmd: Command, work: Path, log: IO[bytes], timeout_s: float) -> int | None:
    """Run one command from the repository root; its exit status, or None when it timed out."""
    argv = cmd.argv
    if cmd.budget_margin_s is not None:
        argv = (*argv, "--budget", f"{max(timeout_s - cmd.budget_margin_s, 10):.0f}")
    log.write(f"$ {' '.join(argv)}\n".encode())
    log.flush()
    out = open(work / cmd.stdout, "wb") if cmd.stdout else log  # noqa: SIM115 (closed below)
    try:
        try:
            proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=log, start_new_session=True)
        except OSError as exc:  # a program that is not there: a failed command, not a crash
            log.write(f"cannot start: {exc}\n".encode())
            return 127
        try:
            return proc.wait(max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            _kill(proc)
            return None
    finally:
        if out is not log:
            out.close()


def run_step(step: Step, work: Path, timeout_s: float) -> Outcome:
    """Run every command of `step` inside one time box; the first failure names the status."""
    outcome = Outcome(step.name, step.issue)
    start = time.monotonic()
    status = "ok"
    with open(work / "logs" / f"{step.name}.log", "wb") as log:
        for cmd in step.commands:
            left = timeout_s - (time.monotonic() - start)
            rc = run_command(cmd, work, log, left) if left > 0 else None
            if rc is None:
                status = f"timeout {timeout_s:.0f}s"
                break
            if rc != 0 and status == "ok":
                status = f"failed rc={rc}"
    outcome.seconds = time.monotonic() - start
    outcome.status = status
    try:
        outcome.figure = step.figure(work)
    except Exception as exc:  # a missing or partial output: say so, the summary goes on
        outcome.figure = f"- ({type(exc).__name__}: {str(exc)[:60]})"
    return outcome


def _packable(work: Path) -> tuple[list[Path], list[str]]:
    """The files to pack, and what stays out: scratch/, then the largest files until the archive
    fits (a .gz counts at its size, other files at a fifth: text compresses)."""
    files = sorted(
        p for p in work.rglob("*") if p.is_file() and p.relative_to(work).parts[0] != "scratch"
    )

    def cost(p: Path) -> int:
        size = p.stat().st_size
        return size if p.suffix == ".gz" else size // 5

    left_out = []
    while files and sum(cost(p) for p in files) > MAX_ARCHIVE_BYTES:
        largest = max(files, key=cost)
        files.remove(largest)
        left_out.append(f"{largest.relative_to(work)} ({largest.stat().st_size >> 20} MiB)")
    return files, left_out


def pack(work: Path, out: Path) -> list[str]:
    """Write out/gpu-check.tar.gz (atomically: a kill mid-write leaves the previous one)."""
    files, left_out = _packable(work)
    tmp = out / (ARCHIVE + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for path in files:
            tar.add(path, arcname=f"gpu-check/{path.relative_to(work)}")
    tmp.replace(out / ARCHIVE)
    return left_out


def summary(outcomes: list[Outcome], header: str, notes: list[str]) -> str:
    """The table printed last: step, issue, status, seconds, one key figure."""
    lines = [header, f"{'step':<20} {'issue':<5} {'status':<16} {'seconds':>7}  key figure"]
    for o in outcomes:
        lines.append(f"{o.name:<20} {o.issue:<5} {o.status:<16} {o.seconds:>7.1f}  {o.figure}")
    return "\n".join([*lines, *notes]) + "\n"


def _notes(outcomes: list[Outcome], args: argparse.Namespace, left_out: list[str]) -> list[str]:
    notes = []
    if left_out:
        notes.append("left out of the archive: " + ", ".join(left_out))
    again = [o.name for o in outcomes if o.status.startswith(("skipped", "timeout", "not run"))]
    if "calibrate" in again and not any(name.startswith("pair-") for name in again):
        # It reads the pairs' files and runs no torch: spend no device time on it.
        again.remove("calibrate")
        notes.append(
            "calibrate needs no GPU: python benchmarks/gpu/pairs/calibrate.py "
            "<extracted archive>/gpu-check/pairs"
        )
    if again:
        flags = "--rehearse" if args.rehearse else "--wheels .whl"
        notes.append(
            f"to run what did not finish: bash benchmarks/gpu/check.sh {flags} "
            f"--steps {','.join(again)} --budget SECONDS"
        )
    return notes


def _write(
    work: Path, out: Path, outcomes: list[Outcome], args: argparse.Namespace, t0: float
) -> str:
    """Summary files into the work folder and out/, then the archive; returns the table."""
    left_out = _packable(work)[1]
    used = time.time() - t0
    header = (
        f"torchpace GPU check{' (rehearsal, CPU-sized)' if args.rehearse else ''}: "
        f"{used:.0f} s of a {args.budget:.0f} s budget"
    )
    text = summary(outcomes, header, _notes(outcomes, args, left_out))
    doc = {
        "budget_s": args.budget,
        "used_s": round(used, 1),
        "steps": [asdict(o) for o in outcomes],
    }
    for folder in (work, out):
        (folder / "summary.txt").write_text(text)
        (folder / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")
    pack(work, out)
    return text


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rehearse", action="store_true", help="CPU-sized, on this machine")
    p.add_argument(
        "--out", help="where the archive and summary go (default: $OUT, else torchpace-out/)"
    )
    p.add_argument("--work", help="work folder (default: a new temporary folder)")
    p.add_argument(
        "--budget", type=float, help="seconds in all (default 450 on the GPU, 1800 rehearsing)"
    )
    p.add_argument("--steps", help="only these steps, comma-separated (see --dry-run)")
    p.add_argument(
        "--dry-run", action="store_true", help="print the plan as JSON lines, run nothing"
    )
    p.add_argument("--t0", type=float, help="when the call began (epoch s; check.sh passes it)")
    p.add_argument("--setup-log", help="the wheel install's log, copied into logs/")
    args = p.parse_args(argv)
    args.budget = args.budget or (1800.0 if args.rehearse else 450.0)
    default_out = ROOT / "torchpace-out" / ("gpu-rehearsal" if args.rehearse else "gpu-check")
    args.out = Path(args.out or os.environ.get("OUT") or default_out)
    if args.work is None:  # a dry run makes nothing: its commands show the placeholder
        args.work = "WORK" if args.dry_run else tempfile.mkdtemp(prefix="torchpace-gpu-check-")
    args.work = Path(args.work)
    return args


def _select(steps: list[Step], names: str | None) -> list[Step]:
    if not names:
        return steps
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = [s.name for s in steps]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise SystemExit(f"check.py: error: unknown step {unknown[0]!r}; steps: {', '.join(known)}")
    return [s for s in steps if s.name in wanted]


def _dry_run(steps: list[Step]) -> int:
    for s in steps:
        commands = [{"argv": list(c.argv), "stdout": c.stdout} for c in s.commands]
        print(
            json.dumps(
                {"name": s.name, "issue": s.issue, "timeout_s": s.timeout_s, "commands": commands}
            )
        )
    return 0


def execute(steps: list[Step], args: argparse.Namespace, t0: float) -> list[Outcome]:
    """Run `steps` in order inside the budget from `t0`; summary and archive after each step."""
    deadline = t0 + args.budget
    for sub in ("logs", "reports", "traces", "bench", "pairs", "scratch"):
        (args.work / sub).mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    outcomes = [Outcome(s.name, s.issue) for s in steps]
    for i, step in enumerate(steps):
        left = deadline - time.time() - PACK_RESERVE_S
        if left < MIN_STEP_S:
            outcomes[i].status = "skipped: no time"
            continue
        timeout = min(step.timeout_s * (REHEARSAL_SLACK if args.rehearse else 1), left)
        print(f"[{time.time() - t0:5.0f} s] {step.name} (at most {timeout:.0f} s)", flush=True)
        outcomes[i] = run_step(step, args.work, timeout)
        o = outcomes[i]
        print(f"          {o.status}, {o.seconds:.1f} s: {o.figure}", flush=True)
        _write(args.work, args.out, outcomes, args, t0)
        if step.name == "cuda-visible" and o.status != "ok":
            break  # no GPU: the rest would measure a CPU at GPU sizes until the budget ran out
    return outcomes


def main(argv: list[str] | None = None) -> int:
    """Run the plan inside the budget; 0 when every step passed, else 1 (the summary says which)."""
    args = _parse(argv)
    steps = _select(plan(Mode(sys.executable, args.work, args.rehearse)), args.steps)
    if args.dry_run:
        return _dry_run(steps)
    t0 = args.t0 or time.time()
    if args.setup_log and Path(args.setup_log).exists():
        (args.work / "logs").mkdir(parents=True, exist_ok=True)
        shutil.copy(args.setup_log, args.work / "logs" / "wheels.log")
    outcomes = execute(steps, args, t0)
    text = _write(args.work, args.out, outcomes, args, t0)
    size = (args.out / ARCHIVE).stat().st_size
    print(f"\narchive: {args.out / ARCHIVE} ({size / 2**20:.1f} MiB); work folder: {args.work}\n")
    print(text, end="", flush=True)
    return 0 if all(o.status == "ok" for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
