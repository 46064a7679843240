"""CPU training with torch's threads over- or under-subscribing the cores this process may use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.environment import malloc
from torchpace.fixes.policy import threads_code
from torchpace.policy.threads import cores_per_process

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection


def _context(live: Inspection) -> dict[str, int | str | None]:
    return {
        "torch_threads": live.host.torch_threads,
        "cores": live.host.cores,
        "world_size": live.world_size,
        "loader_workers": sum(f.num_workers for f in live.loaders),
        "omp_num_threads": live.host.omp_num_threads,
        "mkl_num_threads": live.host.mkl_num_threads,
        "allocator": live.host.allocator,
        "numa_nodes": live.host.numa_nodes,
    }


def _contended(live: Inspection, used: int, share: float) -> Finding | None:
    """torch's threads fighting other processes for the cores: more threads than the cores the
    others left free, and the training thread ready to run but held off a core for `share` of
    its step. An op's threads meet at a barrier, so one thread held off a core holds all of
    them: under two busy loops on 2 cores, ignite's MNIST steps took 340 ms, 24 ms quiet."""
    host, step = live.host, live.step_ms
    if host.others_cores is None or host.ready_ms_per_step is None or not step or not host.cores:
        return None
    free = max(1, int(host.cores - host.others_cores + 0.5))
    waited = host.ready_ms_per_step / step
    if used <= free or waited < share:
        return None
    ranks = max(1, live.world_size)
    fit = cores_per_process(free, ranks)
    evidence = {
        **_context(live),
        "others_cores": round(host.others_cores, 2),
        "free_cores": free,
        "ready_ms_per_step": round(host.ready_ms_per_step, 2),
        "ready_step_fraction": round(waited, 3),
    }
    return Finding(
        rule="cpu-threads",
        severity=Severity.HIGH if waited >= 0.5 else Severity.MEDIUM,
        summary=f"other processes kept {host.others_cores:.1f} of {host.cores} cores busy, and "
        f"{used} torch thread(s) shared the {free} left: the training thread waited "
        f"{host.ready_ms_per_step:.1f} ms of each {step:.1f} ms step ({waited:.0%}) for a core, "
        "and every op waits for its slowest thread",
        evidence=evidence,
        fix=threads_code(fit, ranks) + "  # while the machine is this busy",
        caveat="This measures the machine's load, not the script: on a quiet machine the "
        "current thread count is right. The step's shares in this report are inflated by the "
        "load (compute more than data loading); run again on a quiet machine for the script's "
        "own shares, or `torchpace doctor --verify` to measure the fewer threads here.",
        load_proof=True,  # it measures the load: capping it for the load would hide it
    )


def _allocator_tip(live: Inspection) -> str:
    advice = malloc.preload_advice() if live.host.allocator == "glibc" else ""
    if advice:
        return f"\n# allocation-heavy CPU runs also gain from jemalloc or tcmalloc:\n{advice}"
    return ""


@rule("cpu-threads", input="live")
def cpu_threads(
    live: Inspection, *, idle_share: float = 0.5, contended_share: float = 0.25
) -> list[Finding]:
    """Threads x ranks above the cores fight (and spin); far below them leave cores idle; on a
    busy machine, threads above the cores other processes leave free fight those processes, which
    shows as the training thread waiting `contended_share` of its step for a core."""
    if live.device.kind != "cpu":
        raise NotApplicable("the model runs on an accelerator; host threads matter less there")
    if not live.host.torch_threads or not live.host.cores:
        raise NotApplicable("thread and core counts were not recorded")
    cores, threads, ranks = live.host.cores, live.host.torch_threads, max(1, live.world_size)
    per_rank = cores_per_process(cores, ranks)
    used = threads * ranks
    workers = sum(f.num_workers for f in live.loaders)
    contended = _contended(live, used, contended_share)
    if used <= cores and contended is not None:
        return [contended]
    if used > cores:
        return [
            Finding(
                rule="cpu-threads",
                severity=Severity.HIGH,
                summary=f"{ranks} process(es) x {threads} torch threads = {used} threads on "
                f"{cores} cores: threads wait for each other in every op",
                evidence=_context(live),
                fix=threads_code(per_rank, ranks) + _allocator_tip(live),
            )
        ]
    if threads + workers < per_rank * idle_share and per_rank >= 4:
        return [
            Finding(
                rule="cpu-threads",
                severity=Severity.MEDIUM,
                summary=f"torch uses {threads} thread(s) while {per_rank} cores are free for "
                "this process: most cores sit idle",
                evidence=_context(live),
                fix=threads_code(per_rank)
                + "  # and unset a smaller OMP_NUM_THREADS"
                + _allocator_tip(live),
                caveat="Other processes on this machine may need those cores.",
            )
        ]
    return []
