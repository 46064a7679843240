"""Synthetic Diagnoses for the HTML report tests: every field filled, trace strings hostile."""

from __future__ import annotations

from torchpace.doctor.diagnosis import Diagnosis, RankView
from torchpace.doctor.finding import Finding, Severity, Skipped
from torchpace.trace.stacks import SourceLocation
from torchpace.trace.summary import Breakdown, Phase, StepBreakdown, TraceInfo
from torchpace.trace.top import TopRow, TopTables

EVIL = "<script>alert('x')</script><b>bold</b> & \"quoted\""


def _step(index: int, scale: float, gpu: bool) -> StepBreakdown:
    phases = {
        Phase.DATALOADER: 31.0 * scale,
        Phase.H2D: 2.5,
        Phase.FORWARD: 18.0,
        Phase.BACKWARD: 36.0,
        Phase.OPTIMIZER: 6.0,
        Phase.OTHER: 1.5,
    }
    total = sum(phases.values())
    return StepBreakdown(
        index=index,
        start_us=index * 1e5,
        duration_ms=total,
        phase_ms=phases,
        gpu_busy_ms=total * 0.46 if gpu else None,
        outlier="3.1x the median: checkpoint?" if scale > 3 else "",
    )


def make_breakdown(gpu: bool = True, scale: float = 1.0) -> Breakdown:
    steps = tuple(
        _step(i, scale * (3.5 if i == 13 else 1.0 + 0.05 * (i % 3)), gpu) for i in range(8, 20)
    )
    mid = steps[1]
    kernels = {"gemm": 22.0, "conv": 9.5, "elementwise": 8.1, "communication": 4.0, "copy": 1.2}
    return Breakdown(
        steps=steps,
        median_step_ms=mid.duration_ms,
        median_phase_ms=mid.phase_ms,
        gpu_busy_fraction=0.46 if gpu else None,
        kernel_ms_by_class=kernels if gpu else None,
    )


def make_info(rank: int | None = None, name: str = "Tesla V100-SXM2-32GB") -> TraceInfo:
    return TraceInfo(
        path=f"/runs/exp1/rank{rank or 0}.pt.trace.json.gz",
        device_kind="cuda",
        device_name=name,
        compute_capability=(7, 0),
        device_memory_bytes=34089730048,
        torch_version="2.13.0",
        rank=rank,
        world_size=2 if rank is not None else None,
        backend="nccl" if rank is not None else None,
        vintage="torch 2.x (cpu_op)",
        event_count=216092,
    )


def make_findings() -> tuple[Finding, ...]:
    return (
        Finding(
            rule="no-mixed-precision",
            severity=Severity.HIGH,
            summary=f"78% of matmul/conv GPU time runs in fp32 without tensor cores ({EVIL})",
            evidence={
                "eligible_ms": 31.5,
                "missing_tensor_core_fraction": 0.78,
                "kernels": [f"volta_sgemm_128x64_nn {EVIL}", "volta_sgemm_32x128_tn"],
                "top": [{"name": EVIL, "ms": 4.0}],
            },
            fix="with torch.autocast('cuda', dtype=torch.bfloat16):\n    loss = model(x)",
            saving_ms=12.4,
            saving_method="fp32 GEMM time x (1 - 1/3): V100 fp16 tensor cores vs fp32",
            locations=(SourceLocation(f"train_{EVIL}.py", 42, "train_step"),),
            caveat="a bound: only eligible kernels speed up",
        ),
        Finding(
            rule="launch-bound",
            severity=Severity.MEDIUM,
            summary="1,204 kernels shorter than 10 us per step",
            evidence={"tiny_kernels_per_step": 1204, "launch_ms": 9.1, "h2d_bytes": 3 * 2**20},
            fix="model = torch.compile(model)",
            saving_ms=4.0,
            saving_method="launch time minus kernel time",
            rank=1,
        ),
        Finding(
            rule="memory-pressure",
            severity=Severity.LOW,
            summary="Reserved memory peaks at 92% of the device",
            evidence={"peak_reserved_bytes": 31 * 2**30},
            fix="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        ),
    )


def synthetic_diagnosis() -> Diagnosis:
    """A single-rank GPU diagnosis with hostile strings in every trace-derived field."""
    return Diagnosis(
        info=make_info(name=f"GPU {EVIL}"),
        breakdown=make_breakdown(),
        findings=make_findings(),
        skipped=(
            Skipped(
                "tensor-core-unfriendly-shape",
                f"no shapes recorded {EVIL}",
                "torch.profiler.profile(record_shapes=True)",
            ),
        ),
        notes=(f"note {EVIL}",),
        trace_files=(f"/runs/{EVIL}/trace.pt.trace.json.gz",),
    )


def synthetic_top() -> TopTables:
    """Top tables whose names carry markup."""
    return TopTables(
        kernels=(
            TopRow(f"volta_sgemm_128x64_nn {EVIL}", 380, 73.9, 0.31),
            TopRow("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 2020, 357.3, 0.22),
        ),
        ops=(TopRow(f"aten::mm {EVIL}", 1200, 88.0, 0.18), TopRow("aten::add_", 4040, 31.0, 0.06)),
    )


def synthetic_ranks_diagnosis() -> Diagnosis:
    """A two-rank diagnosis whose rank 1 is slower."""
    views = (
        RankView(make_info(0), make_breakdown(scale=1.0)),
        RankView(make_info(1), make_breakdown(scale=1.8)),
    )
    return Diagnosis(
        info=views[1].info,
        breakdown=views[1].breakdown,
        findings=make_findings()[1:],
        ranks=views,
        slowest_rank=1,
        trace_files=tuple(v.info.path for v in views),
    )
