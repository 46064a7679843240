"""DataLoader settings that do not fit this machine: workers against cores and ranks, pinning, reuse.

Configuration only: a loader that stalls the steps is `dataloader-stall`'s one finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, judged_so, rule
from torchpace.fixes import policy
from torchpace.fixes.workers import VERIFY, Host, oversubscribed
from torchpace.policy.devices import is_cuda
from torchpace.policy.threads import WORKERS
from torchpace.trace.stats import median

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.loader import LoaderFacts
    from torchpace.runner.sensors.whole_run import WholeRun

# A restart that, spread over the training steps of an epoch, costs under this share of the step
# is lost in the epoch: not reported (minGPT's trainer samples 1e10 items per epoch: its workers
# start once). Whatever the number of epochs seen: how many the window crosses follows the
# machine's load. The fix costs only the workers' memory between epochs (Lightning advises it,
# unmeasured, for every loader whose workers are spawned), so the line drops only a start lost in
# its epoch (2 s in 1,000 s); at 1% it split one script's verdicts: ignite's DCGAN restart read
# 0.5-1.9% of the step over seven runs, quiet and loaded.
MIN_SAVING_SHARE = 0.002
REUSE_METHOD = (
    "up to: the wall time from iter(loader) to its first batch (median over the epochs after the "
    "first, the first's when only one was seen), less what kept workers still pay for that batch "
    "(its reads' CPU time, measured in the main process, at least the steady wait per batch), "
    "plus how much longer the first step after a restart took than the second (median over the "
    "restarts timed), spread over the training steps of an epoch (a followed run counts them; "
    "else the training loader's batches)"
)


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
    evidence: dict[str, EvidenceValue] = {
        "num_workers": f.num_workers,
        "cores_per_rank": host.share,
    }
    severity, cause = Severity.MEDIUM, "workers and the training loop fight over cores"
    caveat = "" if host.accelerator else f"{CPU_WORKERS}. {VERIFY}."
    busy = _idle_workers_ms(live, f)
    if busy is not None:
        evidence["workers_cpu_ms_per_step"] = round(busy, 2)
        severity = Severity.LOW
        cause = (
            f"more workers than cores, but reading a step's batch takes them {busy:.1f} ms of "
            f"CPU a {live.saving_step_ms:.0f} ms step: they take little from the training loop"
        )
        caveat = "Fewer workers start sooner and hold less memory; past the cores, workers cost "
        caveat += "the steps once reading a batch costs more."
    return Finding(
        rule="loader-config",
        severity=severity,
        summary=f"num_workers={f.num_workers} but only {host.share} core(s){rank_note}: {cause}",
        evidence=evidence,
        fix=f"DataLoader(..., num_workers={best}, persistent_workers=True)",
        locations=(f.created_at,) if f.created_at else (),
        caveat=caveat,
    )


CPU_WORKERS = (
    "On a CPU run workers that compute take cores from the math; workers that wait on I/O need none"
)


# Workers whose reads take under this share of the step take little from it, however many:
# minGPT's chargpt.py read a 64-sample batch in 3.3 ms of CPU (4 workers, 2 cores) a 2.7 s step.
IDLE_WORKERS_SHARE = 0.02


def _idle_workers_ms(live: Inspection, f: LoaderFacts) -> float | None:
    """The CPU a step's batch costs the workers (the sample probe's CPU time, which load does
    not stretch), when it is under IDLE_WORKERS_SHARE of the step; else None."""
    step = live.saving_step_ms
    if f.sample_probe is None or not step:
        return None
    busy = f.sample_probe.cpu_ms * (f.batch_size or 1)
    return busy if busy < IDLE_WORKERS_SHARE * step else None


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


def _restart_ms(f: LoaderFacts) -> float | None:
    """What starting an epoch's iterator cost: the first batch of later epochs (the first epoch's
    also pays imports and cold caches), the first epoch's when it is the only one."""
    times = f.first_batch_ms[1:] or f.first_batch_ms
    return median(times) + _extra_ms(f) if times else None


def _extra_ms(f: LoaderFacts) -> float:
    """How much longer an epoch's first step took than its second after the workers started
    again, a median over the restarts timed (0 when none was). Not the first batch's wait: the
    step after it. Their start goes on beside it (and the forked script copies each page it
    writes): on 2 cores, a ResNet-18's first step on CIFAR-size images took 300-690 ms more
    than its 81-124 ms steps with 2 workers started again, 15-40 ms more with persistent ones
    (their prefetch), ignite's CIFAR-10 example alike (~420 ms; its restart read 112 ms an
    epoch without this)."""
    return median(f.first_step_extra_ms) if f.first_step_extra_ms else 0.0


def _kept_ms(f: LoaderFacts) -> float:
    """What kept (persistent) workers still pay at each epoch's start: torch primes their
    prefetching only at iter(loader), so they make its first batch from nothing: the batch's reads
    (the sample probe's CPU time: an idle worker computes them on a core of its own), and at
    least the steady wait per batch. The probe's wall time, read in the main process beside the
    running workers, put pytorch/examples' DCGAN batch at 45-134 ms over runs (CPU 45-47 ms)."""
    reads = f.sample_probe.cpu_ms * (f.batch_size or 1) if f.sample_probe else 0.0
    return max(f.wait_ms_per_batch or 0.0, reads)


def _saving_ms(restart: float | None, kept_ms: float, steps: int | None) -> float | None:
    """Per training step: the restart beyond what kept workers still pay, spread over the
    training steps of an epoch; None when the epoch has no length or no restart was timed."""
    if restart is None or not steps:
        return None
    return max(0.0, restart - kept_ms) / steps


def _steps_per_epoch(live: Inspection, f: LoaderFacts) -> int | None:
    """The training steps of one epoch, which every loader's restart is spread over: a followed
    run counts them; else the longest epoch of the loaders that fed the profiled steps (the
    training loader), else this loader's own. Spread over its own 4 batches, imagenet's
    validation loader (restarted once per training epoch of 20 steps) read 5x its cost."""
    whole = live.whole_run
    if whole is not None and whole.epochs > 0 and whole.steps > 0:
        return max(1, round(whole.steps / whole.epochs))
    fed = [g.batches_per_epoch for g in live.loaders if g.wait_ms_per_batch and g.batches_per_epoch]
    return max(fed) if fed else f.batches_per_epoch


def _restarts_ms(f: LoaderFacts) -> list[float]:
    """What each start after the first cost beyond what kept workers still pay (a followed run
    times every one: the first start is paid either way)."""
    extra = _extra_ms(f)
    return [max(0.0, ms - _kept_ms(f)) + extra for ms in f.first_batch_ms[1:]]


def _run_costs(f: LoaderFacts, whole: WholeRun) -> dict[str, EvidenceValue]:
    lost = _restarts_ms(f)
    epochs = max(1, whole.epochs)
    return {
        "restart_ms_per_epoch": round(sum(lost) / epochs, 1),
        "restart_ms_per_run": round(sum(lost), 1),
        "restarts": len(lost),
        "epochs": whole.epochs,
    }


def _whole_run_cost(f: LoaderFacts, whole: WholeRun) -> str:
    """The followed run's measured cost, in words ("" when no later start was timed)."""
    lost = _restarts_ms(f)
    if not lost:
        return ""
    per_epoch = sum(lost) / max(1, whole.epochs)
    return f": {per_epoch:.0f} ms per epoch, {sum(lost) / 1000.0:.1f} s over the run"


class _NotJudged(Exception):
    """A restart whose share of the step was not judged: the rule's one "not analysed" reason
    when it finds nothing else, else a caveat on the findings about the same loader."""


def _buried(live: Inspection, f: LoaderFacts, restart: float, saving: float) -> tuple[bool, str]:
    """Whether the restart is lost in the epoch (under MIN_SAVING_SHARE of the step), and the
    caveat of one judged under load. While other processes held the cores the share is judged
    with the training thread's wait for a core taken out of the step (as dataloader-stall's),
    and still under the line it is not judged: the load stretches the compute more than that
    wait says. Beside two busy loops ignite's DCGAN steps took 1268 ms against 365 quiet (its 2
    torch threads spin at each op's barrier while one waits for a core), while its workers'
    start took 242 ms against 145: the restart fell from 2.2% of the step to 0.5% (0.7% without
    the wait), under the 1% line of the time (the line is now lower). Steps timed at fewer
    threads bound the quiet share (Contention.cleared): under the line even so, it is buried."""
    step_ms = live.step_ms
    if not step_ms or saving >= MIN_SAVING_SHARE * step_ms:
        return False, ""
    c = live.contention()
    if c is None:
        return True, ""
    # The workers' start is theirs, held off the cores by the load as well (policy/threads.py).
    if c.judges(saving / step_ms, MIN_SAVING_SHARE, WORKERS):
        return False, c.judged(saving / step_ms, WORKERS)
    if c.cleared(saving / step_ms, MIN_SAVING_SHARE, WORKERS):  # under the line at its ceiling
        return True, ""
    raise _NotJudged(
        f"{f.num_workers} workers are started again for every epoch (persistent_workers="
        f"False; {restart:.0f} ms an epoch's start), but their share of the step "
        f"({saving / step_ms:.1%}) was not judged: "
        f"{c.unjudged(saving / step_ms, MIN_SAVING_SHARE, WORKERS)}",
        c.enable(),
    )


def _reuse(live: Inspection, f: LoaderFacts) -> Finding | None:
    if f.num_workers == 0 or f.persistent_workers:
        return None
    step_ms = live.step_ms
    many = f.epochs_started > 1
    restart = _restart_ms(f)
    steps = _steps_per_epoch(live, f)
    saving = _saving_ms(restart, _kept_ms(f), steps)
    buried, loaded = _buried(live, f, restart or 0.0, saving) if saving is not None else (False, "")
    if buried:
        return None  # an epoch long enough to bury its restart
    evidence, cost = _reuse_evidence(live, f, restart, saving, steps)
    finding = Finding(
        rule="loader-config",
        # Only where nothing was timed: with a saving the one severity policy decides.
        severity=Severity.MEDIUM if many else Severity.LOW,
        summary=f"{f.num_workers} workers are started again for every epoch "
        f"(persistent_workers=False){cost}",
        evidence=evidence,
        fix="DataLoader(..., persistent_workers=True)",
        saving_ms=round(min(saving, step_ms or saving), 3) if saving is not None else None,
        saving_method=REUSE_METHOD if saving is not None else "",
        locations=(f.created_at,) if f.created_at else (),
        caveat=_reuse_caveat(f, many, saving, step_ms, steps),
    )
    return judged_so(finding, live, loaded)


def _reuse_evidence(
    live: Inspection, f: LoaderFacts, restart: float | None, saving: float | None, steps: int | None
) -> tuple[dict[str, EvidenceValue], str]:
    """The finding's evidence, and what the restarts cost the whole run ("" where not known)."""
    evidence: dict[str, EvidenceValue] = {
        "num_workers": f.num_workers,
        "epochs_started": f.epochs_started,
    }
    whole = live.whole_run
    if saving is None:  # only figures a verdict rests on: two loaders alike stay one finding
        return evidence, ""
    evidence.update(
        restart_ms=round(restart or 0.0, 1),
        batches_per_epoch=f.batches_per_epoch,
        steps_per_epoch=steps,
        persistent_first_batch_ms=round(_kept_ms(f), 1),
    )
    if f.first_step_extra_ms:
        evidence["first_step_extra_ms"] = round(_extra_ms(f), 1)
    cost = _whole_run_cost(f, whole) if whole is not None else ""
    if cost and whole is not None:
        evidence.update(_run_costs(f, whole))
    return evidence, cost


def _reuse_caveat(
    f: LoaderFacts, many: bool, saving: float | None, step_ms: float | None, steps: int | None
) -> str:
    said = [] if many else ["Only one epoch was seen; this costs a pause at each epoch start."]
    if saving is not None and step_ms and saving > step_ms:
        said.append(
            f"Each restart costs more than the {steps} steps of an epoch: the "
            "saving is shown as one whole step."
        )
    first = f" (here {f.first_batch_ms[0]:.0f} ms to its first batch)" if saving is not None else ""
    said.append(f"Persistent workers still start once, for the first epoch{first}.")
    return " ".join(said)


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
    unjudged: list[_NotJudged] = []
    for f in live.loaders:
        if f.epochs_started == 0:
            continue  # never iterated: its workers never started, its batches never came
        try:
            reuse, why = _reuse(live, f), ""
        except _NotJudged as e:
            reuse, why, unjudged = None, e.args[0], [*unjudged, e]
        checks = (_workers(live, f), _pinning(live, f), reuse, _live_buffer(f))
        found += [_also(c, why) for c in checks if c is not None]
    if unjudged and not found:
        raise NotApplicable(*unjudged[0].args)
    return _one_per_cause(found)


def _also(finding: Finding, unjudged: str) -> Finding:
    """A finding about a loader whose worker restart was not judged, saying so: pytorch/examples'
    imagenet beside two busy loops kept its workers finding and lost its restart without a word."""
    if not unjudged:
        return finding
    said = f"Also: {unjudged[0].lower()}{unjudged[1:]}."
    return replace(finding, caveat=" ".join(x for x in (finding.caveat, said) if x))


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
