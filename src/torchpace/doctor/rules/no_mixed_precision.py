"""Matmuls and convolutions run in fp32 while the GPU has tensor (or matrix) cores, or while the
CPU computes bf16 natively (AVX512-BF16 or AMX)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.precision import (
    CpuMath,
    DeviceArch,
    device_arch,
    precision_ms,
    require_tensor_cores,
    top_kernels,
)
from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, judged_so, judged_under_load, rule
from torchpace.fixes import policy
from torchpace.policy import threads
from torchpace.trace.model import Trace

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

# Tensor cores run these GEMMs/convolutions at least this much faster than fp32 CUDA cores
# (V100 fp16 peak 125 vs 15.7 TFLOPS, A100 bf16 312 vs 19.5; real layers get 2-4x): conservative.
TENSOR_CORE_SPEEDUP = 2.0

# CPUs that compute bf16 natively. No speedup is assumed for them: the gain depends on the layers
# (the naive example's small conv net measured 0.94x and 1.05x on the project's AVX512-BF16 VM,
# fp32 and bf16 steps interleaved, under load), so the finding carries no estimate.
NATIVE_BF16 = ("avx512_bf16", "amx")
PRECISION_AUTO = """
# or let torchpace pick bf16, or fp16 + GradScaler, for the device:
#   precision = torchpace.train.Precision("auto")"""


def input_dtypes(trace: Trace) -> dict[str, EvidenceValue] | None:
    """Recorded input dtypes of matmul/conv calls, when shapes were recorded."""
    if not facts_of(trace).has_shapes:
        return None
    counts = Counter(item.dtype or "unknown" for item in facts_of(trace).math_ops)
    return {dtype: int(n) for dtype, n in counts.most_common()} or None


def _live_note(live: Inspection | None) -> tuple[str, str]:
    """What the live run adds: a phrase for the summary and a caveat."""
    if live is None or live.model.autocast_in_forward is None:
        return "", "Judged from kernel names alone; `torchpace doctor` can confirm autocast is off."
    if live.model.autocast_in_forward:
        dtype = live.model.autocast_dtype or "reduced precision"
        return (
            f" although autocast ({dtype}) is on: these ops run outside its region or are kept in fp32",
            "",
        )
    return " (the live run confirms no autocast in the forward pass)", ""


def _gpu_fix(arch: DeviceArch) -> str:
    """bf16 on AMD and Ampere+, fp16 + GradScaler before (the capability decides: torch reports
    bf16 as supported on Volta too, emulated)."""
    t = policy.target("rocm" if arch.vendor == "amd" else "cuda", None, arch.capability)
    return (policy.autocast_code(t) or "") + PRECISION_AUTO


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
    if trace.info.device_kind == "cpu":
        return _on_cpu(trace, live, min_missed_fraction, min_step_fraction)
    cols = facts_of(trace).kernels
    arch = device_arch(trace, live)
    require_tensor_cores(arch)
    by, names = precision_ms(cols)
    fp32 = by.get("fp32", 0.0)
    fast = by.get("reduced", 0.0) + by.get("tf32", 0.0)
    step_ms = facts_of(trace).step_ms  # the device's where it lags
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
    return [_finding(trace, fp32, missed, evidence, _gpu_fix(arch), live)]


def _finding(
    trace: Trace,
    fp32: float,
    missed: float,
    evidence: dict[str, EvidenceValue],
    fix: str,
    live: Inspection | None,
) -> Finding:
    busy = facts_of(trace).gpu_busy_share
    note, caveat = _live_note(live)
    return Finding(
        rule="no-mixed-precision",
        severity=Severity.MEDIUM,  # the policy's, from the saving (doctor/severity.py)
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


_CPU_CAVEAT = {
    "amx": (
        "Not estimated: on a CPU bf16's gain depends on the layers (small convolutions can get "
        "slower); `torchpace doctor --verify` measures it on this script."
    ),
    # Measured on a 2-core AVX512-BF16 Xeon (the rule's doc page): 0.48x to 1.09x.
    "avx512_bf16": (
        "Not estimated, and often no gain: without AMX, bf16 autocast casts at every op, which "
        "small matmuls do not pay back (measured here from 0.48x on a small GPT to 1.66x on a "
        "d=512 Transformer); `torchpace doctor --verify` measures it on this script before you "
        "keep it."
    ),
}


def _cpu_target(live: Inspection | None) -> policy.Target:
    """The CPU run's target; NotApplicable unless the CPU is known to compute bf16 natively."""
    if live is None or live.host.cpu_bf16 is None:
        raise NotApplicable(
            "a CPU-only trace: whether bf16 autocast pays depends on the CPU that ran it "
            "(AVX512-BF16 or AMX), which the trace does not record",
            "torchpace doctor SCRIPT (it reads the CPU's flags)",
        )
    t = policy.target("cpu", live.host.cpu_bf16)
    if t.cpu_bf16 not in NATIVE_BF16:
        raise NotApplicable(
            "this CPU has no native bf16 (AVX512-BF16 or AMX): autocast would emulate it, "
            "slower than fp32"
        )
    return t


def _on_cpu(
    trace: Trace, live: Inspection | None, min_missed: float, min_step: float
) -> list[Finding]:
    """A CPU run whose CPU computes bf16 natively, with its matmuls/convolutions in fp32."""
    t = _cpu_target(live)
    math = facts_of(trace).cpu_math
    # Without recorded dtypes, the live run's "no autocast" says the math ran in fp32.
    unknown_fp32 = live is not None and live.model.autocast_in_forward is False
    fp32 = math.fp32_ms + (math.unknown_ms if unknown_fp32 else 0.0)
    if fp32 == 0 and math.unknown_ms > 0 and not unknown_fp32:
        raise NotApplicable(
            "the trace recorded no dtypes of the CPU's matmuls/convolutions, and the live run "
            "did not see whether autocast was on",
            "torch.profiler.profile(record_shapes=True)",
        )
    step_ms = trace.breakdown.median_step_ms
    missed = fp32 / (fp32 + math.reduced_ms) if fp32 > 0 else 0.0
    if missed < min_missed or step_ms <= 0:
        return []
    share = fp32 / step_ms
    said = f"fp32 matmuls/convolutions took {fp32:.1f} ms ({share:.1%} of a {step_ms:.1f} ms step)"
    c = live.contention() if live else None
    if c is not None and not c.one_thread:  # the share says nothing of a quiet run's, either way
        quiet = _judged_at_fewer_threads(c, said, min_step)
        if quiet is None:
            return []
        return [_cpu_finding(t, math, fp32, missed, step_ms, live, unknown_fp32, quiet)]
    loaded: str | None = ""
    if share < min_step:  # one torch thread a rank: its quiet ceiling (policy/threads.py)
        loaded = judged_under_load(live, share, min_step, said, threads.OPS)
        if loaded is None:
            return []
    found = _cpu_finding(t, math, fp32, missed, step_ms, live, unknown_fp32)
    return [judged_so(found, live, loaded, threads.OPS)]


def _judged_at_fewer_threads(
    c: threads.Contention, said: str, min_step: float
) -> tuple[tuple[float, float], str] | None:
    """The quiet step's share bounds and the caveat of a finding judged from the matmuls of the
    steps at fewer threads (FewerThreads.math_share), None when even its most is under the
    line; NotApplicable where they were not timed or the line falls between."""
    bounds = c.fewer.math_share() if c.fewer else None
    if c.fewer is None or c.fewer.math_ms is None or bounds is None:
        raise NotApplicable(
            f"{said}, but that share was not judged: {c.why(threads.OPS)}", c.enable()
        )
    least, most = bounds
    f = c.fewer
    waited = (
        f", {f.math_ready_ms:.1f} ms of it waiting for a core, {f.math_waits} waits over "
        "those steps"
        if f.math_ready_ms is not None
        else ""
    )
    measured = (
        f"{f.math_ms:.1f} ms of matmuls/convolutions in a {f.math_step_ms:.1f} ms step at "
        f"torch.set_num_threads({f.fewer}) (profiled as the window was, after it{waited}): "
        f"{least:.0%}-{most:.0%} of a quiet step at {f.threads} threads (its threads speed the "
        f"matmuls at most {f.threads / f.fewer:g}x and slow the rest at most "
        f"{threads.REST_SLOWER:g}x; the waits for a core fell on the matmuls by their share "
        "of the step, give or take two standard deviations of chance, or not at all)"
    )
    if most < min_step:
        return None
    if least < min_step:
        raise NotApplicable(
            f"{said}, beside other processes' load; at fewer threads {measured}: the "
            f"{min_step:.0%} line falls between",
            c.enable(),
        )
    return bounds, (
        f"Judged beside other processes' load ({c.why(threads.OPS)}), from {measured}; the ms "
        "above were read under that load."
    )


def _cpu_finding(
    t: policy.Target,
    math: CpuMath,
    fp32: float,
    missed: float,
    step_ms: float,
    live: Inspection | None,
    unknown_fp32: bool,
    quiet: tuple[tuple[float, float], str] | None = None,
) -> Finding:
    """`quiet`: judged beside other processes' load from the steps at fewer threads, the
    least and most share of a quiet step, and how (the loaded share says nothing of it)."""
    note, _ = _live_note(live)  # its caveat is about kernel names: a GPU trace's
    # A CPU run records no shapes (runner/profiling.py): its ops' dtypes are the live run's.
    top = math.top_fp32 or (math.top_unknown if unknown_fp32 else [])
    share = f"{fp32 / step_ms:.0%} of the step"
    bounds: dict[str, EvidenceValue] = {}
    if quiet is not None:
        (least, most), _ = quiet
        share = f"{least:.0%}-{most:.0%} of a quiet step"
        bounds = {
            "quiet_step_fraction_least": round(least, 3),
            "quiet_step_fraction_most": round(most, 3),
        }
    return Finding(
        rule="no-mixed-precision",
        # LOW: a CPU's bf16 gain is unmeasured here and can be negative (see the doc page).
        severity=Severity.LOW,
        summary=(
            f"{missed:.0%} of matmul/conv CPU time ({fp32:.1f} ms per step, {share}) runs in "
            f"fp32 on a CPU that computes bf16 "
            f"natively ({t.cpu_bf16}){note}"
        ),
        evidence={
            "fp32_matmul_ms_per_step": round(fp32, 3),
            "bf16_matmul_ms_per_step": round(math.reduced_ms, 3),
            "fp32_matmul_step_fraction": round(fp32 / step_ms, 3),
            "cpu_bf16": str(t.cpu_bf16),
            "top_fp32_ops": top,
            **bounds,
        },
        fix=policy.autocast_code(t) or "",
        caveat=_CPU_CAVEAT[str(t.cpu_bf16)]
        + " Changes numerics: bf16 keeps 8 mantissa bits in matmuls/convolutions; compare the "
        "loss curve with the fp32 run." + (f" {quiet[1]}" if quiet else ""),
    )
