"""The doctor's one path: run the script (runner/), analyze what it recorded, optionally verify.

Where the live runner (runner/) and the diagnosis engine (doctor/) meet: this gathers what the run
measured (its sensors' Inspection, the machine's load, the window it profiled, its own notes: how
steps were found, how the script ended, where the traces are) into a Recording
(doctor/recording.py), and `torchpace.analyze` applies it with the traces; then --verify measures
the fixes, or a note says which it could (torchpace.verify). cli/doctor.py only parses arguments,
reports and picks the exit code.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.recording import Recording
from torchpace.errors import UsageError
from torchpace.policy.window import MIN_STEPS
from torchpace.runner.options import DoctorOptions
from torchpace.runner.run import RunHooks, RunResult, Target
from torchpace.runner.sensors.inspection import ChildProcesses, Inspection
from torchpace.runner.sensors.memory import MemoryRecord

if TYPE_CHECKING:
    from torchpace.doctor.diagnose import Thresholds
    from torchpace.verify import VerifyOptions


def run(target: Target, options: DoctorOptions, nproc: int, hooks: RunHooks) -> list[RunResult]:
    """Run the script under the doctor: in this process, or one process per rank (torchrun)."""
    if nproc > 1:
        from torchpace.runner.launch import run_distributed

        results = [o.result for o in run_distributed(target, options, nproc)]
        if not results:
            raise UsageError(f"none of the {nproc} ranks reported a result")
        return results
    from torchpace.runner.run import run_target
    from torchpace.runner.spawned import SpawnedRanks

    with SpawnedRanks(target, options) as spawned:
        result = run_target(target, options, hooks)
    children = spawned.results()
    if not any(c.steps_recorded for c in children) and result.steps_recorded:
        return [result]  # the processes did other work (a preprocessing pool): it trained
    return [_as_parent_ended(r, result) for r in children] or [result]


def _as_parent_ended(child: RunResult, parent: RunResult) -> RunResult:
    """A spawned process's result, with the script's exit where the process itself ended well:
    the script is the parent (its error after the spawn is what `python SCRIPT` shows)."""
    if child.exit_code or not parent.exit_code:
        return child
    return replace(child, exit_code=parent.exit_code, error=parent.error)


SPAWNED_VERIFY = (
    "--verify did not run: the training ran in processes the script spawned, and the fixes it "
    "measures are switched on in the script's own process; measure them by hand there"
)


def checkup(
    results: Sequence[RunResult],
    options: DoctorOptions,
    target: Target,
    *,
    only: list[str] | None = None,
    ignore: list[str] | None = None,
    thresholds: Thresholds | None = None,
    verify: VerifyOptions | None = None,
    say: Callable[[str], None] | None = None,
) -> Diagnosis | None:
    """The report of a doctor run (None when no trace was recorded: `no_steps_message` says
    why): about the script, not the trace file it left, with advice its user can take; with
    `verify`, each fix measured on fresh runs of a script that ran to its end, else a note
    naming what --verify could measure."""
    if say is not None:
        say("analysing the trace")
    diagnosis = doctor_diagnosis(
        results, options, command(target), only=only, ignore=ignore, thresholds=thresholds
    )
    if diagnosis is None:
        return None
    from torchpace.verify import context_of, verify_hint
    from torchpace.verify import verify as measure_fixes

    if any(r.spawned for r in results):  # its fixes would reach the parent, not the training
        return replace(diagnosis, notes=(*diagnosis.notes, SPAWNED_VERIFY)) if verify else diagnosis
    if verify is None:
        return verify_hint(diagnosis, command(target)) if len(results) == 1 else diagnosis
    if any(r.exit_code for r in results):
        return diagnosis
    if say is not None:
        say("verifying the fixes")
    return measure_fixes(diagnosis, _words(target), context_of(diagnosis), verify, say)


def command(target: Target) -> str:
    """The command as the user gave it: `train.py --epochs 1` or `-m pkg.train --lr 3e-4`."""
    return shlex.join(_words(target))


def _words(target: Target) -> list[str]:
    return [*(["-m", target.name] if target.module else [target.name]), *target.args]


def no_steps_message(r: RunResult, options: DoctorOptions) -> str:
    """Why a run left no trace to analyse, and what to do."""
    if r.aside:
        return "the script ran its own torch.profiler and wrote no trace torchpace could find"
    children = r.inspection.child_processes
    if children is not None and children.did_the_work():
        return children_sentence(children)
    if r.steps_recorded:
        why = "; ".join(n for n in r.notes if "could not" in n) or "see the notes above"
        return f"{r.steps_recorded} step(s) were profiled but no trace could be written ({why})"
    if r.exit_code != 0 or r.terminated:
        what = "was stopped by SIGTERM" if r.terminated else f"exited with status {r.exit_code}"
        return (
            f"the script {what} before any profiled step ended ({r.step_note}); "
            "the traceback above, if any, says why"
        )
    if r.step_source is None:
        return (
            "no training steps were found: the script made no optimizer.step(), DataLoader "
            "batch or backward() call"
            + (" before --max-seconds" if r.timed_out else "")
            + "; is this the training entry point? (training in processes the script spawns "
            "itself is not seen: launch it with --nproc-per-node)"
        )
    if r.timed_out:
        return (
            f"no step was profiled before --max-seconds {options.max_seconds:g} "
            f"({r.step_note}); allow more time or use --warmup 1"
        )
    return (
        f"no step was profiled: the script ended during the {options.warmup} warm-up steps "
        f"({r.step_note}); use --warmup 1 or give it more steps (e.g. more epochs)"
    )


def children_sentence(c: ChildProcesses) -> str:
    """The training ran in processes the script started: say so, and what to run instead."""
    where = f" at {c.started_at}" if c.started_at else ""
    return (
        f"the training ran in {c.count} process(es) the script started itself{where} "
        f"(target {c.target}; {c.cpu_s:.1f} s of CPU there against {c.main_cpu_s:.1f} s in the "
        "main process), which torchpace doctor does not profile: the findings describe only "
        "the main process. To diagnose the training, run its function in the main process "
        "(e.g. one worker, without multiprocessing), or launch it with torchrun and use "
        "torchpace doctor --nproc-per-node N, or profile inside the worker with torch.profiler "
        "and run torchpace analyze on its trace"
    )


def _verdict_caveat(
    kept: Sequence[RunResult], head: RunResult, options: DoctorOptions
) -> tuple[str, bool]:
    """What the verdict says first (window_caveat), led by the training's processes when the
    script started them: the findings are not the training's (mnist_hogwild: its main process's
    one pass over the test set read as 61% of each step decoding)."""
    caveat, short = window_caveat(kept, options)
    children = head.inspection.child_processes
    if children is not None and children.did_the_work():
        caveat = "; ".join(x for x in (children_verdict(children), caveat) if x)
    return caveat, short


def children_verdict(c: ChildProcesses) -> str:
    """The verdict's first words when the training ran in processes the script started."""
    where = f" at {c.started_at}" if c.started_at else ""
    return (
        f"the training ran in {c.count} process(es) the script started itself{where}, which the "
        "doctor does not profile: the findings describe the main process only (the notes say "
        "what to run instead)"
    )


# complex: one note per condition of the run, in the order the report lists them.
def run_notes(results: Sequence[RunResult], options: DoctorOptions) -> list[str]:
    """How steps were found, how the script ended, and where the traces are."""
    head = results[0]
    notes = [
        f"{head.step_note}; {options.warmup} warm-up step(s) skipped, "
        f"{head.steps_recorded} profiled"
    ]
    if head.inspection.model.steps:
        notes.append(
            f"live objects watched during the last {head.inspection.model.steps} warm-up "
            "step(s), outside the profiled ones"
        )
    for i, r in enumerate(results):
        own = r is head or len(results) == 1
        notes += [n if own or n in head.notes else f"rank {_rank(r, i)}: {n}" for n in r.notes]
    children = head.inspection.child_processes
    if children is not None and children.did_the_work():
        notes.insert(0, children_sentence(children))
    if head.inspection.model.forward_bypass is not None:
        notes.append(head.inspection.model.unwatched_reason())
    failed = [r for r in results if r.exit_code != 0]
    if failed:
        code = failed[0].exit_code
        what = "was interrupted" if code == 130 else f"exited with status {code}"
        if failed[0].terminated:
            what = "was stopped by SIGTERM"
        shown = "; its traceback is shown above" if failed[0].error else ""
        notes.append(f"the script {what}{shown}; the report covers the steps captured before that")
    elif head.stopped_early:
        notes.append(
            "the doctor stopped the script after its profiled steps (--full lets it finish)"
        )
    traces = [t for r in results for t in r.trace_files]
    if traces:
        folder = os.path.dirname(traces[0]) or "."
        notes.append(
            f"trace{'s' if len(traces) > 1 else ''} written to {folder}/: open "
            f"{os.path.basename(traces[0])} in https://ui.perfetto.dev, or run "
            f"tensorboard --logdir {folder} (torch-tb-profiler)"
        )
    return notes


def doctor_diagnosis(
    results: Sequence[RunResult],
    options: DoctorOptions,
    title: str = "",
    *,
    only: list[str] | None = None,
    ignore: list[str] | None = None,
    thresholds: Thresholds | None = None,
) -> Diagnosis | None:
    """Diagnose every rank's trace with rank 0's live facts and what the run measured (the
    Recording titled `title`); None when no trace was recorded.

    A rank whose window is too short to judge (fewer than MIN_STEPS) is named and left out of
    the cross-rank comparison while others have usable windows: compared, its 0 ms of work read
    as a 150% straggler."""
    from torchpace.analysis import analyze

    usable = [r for r in results if r.trace_files and _profiled(r, options) >= _needed(options)]
    kept = usable if usable and len(results) > 1 else list(results)
    paths = [t for r in kept for t in r.trace_files]
    head = results[0]
    caveat, short = _verdict_caveat(kept, head, options)
    left_out = [_left_out(r, i) for i, r in enumerate(results) if r not in kept]
    recording = Recording(
        title,
        notes=(*run_notes(results, options), *left_out),
        conditions=head.conditions,
        ready_ms={
            _rank(r, i): r.conditions.ready_ms_per_step
            for i, r in enumerate(kept)
            if r.conditions is not None and r.conditions.ready_ms_per_step is not None
        },
        caveat=caveat,
        short=short,
        torch_version=head.torch_version,
        ranks_here=len(results),
        apart=head.apart,  # the processes of one Hogwild run all say it
    )
    live = with_any_ranks_oom(results)
    if not paths:  # no trace: a script that ran out of memory still gets its report
        return _out_of_memory(live, recording)
    # In-process decoding (jobs=1): this process still holds the script's memory and may still
    # have its threads. The doctor's report is small next to its run: always carry the top
    # tables for HTML output.
    return analyze(
        paths, only=only, ignore=ignore, jobs=1, thresholds=thresholds, top=True,
        live=live, recording=recording,
    )  # fmt: skip


def with_any_ranks_oom(results: Sequence[RunResult]) -> Inspection:
    """Rank 0's live facts, with the out-of-memory of the first rank that ran out (named: under
    torchrun it is often not rank 0, and the others then die of the broken collective)."""
    head = results[0].inspection
    if len(results) == 1 and head.world_size <= 1:
        return head
    # Every rank may not report: torchrun's agent ends the others (SIGTERM) once one failed.
    for i, r in enumerate(results):
        memory = r.inspection.memory
        if memory is not None and memory.oom is not None:
            oom = memory.oom
            process = ", ".join(p for p in (f"rank {_rank(r, i)}", oom.process) if p)
            mine = head.memory or MemoryRecord()
            return replace(head, memory=replace(mine, oom=replace(oom, process=process)))
    return head


def _out_of_memory(live: Inspection, recording: Recording) -> Diagnosis | None:
    """The out-of-memory that ended the script before a profiled step did, explained from what
    the sensors saw then (doctor/oom.py); None when it did not run out of memory."""
    if live.memory is None or live.memory.oom is None:
        return None
    from torchpace.doctor.oom import oom_diagnosis

    return oom_diagnosis(live, recording)


def _profiled(r: RunResult, options: DoctorOptions) -> int:
    """Steps the doctor profiled; a script that ran its own profiler is analysed from its own
    trace, whose window is the script's to choose (counted as whole)."""
    return options.steps if r.aside and r.trace_files else r.steps_recorded


def _needed(options: DoctorOptions) -> int:
    """Profiled steps a window needs for step-time verdicts."""
    return min(MIN_STEPS, options.steps)


def _rank(r: RunResult, position: int) -> int:
    return r.rank if r.rank is not None else position


def _left_out(r: RunResult, position: int) -> str:
    """Why a rank's window is not compared with the others'."""
    why = "no trace was written" if not r.trace_files else f"{r.steps_recorded} profiled step(s)"
    return (
        f"rank {_rank(r, position)} is not compared with the others: {why}, too few to judge "
        f"its step time (at least {_needed_text()}); its notes say why"
    )


def _needed_text() -> str:
    return f"{MIN_STEPS} are needed"


def window_caveat(results: Sequence[RunResult], options: DoctorOptions) -> tuple[str, bool]:
    """What the verdict must say first when the profiled window is short of `options.steps`, and
    whether it is too short for step-time verdicts (fewer than MIN_STEPS on some rank)."""
    counts = [_profiled(r, options) for r in results]
    fewest = min(counts)
    if fewest >= options.steps:
        return "", False
    where = ""
    if len(results) > 1:
        short = [str(_rank(r, i)) for i, r in enumerate(results) if counts[i] == fewest]
        where = f" on rank{'s' if len(short) > 1 else ''} {', '.join(short)}"
    text = f"{fewest} of {options.steps} steps profiled{where} (the notes say why)"
    if fewest < _needed(options):
        return (
            f"{text}: too few for step-time verdicts, which are withheld (at least "
            f"{_needed_text()}); the findings left come from the live inspection",
            True,
        )
    return text, False
