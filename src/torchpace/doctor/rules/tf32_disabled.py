"""fp32 matmuls or convolutions on an Ampere-or-newer GPU run without TF32 tensor cores."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.kernels import KernelColumns
from torchpace.doctor.facts.precision import (
    NO_ARCH,
    DeviceArch,
    below,
    device_arch,
    precision_ms,
    top_kernels,
)
from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.model import Trace

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

# TF32 tensor cores vs fp32 CUDA cores on A100: 156 vs 19.5 TFLOPS peak; GEMMs of training-sized
# layers typically gain 2-6x. The estimate assumes 2x (conservative).
TF32_SPEEDUP = 2.0
FIX_MATMUL = """\
# TF32 for fp32 matmuls (off by default since torch 1.12). Changes the math's precision: TF32 keeps
# fp32's range with a 10-bit mantissa; compare the loss curve once.
torch.backends.cuda.matmul.allow_tf32 = True   # or: torch.set_float32_matmul_precision("high")"""
FIX_CUDNN = """\
# TF32 for convolutions (cuDNN's default is on: something turned it off)
torch.backends.cudnn.allow_tf32 = True"""


def _family_ms(cols: KernelColumns, klass: str) -> tuple[float, float, list[int]]:
    """Per-step ms of fp32 (CUDA-core) and TF32 kernels of one class, and the fp32 names by time."""
    by, names = precision_ms(cols, (klass,))
    return by.get("fp32", 0.0), by.get("tf32", 0.0), names.get("fp32", [])


def _require_tf32(arch: DeviceArch) -> tuple[int, int]:
    """The device's compute capability; NotApplicable unless it has TF32 (NVIDIA 8.0+)."""
    if arch.vendor != "nvidia":
        raise NotApplicable(
            "TF32 matmuls are an NVIDIA Ampere-and-newer mode; this is a ROCm trace"
        )
    cc = arch.capability
    if cc is None:
        raise NotApplicable(
            NO_ARCH, "a trace recorded by torch >= 1.13 (it writes deviceProperties)"
        )
    if cc < (8, 0):
        raise NotApplicable(below(arch, "TF32 (Ampere, 8.0, and newer)"))
    return cc


def _tf32_off(family: str, tf32_ms: float, live: Inspection | None) -> bool | None:
    """Whether TF32 is off for this family: the live flags decide; else no TF32 kernel at all."""
    if live is not None:
        flag = live.flags.tf32_matmul if family == "gemm" else live.flags.tf32_cudnn
        if family == "gemm" and flag is None and live.flags.float32_matmul_precision:
            flag = live.flags.float32_matmul_precision != "highest"
        if flag is not None:
            return not flag
    # allow_tf32 is global: one TF32 kernel of the family shows it is on, and cuBLAS/cuDNN
    # heuristics then picked CUDA-core kernels for the rest on purpose.
    return tf32_ms == 0.0


@rule("tf32-disabled", live=True)
def tf32_disabled(
    trace: Trace,
    *,
    live: Inspection | None = None,
    min_step_fraction: float = 0.05,
) -> list[Finding]:
    """Fire when fp32 matmul/conv time on Ampere+ shows TF32 is off (kernel names, live flags)."""
    cols = facts_of(trace).kernels
    arch = device_arch(trace, live)
    _require_tf32(arch)
    step_ms = facts_of(trace).step_ms  # the device's where it lags
    findings = []
    for family, fix, what in (("gemm", FIX_MATMUL, "matmul"), ("conv", FIX_CUDNN, "convolution")):
        fp32, tf32, names = _family_ms(cols, family)
        if step_ms <= 0 or fp32 < min_step_fraction * step_ms or not _tf32_off(family, tf32, live):
            continue
        confirmed = live is not None and (
            live.flags.tf32_matmul is not None or live.flags.tf32_cudnn is not None
        )
        evidence: dict[str, EvidenceValue] = {
            "fp32_ms_per_step": round(fp32, 3),
            "tf32_ms_per_step": round(tf32, 3),
            "fp32_step_fraction": round(fp32 / step_ms, 3),
            "compute_capability": arch.text,
            "tf32_flag_from": "live run" if confirmed else "kernel names (no TF32 kernel ran)",
            "top_fp32_kernels": top_kernels(cols, names),
        }
        findings.append(_finding(trace, arch, what, fp32, evidence, fix, confirmed))
    return findings


def _finding(
    trace: Trace,
    arch: DeviceArch,
    what: str,
    fp32: float,
    evidence: dict[str, EvidenceValue],
    fix: str,
    confirmed: bool,
) -> Finding:
    step_ms, busy = facts_of(trace).step_ms, facts_of(trace).gpu_busy_share
    cc = arch.capability or (0, 0)
    return Finding(
        rule="tf32-disabled",
        severity=Severity.MEDIUM,  # the policy's, from the saving (doctor/severity.py)
        summary=(
            f"fp32 {what}s take {fp32:.1f} ms per step ({fp32 / step_ms:.0%}) on CUDA cores "
            f"of a compute-capability {cc[0]}.{cc[1]} GPU: TF32 is off"
        ),
        evidence=evidence,
        fix=fix,
        saving_ms=round(fp32 * (1 - 1 / TF32_SPEEDUP) * busy, 3),
        saving_method=(
            f"fp32 {what} GPU time x (1 - 1/{TF32_SPEEDUP:g}) x GPU busy share ({busy:.0%}): "
            f"an estimate, assuming TF32 runs them {TF32_SPEEDUP:g}x faster"
        ),
        caveat="" if confirmed else "Inferred from kernel names; the live run can confirm.",
    )
