"""Steps wait on the DataLoader for the next batch instead of computing.

The one finding for an input stall: the wait is read from the trace, and under `torchpace doctor`
the live loader facts (its workers, whether its loading waits or computes, the cores and device)
decide the advice through the shared worker policy (torchpace.fixes.workers). `loader-config`
keeps only configuration advice that is not a stall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import judged_so, judged_under_load, rule
from torchpace.fixes import policy
from torchpace.fixes.workers import VERIFY, Advice, Host, Stall, advise
from torchpace.policy.threads import LOADING, WORKERS
from torchpace.trace.model import Trace
from torchpace.trace.names import is_dataloader
from torchpace.trace.summary import Phase

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.loader import LoaderFacts

# An upper bound: the rest of the step is assumed to keep its pace, but workers take cores from
# the main process and slow it (kineto's V100 ResNet-50 pair: the rest grew by 17% with 4
# workers; 62.9 ms estimated, 50 ms measured on the step, 68.5 ms off the DataLoader phase).
METHOD = (
    "upper bound: new step = max(rest of step + {residual:.0%} of the load kept in the main "
    "process, {period}, GPU busy time); saving = step - new step; the rest of the step is "
    "assumed to keep its pace, which workers competing for the cores can slow"
)
UNCERTAIN = (
    "# only if loading waits on I/O (disk, network); if it computes, workers slow a CPU run\n"
)


def _iterator(trace: Trace) -> str:
    for op in trace.host_ops:
        if is_dataloader(op.name):
            return op.name.split("#", 1)[-1].split(".", 1)[0]
    return ""


def _stalled_loader(live: Inspection | None) -> LoaderFacts | None:
    """The loader the steps waited on longest (live facts), if the doctor saw any."""
    loaders = [f for f in (live.loaders if live else ()) if f.wait_fraction is not None]
    return max(loaders, key=lambda f: f.wait_fraction or 0.0, default=None)


def _cpu_share(loader: LoaderFacts | None, cpu_run: bool) -> float | None:
    """The share of the loading that computes, as if the thread had its core to itself.

    Where Linux's scheduler statistics were read: CPU / (CPU + blocked) inside __next__, with the
    run-queue time that other processes' load adds left out (LoaderFacts.wait_compute_share), the
    same on a quiet and a busy machine. Elsewhere an estimate: c = thread CPU time / wall time inside __next__; r = the same between batches, when a CPU run's
    thread computes. On a machine busy with other work computing stretches by 1/r and waiting does
    not, so the wall time not explained by computing at that pace, 1 - c/r, is waiting, and the
    computing share is c / (c + 1 - c/r). Where the rest of the step waits on a GPU, r says nothing
    of the CPU's pace: c is used as measured.
    """
    if loader is None or loader.wait_cpu_fraction is None:
        return None
    if loader.wait_compute_share is not None:
        return loader.wait_compute_share
    c, r = loader.wait_cpu_fraction, loader.rest_cpu_fraction
    if not cpu_run or r is None or r <= 0.01:
        return c
    waiting = max(0.0, 1.0 - c / r)
    return c / (c + waiting) if c + waiting > 0 else 1.0


class _Model(msgspec.Struct, frozen=True):
    """What the trace shows and what the worker model predicts, in milliseconds per step."""

    stall: Stall
    workers: int  # workers suggested
    residual_fraction: float
    counted: bool = True  # False: workers are in use but the trace does not say how many

    @property
    def period(self) -> float:
        """How often the loader delivers a batch with the suggested workers."""
        return self.stall.load_ms / self.workers

    @property
    def saving(self) -> float:
        s = self.stall
        rest = s.rest_ms + self.residual_fraction * s.wait_ms
        return max(0.0, s.step_ms - max(rest, self.period, s.floor_ms or 0.0))

    def method(self) -> str:
        current = self.stall.workers
        period = (
            f"per-batch load / {self.workers} workers"
            if current == 0
            else f"step x {current} / {self.workers} workers"
        )
        return METHOD.format(residual=self.residual_fraction, period=period)


@rule("dataloader-stall", live=True)
def dataloader_stall(
    trace: Trace,
    *,
    min_wait_fraction: float = 0.10,
    min_wait_ms: float = 1.0,
    assumed_workers: int = 4,
    residual_fraction: float = 0.10,
    live: Inspection | None = None,
) -> list[Finding]:
    """Flag steps that spend a share of their time in `enumerate(DataLoader)#...__next__`.

    `assumed_workers`: the most workers suggested when the cores are unknown (a trace alone).
    """
    b = trace.breakdown
    typical = b.typical  # the steps the breakdown's medians are over
    if not typical:
        return []
    # The time-weighted share, not a median of steps: when a few steps stall long (a loader
    # that refills its queue every k batches), the median step waits nothing while most of the
    # time is spent waiting.
    step = b.median_step_ms
    wait = b.phase_share(Phase.DATALOADER) * step
    if step <= 0 or wait < min_wait_ms:
        return []
    iterator = _iterator(trace)
    loader = _stalled_loader(live)
    workers = loader.num_workers > 0 if loader else iterator.startswith("_MultiProcessing")
    loading = WORKERS if workers else LOADING  # what the load stretches (policy/threads.py)
    loaded: str | None = ""
    if wait / step < min_wait_fraction:
        said = (
            f"the steps waited {wait:.1f} ms ({wait / step:.1%} of {step:.1f} ms) for their batches"
        )
        loaded = judged_under_load(live, wait / step, min_wait_fraction, said, loading)
        if loaded is None:
            return []
    # Live facts name the loader and its workers; a trace alone names only the iterator type.
    current = loader.num_workers if loader else 0
    counted = not (iterator.startswith("_MultiProcessing") and loader is None)
    if not counted:
        current = 1  # the count is unknown: the model doubles whatever it is
    gpu = b.gpu_busy_fraction * step if b.gpu_busy_fraction is not None else None
    host = _host(trace, live)
    stall = Stall(wait, step, current, gpu, _cpu_share(loader, host.device == "cpu"))
    advice = advise(host, stall, assumed=assumed_workers)
    if not counted:  # double whatever the count is; it pays as far as the policy can tell
        pays = "uncertain" if advice.pays == "unlikely" else advice.pays
        advice = Advice(2, pays, advice.reason)
    model = _Model(stall, advice.workers, residual_fraction, counted)
    t = policy.target(host.device, live.host.cpu_bf16 if live else None)
    found = _finding(model, advice, host, t, iterator, len(typical), loader)
    return [judged_so(found, live, loaded, loading)]


def _host(trace: Trace, live: Inspection | None) -> Host:
    device = live.device.kind if live else trace.info.device_kind
    cores = live.host.cores if live else None
    ranks = live.world_size if live else 1
    return Host(cores, ranks, policy.target(device).device)


def _finding(
    m: _Model,
    advice: Advice,
    host: Host,
    t: policy.Target,
    iterator: str,
    steps: int,
    loader: LoaderFacts | None,
) -> Finding:
    s = m.stall
    where = "in the main process (num_workers=0)" if s.workers == 0 else "from the workers"
    fraction = s.wait_ms / s.step_ms
    head = (
        f"Each step waits {s.wait_ms:.1f} ms ({fraction:.0%} of {s.step_ms:.1f} ms) for the "
        f"next batch {where}"
    )
    more = advice.workers > s.workers and advice.pays != "unlikely"
    saving = round(m.saving, 3) if more else None
    return Finding(
        rule="dataloader-stall",
        severity=Severity.MEDIUM,  # the policy's: from the saving, or MEDIUM without one
        summary=head + _outlook(m, advice, saving),
        evidence=_evidence(m, advice, host, iterator, steps, loader),
        fix=_fix(m, advice, t) if more else policy.cheaper_loading_code(t),
        saving_ms=saving,
        saving_method=m.method() if more else f"not estimated: {advice.reason}",
        locations=(loader.created_at,) if loader and loader.created_at else (),
        caveat=_caveat(advice, host),
    )


def _outlook(m: _Model, advice: Advice, saving: float | None) -> str:
    if saving is None:
        return f"; more workers are unlikely to help: {advice.reason}"
    if advice.pays == "uncertain":
        return (
            f"; if the loading waits on I/O, {m.workers} workers would save up to "
            f"{saving:.1f} ms per step"
        )
    return f"; up to {saving:.1f} ms per step can be saved"


def _fix(m: _Model, advice: Advice, t: policy.Target) -> str:
    if not m.counted:
        code = policy.loader_code(t, 2)
        return code.replace("num_workers=2", "num_workers=2 * N  # N: your current count")
    code = policy.loader_code(t, m.workers)
    return UNCERTAIN + code if advice.pays == "uncertain" and not t.accelerator else code


def _caveat(advice: Advice, host: Host) -> str:
    if advice.pays == "likely":
        return (
            "workers share the host's CPU cores with the training process; on a machine "
            "with few cores the saving is smaller"
        )
    return f"{advice.reason}; {VERIFY}."


def _evidence(
    m: _Model,
    advice: Advice,
    host: Host,
    iterator: str,
    steps: int,
    loader: LoaderFacts | None,
) -> dict[str, EvidenceValue]:
    s = m.stall
    return {
        "wait_ms": round(s.wait_ms, 3),
        "wait_fraction": round(s.wait_ms / s.step_ms, 4),
        "step_ms": round(s.step_ms, 3),
        "rest_of_step_ms": round(s.rest_ms, 3),
        "gpu_busy_ms": round(s.floor_ms, 3) if s.floor_ms is not None else None,
        "current_workers_count": s.workers if m.counted else None,
        "suggested_workers_count": m.workers if m.counted else None,
        "suggested_workers_factor": round(m.workers / s.workers, 2) if s.workers else None,
        "workers_pay": advice.pays,
        "wait_cpu_fraction": round(s.cpu_fraction, 3) if s.cpu_fraction is not None else None,
        "cores_per_rank_count": host.share,
        "loader_iterator_name": iterator,
        "steps_count": steps,
        "dataset_type_name": loader.dataset_type if loader else None,
    }
