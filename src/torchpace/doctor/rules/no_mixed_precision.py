"""Matmuls and convolutions run in fp32 while the GPU has tensor (or matrix) cores."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.kernel_facts import gpu_busy_share, kernel_columns
from torchpace.doctor.op_facts import has_shapes, math_ops
from torchpace.doctor.precision_facts import (
    DeviceArch,
    device_arch,
    precision_ms,
    require_tensor_cores,
    top_kernels,
)
from torchpace.doctor.registry import rule
from torchpace.trace.model import Trace

if TYPE_CHECKING:
    from torchpace.doctor.live import Inspection

# Tensor cores run these GEMMs/convolutions at least this much faster than fp32 CUDA cores
# (V100 fp16 peak 125 vs 15.7 TFLOPS, A100 bf16 312 vs 19.5; real layers get 2-4x): conservative.
TENSOR_CORE_SPEEDUP = 2.0

FIX_BF16 = """\
# bf16 autocast (Ampere and newer: no GradScaler needed). Changes the precision of the math:
# compare the loss curve with the fp32 run.
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = loss_fn(model(inputs), targets)
loss.backward()
# or let torchpace pick bf16, or fp16 + GradScaler, for the device:
#   precision = torchpace.train.Precision("auto")"""

FIX_FP16 = """\
# fp16 autocast + GradScaler (before Ampere there is no fast bf16). Changes the precision of the
# math: compare the loss curve with the fp32 run.
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = loss_fn(model(inputs), targets)
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
# or: precision = torchpace.train.Precision("auto")"""


def input_dtypes(trace: Trace) -> dict[str, EvidenceValue] | None:
    """Recorded input dtypes of matmul/conv calls, when shapes were recorded."""
    if not has_shapes(trace):
        return None
    counts = Counter(item.dtype or "unknown" for item in math_ops(trace))
    return {dtype: int(n) for dtype, n in counts.most_common()} or None


def _live_note(live: Inspection | None) -> tuple[str, str]:
    """What the live run adds: a phrase for the summary and a caveat."""
    if live is None or live.autocast_in_forward is None:
        return "", "Judged from kernel names alone; `torchpace doctor` can confirm autocast is off."
    if live.autocast_in_forward:
        dtype = live.autocast_dtype or "reduced precision"
        return (
            f" although autocast ({dtype}) is on: these ops run outside its region or are kept in fp32",
            "",
        )
    return " (the live run confirms no autocast in the forward pass)", ""


def _wants_bf16(arch: DeviceArch, live: Inspection | None) -> bool:
    if live is not None and live.bf16_supported is not None:
        return live.bf16_supported
    return arch.vendor == "amd" or (arch.capability is not None and arch.capability >= (8, 0))


@rule("no-mixed-precision", live=True)
def no_mixed_precision(
    trace: Trace,
    *,
    live: Inspection | None = None,
    min_missed_fraction: float = 0.30,
    min_step_fraction: float = 0.05,
) -> list[Finding]:
    """Fire when a large share of matmul/conv/attention GPU time runs in fp32 on a device with
    tensor (or matrix) cores; skipped when the trace does not say which device ran it."""
    cols = kernel_columns(trace)
    arch = device_arch(trace, live)
    require_tensor_cores(arch)
    by, names = precision_ms(cols)
    fp32 = by.get("fp32", 0.0)
    fast = by.get("reduced", 0.0) + by.get("tf32", 0.0)
    step_ms = trace.breakdown.median_step_ms
    missed = fp32 / (fp32 + fast) if fp32 + fast > 0 else 0.0
    if missed < min_missed_fraction or step_ms <= 0 or fp32 < min_step_fraction * step_ms:
        return []
    evidence: dict[str, EvidenceValue] = {
        "missed_tensor_core_fraction": round(missed, 3),
        "fp32_matmul_ms_per_step": round(fp32, 3),
        "tensor_core_matmul_ms_per_step": round(fast, 3),
        "fp32_matmul_step_fraction": round(fp32 / step_ms, 3),
        "compute_capability": arch.text,
        "top_fp32_kernels": top_kernels(cols, names.get("fp32", [])),
    }
    dtypes = input_dtypes(trace)
    if dtypes:
        evidence["matmul_input_dtypes"] = dtypes
    fix = FIX_BF16 if _wants_bf16(arch, live) else FIX_FP16
    return [_finding(trace, fp32, missed, evidence, fix, live)]


def _finding(
    trace: Trace,
    fp32: float,
    missed: float,
    evidence: dict[str, EvidenceValue],
    fix: str,
    live: Inspection | None,
) -> Finding:
    busy = gpu_busy_share(trace)
    note, caveat = _live_note(live)
    return Finding(
        rule="no-mixed-precision",
        severity=Severity.HIGH
        if fp32 >= 0.25 * trace.breakdown.median_step_ms
        else Severity.MEDIUM,
        summary=(
            f"{missed:.0%} of matmul/conv GPU time ({fp32:.1f} ms per step) runs in fp32, "
            f"not in reduced precision on the tensor cores{note}"
        ),
        evidence=evidence,
        fix=fix,
        saving_ms=round(fp32 * (1 - 1 / TENSOR_CORE_SPEEDUP) * busy, 3),
        saving_method=(
            f"fp32 matmul/conv GPU time x (1 - 1/{TENSOR_CORE_SPEEDUP:g}) x GPU busy share "
            f"({busy:.0%}): an estimate, assuming tensor cores run them {TENSOR_CORE_SPEEDUP:g}x "
            "faster"
        ),
        caveat=caveat,
    )
