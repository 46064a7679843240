"""DataLoader settings that do not fit this machine: workers against cores and ranks, pinning, reuse."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.doctor.live import Inspection, LoaderFacts


def _where(f: LoaderFacts) -> str:
    return f" (DataLoader at {f.created_at.file}:{f.created_at.line})" if f.created_at else ""


def _cores_per_rank(live: Inspection) -> int:
    return max(1, (live.cpu_cores or 1) // max(1, live.world_size))


def _workers(live: Inspection, f: LoaderFacts, min_wait: float) -> Finding | None:
    cores = _cores_per_rank(live)
    rank_note = f" for each of {live.world_size} ranks" if live.world_size > 1 else ""
    if f.num_workers > cores:
        best = max(1, cores - 1)
        return Finding(
            rule="loader-config",
            severity=Severity.MEDIUM,
            summary=f"num_workers={f.num_workers} but only {cores} core(s){rank_note}: workers "
            f"and the training loop fight over cores{_where(f)}",
            evidence={"num_workers": f.num_workers, "cores_per_rank": cores},
            fix=f"DataLoader(..., num_workers={best}, persistent_workers=True)",
            locations=(f.created_at,) if f.created_at else (),
        )
    wait = f.wait_fraction
    if f.num_workers > 0 and wait is not None and wait >= min_wait and not f.live_source:
        return _starved(live, f, wait, cores)
    if f.num_workers > 0 or wait is None or wait < min_wait or f.live_source:
        return None  # a live buffer (RL) must stay in the main process: workers see stale copies
    if f.iterable and not f.shards_by_worker:
        return None  # iterable-duplication says how to shard it first
    saving = wait * live.step_ms if live.step_ms else None
    if cores < 2:
        return Finding(
            rule="loader-config",
            severity=Severity.LOW,
            summary=f"each step waits {wait:.0%} of its time for batches, and there is only "
            f"{cores} core{rank_note}: workers would compete with training{_where(f)}",
            evidence={"wait_fraction": wait, "cores_per_rank": cores, "num_workers": 0},
            fix="make __getitem__ cheaper (pre-decode, cache tensors), or run on more cores",
            locations=(f.created_at,) if f.created_at else (),
        )
    best = min(cores - 1, 8)
    return Finding(
        rule="loader-config",
        severity=Severity.HIGH if wait >= 0.3 else Severity.MEDIUM,
        summary=f"batches are loaded in the training process (num_workers=0) and each step waits "
        f"{wait:.0%} of its time for them{_where(f)}",
        evidence={"wait_fraction": wait, "num_workers": 0, "cores_per_rank": cores},
        fix=f"DataLoader(..., num_workers={best}, persistent_workers=True, prefetch_factor=2)",
        saving_ms=saving,
        saving_method="time inside DataLoader.__next__ per profiled step (an upper bound: "
        "workers hide it only while spare cores exist)",
        locations=(f.created_at,) if f.created_at else (),
        caveat="Workers need a picklable dataset; random augmentations get per-worker seeds.",
    )


def _starved(live: Inspection, f: LoaderFacts, wait: float, cores: int) -> Finding:
    """Workers exist but the step still waits: more workers if cores are spare, else cheaper data."""
    saving = wait * live.step_ms if live.step_ms else None
    where = (f.created_at,) if f.created_at else ()
    evidence: dict[str, EvidenceValue] = {
        "wait_fraction": wait,
        "num_workers": f.num_workers,
        "cores_per_rank": cores,
        "prefetch_factor": f.prefetch_factor,
    }
    if f.num_workers < cores - 1:
        best = min(cores - 1, 16)
        return Finding(
            rule="loader-config",
            severity=Severity.HIGH if wait >= 0.3 else Severity.MEDIUM,
            summary=f"each step waits {wait:.0%} of its time for batches with only "
            f"{f.num_workers} worker(s) while {cores} cores are available{_where(f)}",
            evidence=evidence,
            fix=f"DataLoader(..., num_workers={best}, persistent_workers=True, prefetch_factor=4)",
            saving_ms=saving,
            saving_method="time inside DataLoader.__next__ per profiled step (an upper bound)",
            locations=where,
        )
    return Finding(
        rule="loader-config",
        severity=Severity.MEDIUM,
        summary=f"each step waits {wait:.0%} of its time for batches although {f.num_workers} "
        f"workers already use the {cores} cores: loading itself is too slow{_where(f)}",
        evidence=evidence,
        fix="make each item cheaper: decode/resize once offline, move augmentation to the GPU, "
        "or cache decoded tensors; prefetch_factor only smooths bursts",
        saving_ms=saving,
        saving_method="time inside DataLoader.__next__ per profiled step (an upper bound)",
        locations=where,
        caveat="More workers than cores would make this slower, not faster.",
    )


def _pinning(live: Inspection, f: LoaderFacts) -> Finding | None:
    accelerator = live.device_kind in ("cuda", "rocm")
    if accelerator and not f.pin_memory:
        return Finding(
            rule="loader-config",
            severity=Severity.MEDIUM,
            summary=f"batches come from pageable memory (pin_memory=False), so host-to-device "
            f"copies cannot overlap compute{_where(f)}",
            evidence={"pin_memory": False, "device": live.device_kind},
            fix="DataLoader(..., pin_memory=True)\nx = x.to(device, non_blocking=True)",
            locations=(f.created_at,) if f.created_at else (),
        )
    if not accelerator and f.pin_memory and not live.accelerator_count:
        return Finding(
            rule="loader-config",
            severity=Severity.LOW,
            summary=f"pin_memory=True with no accelerator: every batch is copied into pinned "
            f"memory for nothing{_where(f)}",
            evidence={"pin_memory": True, "device": live.device_kind},
            fix="DataLoader(..., pin_memory=torch.cuda.is_available())",
            locations=(f.created_at,) if f.created_at else (),
        )
    return None


def _reuse(f: LoaderFacts) -> Finding | None:
    if f.num_workers == 0 or f.persistent_workers:
        return None
    many = f.epochs_started > 1
    return Finding(
        rule="loader-config",
        severity=Severity.MEDIUM if many else Severity.LOW,
        summary=f"{f.num_workers} workers are started again for every epoch "
        f"(persistent_workers=False){_where(f)}",
        evidence={"num_workers": f.num_workers, "epochs_started": f.epochs_started},
        fix="DataLoader(..., persistent_workers=True)",
        locations=(f.created_at,) if f.created_at else (),
        caveat="" if many else "Only one epoch was seen; this costs a pause at each epoch start.",
    )


def _live_buffer(f: LoaderFacts) -> Finding | None:
    if not f.live_source or f.num_workers == 0:
        return None
    return Finding(
        rule="loader-config",
        severity=Severity.MEDIUM,
        summary=f"{f.dataset_type} reads a live buffer but runs in {f.num_workers} worker "
        f"process(es): each worker reads its own stale copy{_where(f)}",
        evidence={"num_workers": f.num_workers, "live_source": True},
        fix="DataLoader(live_dataset, num_workers=0)  # sample from the buffer in the main process",
        locations=(f.created_at,) if f.created_at else (),
        caveat="Judged from the dataset holding a deque or queue; a buffer shared through "
        "shared memory or a server is fine with workers.",
    )


@rule("loader-config", input="live")
def loader_config(live: Inspection, *, min_wait_fraction: float = 0.05) -> list[Finding]:
    """Check each DataLoader's workers, pinning and worker reuse against the machine and workload."""
    if not live.loaders:
        raise NotApplicable("the script created no DataLoader")
    found = []
    for f in live.loaders:
        checks = (_workers(live, f, min_wait_fraction), _pinning(live, f), _reuse(f))
        found += [c for c in (*checks, _live_buffer(f)) if c is not None]
    return found
