"""Diagnosis objects built by hand, so reporters are tested on exactly the data each case needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from torchpace.doctor.diagnosis import Diagnosis, RankView
from torchpace.doctor.finding import Finding, Severity, Skipped, SourceLocation, sort_findings
from torchpace.trace.summary import Breakdown, Phase, StepBreakdown, TraceInfo

# A step's phases in ms: data loading dominates, as in the V100 ResNet-50 trace.
PHASES = {
    Phase.DATALOADER: 60.0,
    Phase.H2D: 2.0,
    Phase.FORWARD: 15.0,
    Phase.BACKWARD: 30.0,
    Phase.OPTIMIZER: 5.0,
    Phase.OTHER: 8.0,
}


def make_step(
    index: int, scale: float = 1.0, *, gpu: bool = True, outlier: str = ""
) -> StepBreakdown:
    """One step whose phases are PHASES scaled by `scale`."""
    phase_ms = {p: v * scale for p, v in PHASES.items()}
    total = sum(phase_ms.values())
    return StepBreakdown(
        index=index,
        start_us=1_623_143_089_861_000.0 + index * 130_000,
        duration_ms=total,
        phase_ms=phase_ms,
        gpu_busy_ms=0.3 * total if gpu else None,
        outlier=outlier,
    )


def make_breakdown(
    scales: list[float], *, gpu: bool = True, outliers: dict[int, str] | None = None
) -> Breakdown:
    """A breakdown over steps scaled by `scales`; medians from PHASES times the median scale."""
    outliers = outliers or {}
    steps = tuple(
        make_step(i, s, gpu=gpu, outlier=outliers.get(i, "")) for i, s in enumerate(scales)
    )
    typical = sorted(s for i, s in enumerate(scales) if i not in outliers)
    mid = typical[len(typical) // 2]
    return Breakdown(
        steps=steps,
        median_step_ms=sum(PHASES.values()) * mid,
        median_phase_ms={p: v * mid for p, v in PHASES.items()},
        gpu_busy_fraction=0.3 if gpu else None,
        kernel_ms_by_class={"conv": 20.0, "gemm": 8.0, "elementwise": 6.0, "copy": 1.5}
        if gpu
        else None,
    )


GPU_INFO = TraceInfo(
    path="traces/resnet50.pt.trace.json.gz",
    device_kind="cuda",
    device_name="Tesla V100-DGXS-32GB",
    compute_capability=(7, 0),
    device_memory_bytes=34_089_730_048,
    step_source="profiler-step",
    vintage="torch 1.9 (Operator/Kernel categories)",
    event_count=75_718,
)

CPU_INFO = TraceInfo(
    path="traces/mlp_sleepy.pt.trace.json.gz",
    device_kind="cpu",
    torch_version="2.13.0+cpu",
    vintage="torch 2.x (cpu_op)",
    event_count=1_814,
)

STALL = Finding(
    rule="dataloader-stall",
    severity=Severity.HIGH,
    summary="Each step waits 50% of its time for the next batch",
    evidence={"wait_fraction": 0.5, "wait_ms": 60.0, "num_workers": 0, "batches": [1, 2, 3]},
    fix="DataLoader(dataset, num_workers=4, pin_memory=True, persistent_workers=True)",
    saving_ms=42.0,
    saving_method="overlap model: workers hide the wait up to the compute time",
    locations=(SourceLocation("train.py", 42, "main", count=6),),
    caveat="Workers add CPU load; check the host is not saturated.",
)

PAGEABLE = Finding(
    rule="pageable-copy",
    severity=Severity.MEDIUM,
    summary="12 host-to-device copies come from pageable memory",
    evidence={"h2d_bytes": 2 * 1024**2, "copy_count": 12, "copy_ms": 1.25},
    fix="DataLoader(..., pin_memory=True)\nbatch = batch.to(device, non_blocking=True)",
    saving_ms=0.8,
    saving_method="pinned copies run at measured pinned bandwidth",
)

CHURN = Finding(
    rule="allocator-churn",
    severity=Severity.LOW,
    summary="cudaMalloc is called 28 times after the first step",
    evidence={"malloc_count": 28},
    fix="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
)

SKIPPED = Skipped(
    rule="gpu-idle",
    reason="the trace has no kernels (CPU-only run)",
    enable="record on a GPU: torch.profiler.profile(activities=[ProfilerActivity.CUDA, ...])",
)


def make_diagnosis(**overrides: Any) -> Diagnosis:
    """A single-rank GPU diagnosis with three findings and a skipped rule; override any field."""
    fields: dict[str, Any] = {
        "info": GPU_INFO,
        "breakdown": make_breakdown([1.0, 1.02, 0.98, 1.01, 3.1], outliers={4: "3.1x the median"}),
        "findings": tuple(sort_findings([CHURN, PAGEABLE, STALL])),
        "skipped": (SKIPPED,),
        "notes": ("memory events present; reserved memory read from [memory] events",),
        "trace_files": (GPU_INFO.path,),
    }
    fields.update(overrides)
    step_ms = fields["breakdown"].median_step_ms
    fields["findings"] = tuple(weighed(f, step_ms) for f in fields["findings"])
    return Diagnosis(**fields)


def weighed(finding: Finding, step_ms: float) -> Finding:
    """The finding with the share of the step the engine's severity policy gives its saving
    (the severity is left as the case sets it)."""
    if finding.saving_ms is None or step_ms <= 0 or finding.saving_fraction is not None:
        return finding
    return replace(finding, saving_fraction=finding.saving_ms / step_ms)


def make_multirank() -> Diagnosis:
    """Two ranks; rank 1 is 20% slower and shows the stall."""
    views = []
    for rank, scale in ((0, 1.0), (1, 1.2)):
        info = replace(
            GPU_INFO, path=f"traces/run/rank{rank}.json", rank=rank, world_size=2, backend="nccl"
        )
        views.append(RankView(info=info, breakdown=make_breakdown([scale] * 3)))
    slow = views[1]
    return Diagnosis(
        info=slow.info,
        breakdown=slow.breakdown,
        findings=(weighed(replace(STALL, rank=1), slow.breakdown.median_step_ms),),
        ranks=tuple(views),
        slowest_rank=1,
        trace_files=tuple(v.info.path for v in views),
    )


@pytest.fixture
def diagnosis() -> Diagnosis:
    return make_diagnosis()


@pytest.fixture
def diagnosis_factory() -> Callable[..., Diagnosis]:
    """make_diagnosis: a GPU diagnosis with any field overridden."""
    return make_diagnosis


@pytest.fixture
def breakdown_factory() -> Callable[..., Breakdown]:
    """make_breakdown: steps scaled from one typical step, with chosen outliers."""
    return make_breakdown


@pytest.fixture
def stall() -> Finding:
    """A high dataloader-stall finding with every field filled."""
    return STALL


@pytest.fixture
def cpu_diagnosis() -> Diagnosis:
    return make_diagnosis(
        info=CPU_INFO,
        breakdown=make_breakdown([1.0, 1.1, 0.9], gpu=False),
        findings=(STALL,),
        trace_files=(CPU_INFO.path,),
        notes=(),
    )


@pytest.fixture
def window_diagnosis() -> Diagnosis:
    info = replace(
        CPU_INFO,
        step_source="window",
        notes=("no ProfilerStep# events; analysed as one window",),
    )
    return make_diagnosis(
        info=info,
        breakdown=make_breakdown([1.0], gpu=False),
        findings=(),
        skipped=(),
        notes=(),
        trace_files=(info.path,),
    )


@pytest.fixture
def multirank() -> Diagnosis:
    return make_multirank()
