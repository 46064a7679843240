"""CPU training whose torch threads fight other processes on a busy machine for the cores."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.fixes.policy import threads_code
from torchpace.policy.threads import (
    MIN_READY_FRACTION,
    Contention,
    FewerThreads,
    cores_per_process,
)

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

CAVEAT = (
    "This measures the machine's load, not the script: on a quiet machine the current thread "
    "count may be right. The step's shares in this report are inflated by the load (compute "
    "more than data loading); run again on a quiet machine for the script's own shares, or "
    "`torchpace doctor --verify` to measure the fewer threads here."
)
# Ranks of one thread each: nothing spins at a barrier, and no count is lower.
ONE_THREAD_CAVEAT = (
    "This measures the machine's load, not the script: on a quiet machine the ranks may fit the "
    "cores. The step's shares in this report count the wait for a core; where a rule judged one "
    "under the load, its caveat says how."
)


@rule("cpu-contention", input="live")
def cpu_contention(
    live: Inspection, *, min_ready_fraction: float = MIN_READY_FRACTION, min_gain: float = 1.05
) -> list[Finding]:
    """torch's threads outnumber the cores other processes left free, and the training thread
    waited `min_ready_fraction` of its step ready to run, held off a core. An op's threads meet
    at a barrier, so one thread held off its core holds them all: beside two busy loops on 2
    cores, ignite's MNIST steps took 340 ms, 24 ms on a quiet machine. Where the doctor timed
    steps at the fitted count (policy/threads.FewerThreads), the saving is what they measured,
    none where they were no faster: the contention stands measured, its cost varies with the
    load (pytorch/examples' MNIST, two runs beside two busy loops: 171 against 236 ms, then
    238 against 235). Under `min_gain` its fix is not fewer threads, which measured no faster,
    but a quieter machine."""
    host, step = live.host, live.step_ms
    if live.device.kind != "cpu":
        raise NotApplicable("the model runs on an accelerator; host threads matter less there")
    if host.others_cores is None or host.ready_ms_per_step is None or not host.cores:
        raise NotApplicable("the machine's load was not measured (a doctor run on Linux is)")
    if not step or not host.torch_threads:
        raise NotApplicable("no profiled step time or thread count was recorded")
    c = live.contention(min_ready_fraction)
    if c is None or c.free >= host.cores:
        return []  # or the script's threads outnumber the cores by themselves: cpu-threads
    ranks, timed = max(1, live.world_size), _timed(c)
    return [
        Finding(
            rule="cpu-contention",
            # Never HIGH, as every finding measured on a busy machine (doctor/conditions.py):
            # the fix suits this load, which may be gone on the next run.
            severity=Severity.MEDIUM,
            summary=f"other processes kept {host.others_cores:.1f} of {host.cores} cores busy, "
            f"and {c.used} torch thread(s) shared the {c.free} left: the training thread waited "
            f"{host.ready_ms_per_step:.1f} ms of each {step:.1f} ms step ({c.waited:.0%}) for a "
            + (
                "core, the ranks taking turns"
                if c.one_thread
                else "core, and every op waits for its slowest thread"
            )
            + (f"; {c.fewer.said()}" if c.fewer else ""),
            evidence={
                "torch_threads": host.torch_threads,
                "world_size": ranks,
                "cores": host.cores,
                "others_cores": round(host.others_cores, 2),
                "free_cores": c.free,
                "ready_ms_per_step": round(host.ready_ms_per_step, 2),
                "ready_step_fraction": round(c.waited, 3),
                **_measured(c.fewer),
            },
            saving_ms=max(0.0, step * (1.0 - 1.0 / timed.stretch)) if timed else None,
            saving_method="measured: the profiled step shortened by the unprofiled steps' ratio "
            "at the script's threads and at fewer, timed side by side after the window"
            if timed
            else "",
            fix=_fix(c, ranks, min_gain)
            or threads_code(cores_per_process(c.free, ranks), ranks)
            + "  # while the machine is this busy",
            caveat=ONE_THREAD_CAVEAT if c.one_thread else CAVEAT,
        )
    ]


def _fix(c: Contention, ranks: int, min_gain: float) -> str:
    """Where no fewer threads can help (one a rank already), or they measured no faster: what
    is left to do ("" otherwise)."""
    if c.one_thread:
        k = min(ranks - 1, c.free)
        return (
            f"# each of the {ranks} ranks already runs 1 torch thread; {c.free} core(s) were "
            "free,\n# so the ranks took turns: run when (or where) the machine is quiet, or with "
            f"fewer ranks:\ntorchrun --nproc-per-node {k} train.py  # or mp.spawn(..., "
            f"nprocs={k})\n# under DDP fewer ranks make a smaller global batch: scale the "
            "batch or the LR"
        )
    fewer = _timed(c)
    if fewer is None or fewer.stretch >= min_gain:
        return ""
    return (
        f"# torch.set_num_threads({fewer.fewer}) measured no faster on this load: the other\n"
        "# processes cost the time; run when (or where) the machine is quiet"
    )


def _timed(c: Contention) -> FewerThreads | None:
    """The steps at fewer threads where they measured what fewer threads save: not where they
    ran eager against the compiled ones."""
    return c.fewer if c.fewer is not None and not c.fewer.eager else None


def _measured(fewer: FewerThreads | None) -> dict[str, float]:
    """The steps timed at fewer threads, as evidence (their batches' wait against the profiled
    steps', where both were timed: what the loader rules' bounds are of)."""
    if fewer is None:
        return {}
    loading = {} if fewer.loading is None else {"fewer_threads_loading_x": round(fewer.loading, 3)}
    return {
        "fewer_threads_count": fewer.fewer,
        "unprofiled_step_ms": round(fewer.step_ms, 2),
        "fewer_threads_step_ms": round(fewer.fewer_ms, 2),
        "fewer_threads_steps_count": fewer.steps,
        **loading,
    }
