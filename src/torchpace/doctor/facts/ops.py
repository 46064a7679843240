"""Matmul and convolution ops with their recorded shapes and dtypes (record_shapes=True).

Only the ops that launch the math are read (aten::mm, addmm, bmm, baddbmm, convolution), not the
wrappers around them (linear, matmul, conv2d), so nothing is counted twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from torchpace.trace.events import HostOp
from torchpace.trace.model import Trace
from torchpace.trace.names import CONV_OPS, MATMUL_OPS

HALF_TYPES = frozenset({"c10::Half", "Half", "c10::BFloat16", "BFloat16", "half", "bfloat16"})


class MathOp(msgspec.Struct, frozen=True):
    """One matmul/convolution call: its GEMM dimensions (m, n, k) and input dtype."""

    op: HostOp
    m: int
    n: int
    k: int
    batch: int  # bmm batch, or 1
    dtype: str  # the first tensor input's recorded type: "float", "c10::Half", ...
    shapes: tuple[tuple[int, ...], ...]
    # The dimensions tensor cores want in multiples of 8: (k, n) of a GEMM or of a convolution's
    # implicit GEMM.
    aligned: tuple[tuple[str, int], ...] = ()

    @property
    def flops(self) -> float:
        """Multiply-adds x 2 of the forward call."""
        return 2.0 * self.batch * self.m * self.n * self.k

    @property
    def reduced_precision(self) -> bool:
        return self.dtype in HALF_TYPES


def _dims(op: HostOp) -> tuple[list[list[int]], list[str]] | None:
    shapes, types = op.shapes(), op.types()
    if shapes is None or types is None:
        return None
    return shapes, types


def _matmul(op: HostOp, shapes: list[list[int]], types: list[str]) -> MathOp | None:
    # addmm/baddbmm take (bias, a, b); mm/bmm take (a, b).
    offset = 1 if op.name in ("aten::addmm", "aten::baddbmm") else 0
    if len(shapes) < offset + 2:
        return None
    a, b = shapes[offset], shapes[offset + 1]
    if len(a) < 2 or len(b) < 2 or len(a) != len(b):
        return None
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    dtype = types[offset] if len(types) > offset else ""
    shapes_ = tuple(tuple(s) for s in (a, b))
    return MathOp(op, a[-2], b[-1], a[-1], batch, dtype, shapes_, (("k", a[-1]), ("n", b[-1])))


def _conv(op: HostOp, shapes: list[list[int]], types: list[str]) -> MathOp | None:
    # Implicit GEMM (forward): M = N*H_out*W_out (approximated by the input's spatial size: the
    # stride is not among the recorded shapes), N = C_out, K = C_in/groups * kernel area (the
    # weight is [C_out, C_in/groups, *kernel]). Tensor cores want N and K in multiples of 8;
    # an RGB stem's C_in=3 is not the GEMM's K (3*16*16 = 768 for a ViT patch embedding), and
    # cuDNN pads small channel counts itself.
    if len(shapes) < 2 or len(shapes[0]) < 3 or len(shapes[1]) < 3:
        return None
    x, w = shapes[0], shapes[1]
    m = x[0] * math.prod(x[2:])
    k = math.prod(w[1:])
    dims = (("k", k), ("n", w[0]))
    return MathOp(op, m, w[0], k, 1, types[0] if types else "", (tuple(x), tuple(w)), dims)


def math_ops(trace: Trace) -> list[MathOp]:
    """Every matmul/convolution call with recorded shapes, in trace order (`Facts.math_ops`)."""
    out: list[MathOp] = []
    wanted = MATMUL_OPS | CONV_OPS
    for op in trace.host_ops:
        if op.name not in wanted or op.input_dims is None:
            continue
        dims = _dims(op)
        if dims is None:
            continue
        parse = _conv if op.name in CONV_OPS else _matmul
        item = parse(op, *dims)
        if item is not None:
            out.append(item)
    return out


def has_shapes(trace: Trace, sample: int = 5000) -> bool:
    """Whether the trace recorded input shapes (record_shapes=True)."""
    if trace.info.record_shapes is not None:
        return trace.info.record_shapes
    return any(op.input_dims is not None for op in trace.host_ops[:sample])


def in_windows(ops: Sequence[MathOp], ranges: list[tuple[float, float]]) -> list[MathOp]:
    """The ops that start inside one of the (sorted) step ranges."""
    if not ranges:
        return list(ops)
    from bisect import bisect_right

    starts = [r[0] for r in ranges]
    out = []
    for item in ops:
        i = bisect_right(starts, item.op.ts_us) - 1
        if i >= 0 and item.op.ts_us <= ranges[i][1]:
            out.append(item)
    return out
