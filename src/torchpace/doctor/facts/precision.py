"""Facts the precision rules share: the device's architecture and matmul/conv time by precision.

no-mixed-precision, tf32-disabled and tensor-core-unfriendly-shape read these; none of them reads
another rule. How a kernel computed comes from the one kernel-name classifier (trace.kernels).
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import defaultdict
from typing import TYPE_CHECKING, Literal

import msgspec

from torchpace.doctor.facts.kernels import (
    KernelColumns,
    per_name_count,
    per_name_ms,
    short_name,
    typical_window,
)
from torchpace.doctor.facts.ops import HALF_TYPES
from torchpace.doctor.finding import EvidenceValue
from torchpace.doctor.registry import NotApplicable
from torchpace.trace.events import HostOp
from torchpace.trace.kernels import Precision, kernel_info
from torchpace.trace.model import Trace
from torchpace.trace.names import CPU_MATH_OPS
from torchpace.trace.nesting import outermost

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

# The kernel classes whose math tensor cores run: matmuls, convolutions, fused attention.
MATH_CLASSES = ("gemm", "conv", "attention")
NO_ARCH = (
    "the trace does not say which GPU ran it (no deviceProperties, and no kernel name says which "
    "architecture it was built for)"
)


class DeviceArch(msgspec.Struct, frozen=True):
    """The accelerator's vendor and compute capability, and where they were read."""

    vendor: Literal["nvidia", "amd"]
    capability: tuple[int, int] | None
    source: str  # "deviceProperties", "kernel names" or "live run"

    @property
    def text(self) -> str:
        """'7.0 (kernel names)', for evidence."""
        if self.capability is None:
            return "unknown"
        return f"{self.capability[0]}.{self.capability[1]} ({self.source})"


def device_arch(trace: Trace, live: Inspection | None = None) -> DeviceArch:
    """The device that ran the trace; NotApplicable for a trace without GPU activity."""
    if trace.info.device_kind == "cpu":
        raise NotApplicable("CPU-only trace: no accelerator ran it")
    vendor: Literal["nvidia", "amd"] = "amd" if trace.info.device_kind == "rocm" else "nvidia"
    if trace.info.compute_capability is not None:
        source = trace.info.compute_capability_source or "deviceProperties"
        return DeviceArch(vendor, trace.info.compute_capability, source)
    if live is not None and live.device.compute_capability is not None:
        return DeviceArch(vendor, live.device.compute_capability, "live run")
    return DeviceArch(vendor, None, "")


def require_tensor_cores(arch: DeviceArch) -> None:
    """NotApplicable unless the device has tensor (NVIDIA Volta+) or matrix (AMD CDNA) cores."""
    cc = arch.capability
    if arch.vendor == "amd":
        if cc is not None and cc[0] < 9:
            raise NotApplicable(
                f"an AMD GPU of compute capability {cc[0]}.{cc[1]} has no matrix cores"
            )
        return  # MI100 and newer (gfx908+, capability 9.x) have matrix cores
    if cc is None:
        raise NotApplicable(
            NO_ARCH, "a trace recorded by torch >= 1.13 (it writes deviceProperties)"
        )
    if cc < (7, 0):
        raise NotApplicable(
            below(arch, "tensor cores (Volta, 7.0, and newer)"),
            "a trace recorded by torch >= 1.13 (it writes deviceProperties)",
        )


def below(arch: DeviceArch, feature: str) -> str:
    """Why a device below a feature's compute capability is skipped. Read from kernel names, the
    capability is a lower bound (cuDNN runs `maxwell_*` kernels on newer GPUs): undecided."""
    assert arch.capability is not None
    major, minor = arch.capability
    if arch.source == "kernel names":
        return (
            f"no deviceProperties, and the kernel names show only compute capability {major}.{minor} "
            f"or newer: not enough to tell whether the GPU has {feature}"
        )
    return f"a compute capability {major}.{minor} GPU has no {feature}"


def kernel_precision(name: str) -> Precision:
    """How a GEMM/conv/attention kernel computed, from its name ("unknown" when it does not say)."""
    return kernel_info(name).precision


def precision_ms(
    cols: KernelColumns, classes: tuple[str, ...] = MATH_CLASSES
) -> tuple[dict[Precision, float], dict[Precision, list[int]]]:
    """Per-step milliseconds of the classes' kernels by precision, and their names (indices into
    `cols.names`) by precision, longest first."""
    ms = [v / cols.steps for v in per_name_ms(cols)]
    by: dict[Precision, float] = defaultdict(float)
    names: dict[Precision, list[int]] = defaultdict(list)
    for i, name in enumerate(cols.names):
        if cols.klass[i] not in classes:
            continue
        precision = kernel_precision(name)
        by[precision] += float(ms[i])
        names[precision].append(i)
    for indices in names.values():
        indices.sort(key=lambda i: -ms[i])
    return dict(by), dict(names)


def top_kernels(cols: KernelColumns, indices: list[int], limit: int = 5) -> list[EvidenceValue]:
    """The named kernels with their time and calls per step."""
    ms = [v / cols.steps for v in per_name_ms(cols)]
    calls = [v / cols.steps for v in per_name_count(cols)]
    return [
        {
            "kernel": short_name(cols.names[i]),
            "ms_per_step": round(float(ms[i]), 3),
            "calls_per_step": round(float(calls[i]), 1),
        }
        for i in indices[:limit]
    ]


_NOT_TENSORS = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "bool", "int"})


class CpuMath(msgspec.Struct, frozen=True):
    """A CPU run's matmul/convolution host time per typical step, by the dtype it computed in."""

    fp32_ms: float
    reduced_ms: float  # bf16/fp16 inputs (autocast already on)
    unknown_ms: float  # no recorded dtype (record_shapes=False)
    top_fp32: list[EvidenceValue]  # the longest fp32 ops: name, ms and calls per step
    top_unknown: list[EvidenceValue] = []  # the same of the ops with no recorded dtype


def _dtype_class(op: HostOp) -> str:
    types = [t for t in op.types() or () if t not in _NOT_TENSORS]
    if not types:
        return "unknown"
    if types[0] in HALF_TYPES:
        return "reduced"
    return "fp32" if types[0] == "float" else "other"  # double: see double-precision


def cpu_math(trace: Trace) -> CpuMath:
    """Matmul/convolution host time per typical step of a CPU run: on a CPU the op's own time is
    the arithmetic (it returns when done), so its duration is what a faster dtype shortens.

    Medians over the steps: an op the scheduler preempted holds the time slice it waited (4 ms
    in one mm of Fabric's PPO under torchrun beside two busy loops, in 2 of 9 steps: a mean of
    1.33 ms a step against 0.43 ms in the median step, 0.3 ms quiet)."""
    ranges, _ = typical_window(trace)
    ops = outermost(trace.ops_named(CPU_MATH_OPS), lambda o: (o.tid, o.ts_us, o.end_us))
    starts = [lo for lo, _ in ranges]
    steps: list[dict[tuple[str, str], float]] = [
        defaultdict(float) for _ in range(max(1, len(ranges)))
    ]
    calls: dict[tuple[str, str], int] = defaultdict(int)
    for op in ops:
        i = bisect_right(starts, op.ts_us) - 1 if ranges else 0
        if i < 0 or (ranges and op.ts_us > ranges[i][1]):
            continue  # outside the typical steps
        key = (_dtype_class(op), op.name)
        steps[i][key] += op.dur_us / 1e3
        calls[key] += 1
    per_step = {key: n / len(steps) for key, n in calls.items()}
    return CpuMath(
        _median_step(steps, "fp32"),
        _median_step(steps, "reduced"),
        _median_step(steps, "unknown"),
        _top(steps, per_step, "fp32"),
        _top(steps, per_step, "unknown"),
    )


def _median_step(steps: list[dict[tuple[str, str], float]], klass: str) -> float:
    """A dtype class's ms in the median step."""
    return statistics.median(sum(ms for (k, _), ms in s.items() if k == klass) for s in steps)


def _top(
    steps: list[dict[tuple[str, str], float]], calls: dict[tuple[str, str], float], klass: str
) -> list[EvidenceValue]:
    """The 5 longest ops of one dtype class: name, ms in the median step, calls per step."""
    names = {n for s in steps for (k, n) in s if k == klass}
    rows = sorted(
        ((statistics.median(s.get((klass, n), 0.0) for s in steps), n) for n in names),
        reverse=True,
    )
    return [
        {"op": n, "ms_per_step": round(ms, 3), "calls_per_step": round(calls[klass, n], 1)}
        for ms, n in rows[:5]
    ]
