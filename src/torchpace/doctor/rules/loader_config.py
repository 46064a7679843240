"""DataLoader settings that do not fit this machine: workers against cores and ranks, pinning, reuse.

Configuration only: a loader that stalls the steps is `dataloader-stall`'s one finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.fixes import policy
from torchpace.fixes.workers import VERIFY, Host, oversubscribed
from torchpace.policy.devices import is_cuda

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.loader import LoaderFacts

# An epoch longer than this at the measured step time: restarting the workers once per epoch (a
# pause of a second or a few) costs well under 1% of it.
LONG_EPOCH_S = 600.0
# ...and below this, the restart (a second or a few) is a share worth a MEDIUM. Between the two a
# LOW: the sweep's DCGANs restarted 2 workers per 140 s and 55 s epoch, called MEDIUM, and the
# severity flipped with whether the profiled window crossed an epoch's end.
SHORT_EPOCH_S = 30.0


def _where(found: Sequence[Finding]) -> str:
    places = list(dict.fromkeys(f"{loc.file}:{loc.line}" for f in found for loc in f.locations))
    if not places:
        return ""
    which = f"{len(found)} DataLoaders" if len(found) > 1 else "DataLoader"
    return f" ({which} at {', '.join(places)})"


def _host(live: Inspection) -> Host:
    return Host(live.host.cores, max(1, live.world_size), policy.target(live.device.kind).device)


def _workers(live: Inspection, f: LoaderFacts) -> Finding | None:
    """More workers than the cores of a rank: they and the training loop fight over cores.

    A loader that stalls the steps is `dataloader-stall`'s finding (one finding per cause).
    """
    host = _host(live)
    best = oversubscribed(host, f.num_workers)
    if best is None:
        return None
    rank_note = f" for each of {live.world_size} ranks" if live.world_size > 1 else ""
    return Finding(
        rule="loader-config",
        severity=Severity.MEDIUM,
        summary=f"num_workers={f.num_workers} but only {host.share} core(s){rank_note}: workers "
        "and the training loop fight over cores",
        evidence={"num_workers": f.num_workers, "cores_per_rank": host.share},
        fix=f"DataLoader(..., num_workers={best}, persistent_workers=True)",
        locations=(f.created_at,) if f.created_at else (),
        caveat=""
        if host.accelerator
        else "On a CPU run workers that compute take cores from "
        f"the math; workers that wait on I/O need none. {VERIFY}.",
    )


def _pinning(live: Inspection, f: LoaderFacts) -> Finding | None:
    # Only pageable batches on an accelerator: without one torch pins nothing whatever
    # pin_memory says (LoaderFacts.pin_memory is what the iterator does), so pin_memory=True on
    # a CPU run costs nothing.
    if is_cuda(live.device.kind) and not f.pin_memory:
        return Finding(
            rule="loader-config",
            severity=Severity.MEDIUM,
            summary="batches come from pageable memory (pin_memory=False), so host-to-device "
            "copies cannot overlap compute",
            evidence={"pin_memory": False, "device": live.device.kind},
            fix="DataLoader(..., pin_memory=True)\nx = x.to(device, non_blocking=True)",
            locations=(f.created_at,) if f.created_at else (),
        )
    return None


def _epoch_s(f: LoaderFacts, step_ms: float | None) -> float | None:
    """One epoch's length in seconds at the measured step time; None when unknown."""
    if not f.batches_per_epoch or not step_ms:
        return None
    return f.batches_per_epoch * step_ms / 1000.0


def _reuse(f: LoaderFacts, step_ms: float | None) -> Finding | None:
    if f.num_workers == 0 or f.persistent_workers:
        return None
    many = f.epochs_started > 1
    epoch_s = _epoch_s(f, step_ms)
    if not many and epoch_s is not None and epoch_s > LONG_EPOCH_S:
        # One restart per epoch this long is lost in it (minGPT's trainer samples 1e10 items
        # per epoch: its workers start once); an epoch that ended would have shown a restart.
        return None
    length = f" ({f.batches_per_epoch:,} batches, about {epoch_s:.0f} s)" if epoch_s else ""
    short = epoch_s is None or epoch_s < SHORT_EPOCH_S
    return Finding(
        rule="loader-config",
        severity=Severity.MEDIUM if many and short else Severity.LOW,
        summary=f"{f.num_workers} workers are started again for every epoch "
        "(persistent_workers=False)",
        evidence={"num_workers": f.num_workers, "epochs_started": f.epochs_started},
        fix="DataLoader(..., persistent_workers=True)",
        locations=(f.created_at,) if f.created_at else (),
        caveat=(
            ""
            if many and short
            else f"Only one epoch was seen{length}; this costs a pause at each epoch start."
            if not many
            else f"Each epoch is long{length}: the restart is a small share of it."
        ),
    )


def _live_buffer(f: LoaderFacts) -> Finding | None:
    if not f.live_source or f.num_workers == 0:
        return None
    return Finding(
        rule="loader-config",
        severity=Severity.MEDIUM,
        summary=f"{f.dataset_type} reads a live buffer but runs in {f.num_workers} worker "
        f"process(es): each worker reads its own stale copy",
        evidence={"num_workers": f.num_workers, "live_source": True},
        fix="DataLoader(live_dataset, num_workers=0)  # sample from the buffer in the main process",
        locations=(f.created_at,) if f.created_at else (),
        caveat="Judged from the dataset holding a deque or queue; a buffer shared through "
        "shared memory or a server is fine with workers.",
    )


@rule("loader-config", input="live")
def loader_config(live: Inspection) -> list[Finding]:
    """Check each DataLoader's workers, pinning and worker reuse against the machine; one
    finding per cause, naming every loader it holds for (imagenet's train and val loaders gave
    three causes twice each)."""
    if not live.loaders:
        raise NotApplicable("the script created no DataLoader")
    found: list[Finding] = []
    for f in live.loaders:
        if f.epochs_started == 0:
            continue  # never iterated: its workers never started, its batches never came
        checks = (_workers(live, f), _pinning(live, f), _reuse(f, live.step_ms))
        found += [c for c in (*checks, _live_buffer(f)) if c is not None]
    return _one_per_cause(found)


def _one_per_cause(found: Sequence[Finding]) -> list[Finding]:
    """Findings that differ only in which loader they are about, as one naming every loader."""
    groups: dict[tuple[object, ...], list[Finding]] = {}
    for f in found:
        key = (f.severity, f.summary, f.fix, f.caveat, repr(f.evidence))
        groups.setdefault(key, []).append(f)
    return [
        replace(
            same[0],
            summary=same[0].summary + _where(same),
            locations=tuple(dict.fromkeys(loc for f in same for loc in f.locations)),
        )
        for same in groups.values()
    ]
