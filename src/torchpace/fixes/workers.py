"""One worker-count policy: how many DataLoader workers fit a run, and whether they will pay.

Used by `fast_loader` (a few items probed, no step: `for_loading`), by `dataloader-stall` (a
measured stall: `advise`) and by `loader-config` (a configured count: `oversubscribed`); all of
them tell waiting from computing by `waits`. Standard library only: the trace rules import it.

The model. Workers take the loading off the training loop, so a step can shrink to
max(rest of the step, per-batch load / workers); they are paid for in cores:
- with an accelerator the training process mostly waits on the device, so workers up to the cores
  of its rank cost little (at most 8: beyond that host memory and start-up grow, not throughput);
- on a CPU run the step's math already uses every core through torch's threads, so a worker that
  computes (decodes, augments, collates) takes its core from the math, and moving a batch between
  processes costs a copy. Measured on 2 cores: one worker made a VAE step on MNIST (cheap samples)
  54% slower. Only loading that waits (disk, network, a remote store) hides for free there.
So: on a CPU run workers are prescribed only for loading known to wait rather than compute, and
otherwise said to be uncertain or unlikely to pay, with the measurement that would settle it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from torchpace.policy.devices import Device, is_accelerator
from torchpace.policy.threads import cores_per_process

Pays = Literal["likely", "uncertain", "unlikely"]

MAX_WORKERS = 8
# Cores per rank assumed when only a trace is known: a typical GPU node gives each GPU 4 or more.
ASSUMED_SHARE = 4
# Below this share of its wall time on the CPU, the main process's loading mostly waits (I/O).
IO_BOUND_CPU_FRACTION = 0.5
VERIFY = "`torchpace doctor --verify` measures it on this script"


@dataclass(frozen=True)
class Host:
    """Where the run trains: usable cores (None: unknown), ranks on this machine, the device."""

    cores: int | None = None
    local_ranks: int = 1
    device: Device = "unknown"

    @property
    def accelerator(self) -> bool:
        return is_accelerator(self.device)

    @property
    def share(self) -> int | None:
        """Cores per rank on this machine (None: unknown)."""
        return None if self.cores is None else cores_per_process(self.cores, self.local_ranks)


@dataclass(frozen=True)
class Stall:
    """What a run measured of its input pipeline, per step (milliseconds).

    Args:
        wait_ms: time the training loop waited inside the DataLoader per step.
        workers: workers in use (0: the main process loads).
        floor_ms: time the step cannot drop below whatever the loader does (GPU busy time).
        cpu_fraction: share of the wait the main thread spent on its CPU (thread CPU time / wall),
            meaningful with 0 workers; None when not measured (a trace alone).
    """

    wait_ms: float
    step_ms: float
    workers: int = 0
    floor_ms: float | None = None
    cpu_fraction: float | None = None

    @property
    def rest_ms(self) -> float:
        return max(self.step_ms - self.wait_ms, 0.0)

    @property
    def load_ms(self) -> float:
        """One batch's load time in one process: the wait itself, or the workers' pace."""
        return self.wait_ms if self.workers == 0 else self.step_ms * self.workers

    @property
    def io_bound(self) -> bool | None:
        """True when the loading mostly waits; None when unknown (or workers load)."""
        if self.cpu_fraction is None or self.workers > 0:
            return None
        return waits(self.cpu_fraction)


def waits(cpu_fraction: float) -> bool:
    """Whether loading that computed this share of its (uncontended) wall time mostly waits."""
    return cpu_fraction < IO_BOUND_CPU_FRACTION


@dataclass(frozen=True)
class Advice:
    """Workers to use, whether they are expected to pay, and why (one sentence)."""

    workers: int
    pays: Pays
    reason: str


def default_workers(host: Host) -> int:
    """Workers when nothing is known of the data (fast_loader, bench): fitted to cores and device.

    Accelerator: one per core of the rank's share, at most 8, none below 2 cores (on 2 cores 2
    workers beat 1 with CPU decoding, benchmarks/bench_data_loader.py). CPU run: half the share
    (the math keeps the other half), none below 4 cores.
    """
    share = host.share
    if share is None:
        return 0
    if host.accelerator:
        return 0 if share < 2 else min(MAX_WORKERS, share)
    return 0 if share < 4 else min(MAX_WORKERS, share // 2)


def for_loading(host: Host, io_bound: bool | None) -> int:
    """Workers when the loading's kind is known but not the step (fast_loader probes a few items):
    loading that waits gets the most workers worth having for it here (their waits overlap and
    need no core); loading that computes, or unknown, gets `default_workers`."""
    return _cap(host, True) if io_bound and host.share is not None else default_workers(host)


def _cap(host: Host, io_bound: bool | None, assumed: int = ASSUMED_SHARE) -> int:
    """The most workers worth having for this loading on this host (`assumed` without cores)."""
    share = host.share
    if share is None:
        return assumed
    if io_bound:  # waiting workers need no core
        return MAX_WORKERS if host.accelerator else min(MAX_WORKERS, max(2, 2 * share))
    if host.accelerator:
        return min(MAX_WORKERS, share)
    return min(MAX_WORKERS, max(1, share // 2))


def _pays(host: Host, io_bound: bool | None) -> tuple[Pays, str]:
    share = host.share
    if io_bound:
        return "likely", "the loading waits (I/O) rather than computes, so workers hide it"
    if host.accelerator:
        if share is None or share >= 2:
            return "likely", "the training process mostly waits on the device"
        return "uncertain", "one core per rank: a worker competes with the process feeding the GPU"
    few = share is not None and share <= 2
    if io_bound is False:
        if few:
            return "unlikely", (
                f"the loading computes and this CPU run has {share} core(s) per rank: a worker "
                "takes its core from the math and adds a copy per batch"
            )
        return "uncertain", "the loading computes: workers take cores from the math"
    return "uncertain", (
        "on a CPU run workers pay when the loading waits (disk, network) and can slow the step "
        "when it computes (they take cores from the math)"
    )


def advise(host: Host, stall: Stall, *, assumed: int = ASSUMED_SHARE) -> Advice:
    """Workers for a measured stall: enough to hide the load behind the rest of the step.

    `assumed`: the most workers when the host's cores are unknown (a trace alone).
    """
    cap = _cap(host, stall.io_bound, max(1, assumed))
    pays, why = _pays(host, stall.io_bound)
    if stall.workers >= cap:
        return Advice(
            stall.workers,
            "unlikely",
            f"{stall.workers} workers already use what {_cores(host)} allow: make each batch "
            "cheaper to load instead",
        )
    pace = max(stall.rest_ms, stall.floor_ms or 0.0, 1e-3)
    # One spare worker: batches do not all take the same time to load.
    need = math.ceil(stall.load_ms / pace) + 1
    return Advice(min(cap, max(need, stall.workers + 1)), pays, why)


def candidates(suggested: int, current: int, host: Host) -> list[int]:
    """Worker counts `doctor --verify` measures around a suggestion: half, it, double.

    Only counts above `current` and within what the host can run (twice its cores per rank,
    at most MAX_WORKERS: workers that wait on I/O need no core of their own).
    """
    share = host.share
    cap = MAX_WORKERS if share is None else min(MAX_WORKERS, max(2, 2 * share))
    suggested = max(suggested, current + 1)
    around = {max(current + 1, suggested // 2), suggested, 2 * suggested}
    return sorted(n for n in around if current < n <= cap)


def oversubscribed(host: Host, workers: int) -> int | None:
    """The count to use instead when `workers` exceed the cores of a rank; None when they fit."""
    share = host.share
    if share is None or workers <= share:
        return None
    return max(1, default_workers(host)) if host.accelerator else _cap(host, io_bound=False)


def _cores(host: Host) -> str:
    share = host.share
    if share is None:
        return "the cores"
    ranks = f" per rank ({host.local_ranks} ranks)" if host.local_ranks > 1 else ""
    return f"{share} core(s){ranks}"
