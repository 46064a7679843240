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


def _allocator_tip(live: Inspection) -> str:
    advice = malloc.preload_advice() if live.host.allocator == "glibc" else ""
    if advice:
        return f"\n# allocation-heavy CPU runs also gain from jemalloc or tcmalloc:\n{advice}"
    return ""


@rule("cpu-threads", input="live")
def cpu_threads(live: Inspection, *, idle_share: float = 0.5) -> list[Finding]:
    """Threads x ranks above the cores fight (and spin); far below them leave cores idle."""
    if live.device.kind != "cpu":
        raise NotApplicable("the model runs on an accelerator; host threads matter less there")
    if not live.host.torch_threads or not live.host.cores:
        raise NotApplicable("thread and core counts were not recorded")
    cores, threads, ranks = live.host.cores, live.host.torch_threads, max(1, live.world_size)
    per_rank = cores_per_process(cores, ranks)
    used = threads * ranks
    workers = sum(f.num_workers for f in live.loaders)
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
