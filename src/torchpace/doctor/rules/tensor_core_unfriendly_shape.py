"""fp16/bf16 matmuls or convolutions whose dimensions are not multiples of 8 miss tensor cores."""

from __future__ import annotations

from collections import defaultdict

import msgspec

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.kernels import (
    OpKernels,
    kernels_by_op,
    typical_window,
)
from torchpace.doctor.facts.ops import MathOp, in_windows
from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.model import Trace
from torchpace.trace.names import CONV_OPS, MATMUL_OPS

ALIGN = 8  # 16 bytes of fp16/bf16: what tensor-core GEMM kernels load per row
# Aligned shapes run the same GEMM about this much faster (NVIDIA's GEMM guide shows 1.5-4x for
# unaligned fp16 K/N); the estimate takes the low end.
ALIGNED_SPEEDUP = 1.5
FIX = """\
# Pad the dimensions to multiples of 8 (64 is better still), e.g. the vocabulary:
vocab_size = (vocab_size + 63) // 64 * 64            # 50257 -> 50304, as nanoGPT does
# hidden / head / feed-forward sizes: pick multiples of 64; convolution channels: multiples of 8
# (and model.to(memory_format=torch.channels_last)); sequence lengths of attention matmuls:
# pad to a multiple of 8 and mask the padding. Padded rows of an embedding or output layer are
# never indexed; mask padded logits (-inf) if they would enter a softmax."""


def misaligned(item: MathOp, kernels: OpKernels | None = None) -> list[str]:
    """Why one call misses 16-byte tensor-core loads: ['k=250'], ['n=5185', 'kernel align1'].

    The kernel's own `alignN` decides when its name says it (elements per vector load: align8 is
    16 bytes of fp16/bf16, whatever the shapes look like); the shapes decide otherwise.
    """
    dims = [f"{name}={value}" for name, value in item.aligned if value % ALIGN]
    align = kernels.align if kernels is not None else None
    if align is None:
        return dims
    return [] if align >= ALIGN else [*dims, f"kernel align{align}"]


class ShapeRow(msgspec.Struct, frozen=True):
    """Misaligned calls of one op with one set of shapes."""

    op: str
    shapes: str
    dtype: str
    dims: str  # why: dimensions that are not multiples of 8 ("k=250"), the kernel's "align1"
    calls_per_step: float
    gpu_ms_per_step: float

    def evidence(self) -> dict[str, EvidenceValue]:
        return {
            "op_name": self.op,
            "input_shapes": self.shapes,
            "input_dtype": self.dtype,
            "not_multiple_of_8": self.dims,
            "calls_per_step": round(self.calls_per_step, 1),
            "gpu_ms_per_step": round(self.gpu_ms_per_step, 3),
        }


def _ms(kernels: dict[int, OpKernels], item: MathOp) -> float:
    found = kernels.get(id(item.op))
    return found.gpu_ms if found is not None else 0.0


def shape_rows(items: list[MathOp], kernels: dict[int, OpKernels], steps: int) -> list[ShapeRow]:
    """Misaligned calls grouped by op and shapes, most GPU time first."""
    groups: dict[tuple[str, tuple[tuple[int, ...], ...]], list[MathOp]] = defaultdict(list)
    for item in items:
        groups[(item.op.name, item.shapes)].append(item)
    rows = [
        ShapeRow(
            op=name,
            shapes=" x ".join(str(list(s)) for s in shapes),
            dtype=calls[0].dtype,
            dims=", ".join(misaligned(calls[0], kernels.get(id(calls[0].op)))),
            calls_per_step=len(calls) / steps,
            gpu_ms_per_step=sum(_ms(kernels, c) for c in calls) / steps,
        )
        for (name, shapes), calls in groups.items()
    ]
    return sorted(rows, key=lambda r: (-r.gpu_ms_per_step, -r.calls_per_step))


@rule("tensor-core-unfriendly-shape")
def tensor_core_unfriendly_shape(
    trace: Trace, *, min_fraction: float = 0.05, min_step_fraction: float = 0.01
) -> list[Finding]:
    """Fire when misaligned fp16/bf16 GEMMs take `min_fraction` of reduced-precision GEMM time.

    Alignment is read from the kernels' names (`alignN`) where they say it, from shapes otherwise.
    """
    cols = facts_of(trace).kernels  # first: without GPU kernels the rule does not apply
    if not facts_of(trace).has_shapes:
        raise NotApplicable(
            "the trace has no input shapes", "torch.profiler.profile(record_shapes=True)"
        )
    ranges, steps = typical_window(trace)
    half = [m for m in in_windows(facts_of(trace).math_ops, ranges) if m.reduced_precision]
    if not half:
        return []  # no fp16/bf16 matmuls: no-mixed-precision judges fp32 ones
    kernels = kernels_by_op(trace, cols, MATMUL_OPS | CONV_OPS, ("gemm", "conv"))
    bad = [m for m in half if misaligned(m, kernels.get(id(m.op)))]
    if not bad:
        return []
    bad_ms, all_ms, share = _times(kernels, bad, half, steps)
    step_ms = facts_of(trace).step_ms  # the device's where it lags
    if share < min_fraction or (all_ms > 0 and bad_ms < min_step_fraction * step_ms):
        return []
    rows = shape_rows(bad, kernels, steps)
    timed_ms = bad_ms if all_ms > 0 else None
    evidence: dict[str, EvidenceValue] = {
        "misaligned_gemm_ms_per_step": None if timed_ms is None else round(timed_ms, 3),
        "misaligned_fraction": round(share, 3),
        "misaligned_calls_per_step": round(len(bad) / steps, 1),
        "reduced_precision_calls_per_step": round(len(half) / steps, 1),
        "misaligned_shapes": [row.evidence() for row in rows[:8]],
    }
    return [_finding(trace, share, timed_ms, rows[0], evidence)]


def _times(
    kernels: dict[int, OpKernels], bad: list[MathOp], half: list[MathOp], steps: float
) -> tuple[float, float, float]:
    """(misaligned ms per step, all reduced-precision ms per step, the misaligned share)."""
    bad_ms = sum(_ms(kernels, m) for m in bad) / steps
    all_ms = sum(_ms(kernels, m) for m in half) / steps
    # Without kernel links, judge by the share of calls (and estimate no saving).
    share = bad_ms / all_ms if all_ms > 0 else len(bad) / len(half)
    return bad_ms, all_ms, share


def _finding(
    trace: Trace,
    share: float,
    bad_ms: float | None,
    top: ShapeRow,
    evidence: dict[str, EvidenceValue],
) -> Finding:
    if bad_ms is None:  # no kernel linked to its op: the share is of calls, the time unknown
        what, saving, method = "calls", None, ""
    else:
        what = f"time ({bad_ms:.1f} ms per step)"
        saving = round(bad_ms * (1 - 1 / ALIGNED_SPEEDUP) * facts_of(trace).gpu_busy_share, 3)
        method = (
            f"misaligned GEMM GPU time x (1 - 1/{ALIGNED_SPEEDUP:g}) x GPU busy share: an "
            f"estimate, assuming aligned shapes run {ALIGNED_SPEEDUP:g}x faster"
        )
    return Finding(
        rule="tensor-core-unfriendly-shape",
        severity=Severity.MEDIUM if share >= 0.25 else Severity.LOW,
        summary=(
            f"{share:.0%} of fp16/bf16 matmul/conv {what} runs without 16-byte aligned "
            f"tensor-core loads, e.g. {top.op} {top.shapes} ({top.dims})"
        ),
        evidence=evidence,
        fix=FIX,
        saving_ms=saving,
        saving_method=method,
    )
