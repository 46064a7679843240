"""Attention written as matmul -> softmax -> matmul instead of one scaled_dot_product_attention call.

Read from the trace: on each host thread, a batched matmul (aten::bmm/baddbmm/mm, the scores
Q @ K^T), then a softmax, then the next batched matmul (the weights @ V), with no other softmax or
matmul between. With recorded shapes (record_shapes=True) the three must chain: the softmax runs
over the scores' [L, S] and the second matmul takes them; without shapes the order alone decides,
as in the doctor's own CPU recordings. A softmax inside aten::scaled_dot_product_attention (its math
fallback) is SDPA already and is never counted.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from operator import attrgetter
from typing import TYPE_CHECKING

import msgspec

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.kernels import typical_window
from torchpace.doctor.facts.ops import MathOp, math_ops
from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import rule
from torchpace.trace.events import HostOp
from torchpace.trace.model import Trace
from torchpace.trace.stacks import SourceLocation

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

# The ops that run the two products (the leaves under aten::matmul/einsum; aten::addmm is a
# Linear's, never attention's).
PRODUCTS = frozenset({"aten::bmm", "aten::baddbmm", "aten::mm"})
# What a product may run inside: its time and the gap between the two are read around these.
WRAPPERS = PRODUCTS | {"aten::matmul", "aten::einsum"}
SOFTMAX = frozenset({"aten::softmax", "aten::_softmax"})
_NAME = attrgetter("name")
SOFTMAX_BACKWARD = "aten::_softmax_backward_data"
# Ops that are fused attention already: a softmax inside one of them is its math fallback.
FUSED = ("scaled_dot_product", "attention", "flash")
# Eager attention puts a handful of ops between the products (scale, mask, softmax, dropout, a cast
# and their views); a product this many ops after a softmax is some other computation.
MAX_OPS_BETWEEN = 40
# Without recorded shapes: the most the output product's time may be of the scores product's
# (the two have the same L x S x d multiply-adds in attention: `_products_alike`).
MAX_PRODUCT_RATIO = 8.0
# Ops by which a dropout that draws shows (training): aten::bernoulli_ on the CPU, aten::native_dropout
# on a GPU.
DRAWS = frozenset({"aten::bernoulli_", "aten::native_dropout"})
CPU_DROPOUT = "on the CPU, scaled_dot_product_attention with dropout_p > 0 runs its unfused math"
CPU_DROPOUT += " fallback"
METHOD = (
    "lower bound: the {where} of the ops between each pair of attention matmuls (scale, mask, "
    "softmax, dropout, casts) and of the softmaxes' backward: passes over the L x S scores that "
    "a fused kernel never writes out, per step{busy}; the matmuls and the rest of the backward "
    "are left out"
)
FIX = """\
# one fused call instead of q @ k^T -> mask -> softmax -> dropout -> @ v (flash or memory-efficient
# kernels on a GPU, a fused kernel on the CPU; the L x S scores are never written to memory):
y = torch.nn.functional.scaled_dot_product_attention(
    q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0, is_causal=causal
)  # q, k, v: [batch, heads, seq, head_dim]; a boolean mask is True where attention is allowed
# Hugging Face models: from_pretrained(..., attn_implementation="sdpa") and no
#   output_attentions=True (it forces the eager path); a model with no SDPA path (it says so when
#   asked for one) needs its attention's forward rewritten with the call above
# nn.MultiheadAttention: mha(q, k, v, need_weights=False) (need_weights=True computes the weights)"""


class Chain(msgspec.Struct, frozen=True):
    """One eager attention: its score product, softmax and output product (and the shapes)."""

    scores: HostOp
    softmax: HostOp
    output: HostOp
    shape: tuple[int, int, int] | None  # (batch x heads, L, S) when shapes were recorded


def _fused(trace: Trace, op: HostOp) -> bool:
    """Whether a softmax runs inside a fused attention op (SDPA's math fallback)."""
    around = trace.enclosing_ops(op.tid, op.ts_us, op.end_us)
    return any(o.name.startswith("aten::") and any(w in o.name for w in FUSED) for o in around)


def _softmax_dims(op: HostOp) -> tuple[int, ...] | None:
    shapes = op.shapes()
    return tuple(shapes[0]) if shapes and shapes[0] else None


def _chained(first: MathOp | None, softmax: HostOp, second: MathOp | None) -> bool:
    """Whether the recorded shapes make scores = A @ B, softmax(scores), softmax(...) @ V."""
    dims = _softmax_dims(softmax)
    if first is None or second is None or dims is None or len(dims) < 2:
        return False
    batch, length, keys = first.batch, first.m, first.n
    numel = 1
    for d in dims:
        numel *= d
    return (
        dims[-2:] == (length, keys)
        and numel == batch * length * keys
        and (second.batch, second.m, second.k) == (batch, length, keys)
    )


def _thread_chains(trace: Trace, ops: list[HostOp], shaped: dict[int, MathOp]) -> list[Chain]:
    """The eager attentions on one thread (ops by start), in order."""
    chains: list[Chain] = []
    last: HostOp | None = None  # the latest product that ended
    pending: tuple[HostOp, HostOp] | None = None  # (scores product, softmax) awaiting the output
    since = 0  # ops since the pending softmax
    for op in ops:
        if op.kind != "op":
            continue
        since += 1
        if op.name in SOFTMAX:
            if pending is not None and op.ts_us < pending[1].end_us:
                continue  # aten::_softmax inside aten::softmax
            pending = None
            if last is not None and last.end_us <= op.ts_us and not _fused(trace, op):
                pending, since = (last, op), 0
        elif op.name in PRODUCTS:
            if pending is not None and since <= MAX_OPS_BETWEEN and op.ts_us >= pending[1].end_us:
                chain = _chain(*pending, op, shaped)
                if chain is not None:
                    chains.append(chain)
            pending, last = None, op
    return chains


def _chain(
    scores: HostOp, softmax: HostOp, output: HostOp, shaped: dict[int, MathOp]
) -> Chain | None:
    if not shaped:  # no shapes recorded: the order decides
        return Chain(scores, softmax, output, None)
    first, second = shaped.get(id(scores)), shaped.get(id(output))
    if not _chained(first, softmax, second):
        return None
    assert first is not None
    return Chain(scores, softmax, output, (first.batch, first.m, first.n))


def eager_chains(trace: Trace, watched: tuple[int, int] | None = None) -> list[Chain]:
    """Every matmul -> softmax -> matmul attention in the trace's typical steps, by thread.
    `watched`: the live doctor's count of such softmaxes chained by shape and not (runner/
    sensors/model.py), which decides for a trace without shapes."""
    shaped = {id(m.op): m for m in math_ops(trace) if m.op.name in PRODUCTS}
    ranges, _ = typical_window(trace)
    out: list[Chain] = []
    for tid in trace.host_tids():
        ops = trace.ops_on(tid)
        if SOFTMAX.isdisjoint(map(_NAME, ops)):
            continue
        out.extend(c for c in _thread_chains(trace, ops, shaped) if _inside(c.softmax, ranges))
    if shaped or not out:
        return out
    if watched is not None:  # the shapes the watched steps saw, whatever the load
        return out if watched[0] else []
    return out if _products_alike(out) else []


def _products_alike(chains: list[Chain]) -> bool:
    """Without shapes, whether the products take alike times, as attention's do: Q @ K^T and
    weights @ V are both L x S x d (minGPT on the CPU: output/scores 0.1-3.1x). A graph
    attention's scores are a broadcast sum of two thin products: pytorch/examples' GAT read
    54-884x, and was told to call scaled_dot_product_attention. The median of the chains, so
    that a product stretched by another process's time slice changes nothing; but with torch's
    threads waiting at each op's barrier for a core, every op takes whole time slices (a graph
    attention beside two busy loops: both products 7.7 ms, 1.0x). The live doctor decides by the
    shapes it watched instead (`eager_chains`)."""
    ratios = sorted(c.output.dur_us / max(c.scores.dur_us, 1e-3) for c in chains)
    return not ratios or ratios[len(ratios) // 2] <= MAX_PRODUCT_RATIO


def _inside(op: HostOp, ranges: list[tuple[float, float]]) -> bool:
    """Whether `op` starts inside one of the (sorted) step ranges (all of them: no steps)."""
    if not ranges:
        return True
    starts = [r[0] for r in ranges]
    i = bisect_right(starts, op.ts_us) - 1
    return i >= 0 and op.ts_us <= ranges[i][1]


class _Timer:
    """Time between and of the products: device time of the kernels launched meanwhile (a GPU
    trace), host time otherwise."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        launches = sorted(
            (r for r in trace.runtime_of_kind("launch") if r.correlation is not None),
            key=lambda r: (r.tid, r.ts_us),
        )
        self.keys = [(r.tid, r.ts_us) for r in launches]
        self.launches = launches
        self.kernel_us = {k.correlation: k.dur_us for k in trace.kernels if k.correlation}
        self.device = bool(self.kernel_us)

    def span_us(self, tid: int, start: float, end: float) -> float:
        """Device time of kernels launched on `tid` in [start, end]; host time without kernels."""
        if not self.device:
            return max(0.0, end - start)
        i, j = bisect_left(self.keys, (tid, start)), bisect_right(self.keys, (tid, end))
        return sum(self.kernel_us.get(r.correlation or -1, 0.0) for r in self.launches[i:j])

    def op_us(self, op: HostOp) -> float:
        return self.span_us(op.tid, op.ts_us, op.end_us) if self.device else op.dur_us


def _product_call(trace: Trace, op: HostOp) -> HostOp:
    """The call the user made for a product: the outermost aten::matmul/einsum around a bmm."""
    outer = op
    for around in trace.enclosing_ops(op.tid, op.ts_us, op.end_us):
        if around.name not in WRAPPERS:
            break
        outer = around
    return outer


class _Measured(msgspec.Struct):
    """The chains' time per scores shape (microseconds), their matmuls, and what ran between."""

    between_us: defaultdict[tuple[int, int, int] | None, float]
    calls: Counter[tuple[int, int, int] | None]
    matmul_us: float = 0.0
    backward_us: float = 0.0  # the softmaxes' backward (training)
    dropout: bool = False  # a dropout that draws (training) ran between the matmuls

    def per_step(self, steps: int) -> tuple[float, float]:
        """(forward passes between the matmuls, softmax backward) in ms per step."""
        return sum(self.between_us.values()) / 1e3 / steps, self.backward_us / 1e3 / steps


def _measure(trace: Trace, chains: list[Chain], timer: _Timer) -> _Measured:
    out = _Measured(defaultdict(float), Counter())
    for c in chains:
        first, second = _product_call(trace, c.scores), _product_call(trace, c.output)
        out.between_us[c.shape] += timer.span_us(c.softmax.tid, first.end_us, second.ts_us)
        out.calls[c.shape] += 1
        out.matmul_us += timer.op_us(first) + timer.op_us(second)
        if not out.dropout:
            ops = trace.ops_on(c.softmax.tid)
            lo = bisect_left(ops, first.end_us, key=lambda o: o.ts_us)
            hi = bisect_left(ops, second.ts_us, key=lambda o: o.ts_us)
            out.dropout = any(o.name in DRAWS for o in ops[lo:hi])
    out.backward_us = _softmax_backward_us(trace, len(chains), timer)
    return out


def _softmax_backward_us(trace: Trace, chains: int, timer: _Timer) -> float:
    """The backward of plain softmaxes (SoftmaxBackward0: not SDPA's _safe_softmax, not
    log_softmax) in the typical steps, as many as there were attention softmaxes at most."""
    ranges, _ = typical_window(trace)
    found = []
    for op in trace.ops_named({SOFTMAX_BACKWARD}):
        around = trace.enclosing_ops(op.tid, op.ts_us, op.end_us)
        node = next((o.name for o in around if "SoftmaxBackward" in o.name), "")
        if node.rsplit(" ", 1)[-1].startswith("SoftmaxBackward") and _inside(op, ranges):
            found.append(timer.op_us(op))
    return sum(found) * min(1.0, chains / len(found)) if found else 0.0


@rule("unfused-attention", live=True)
def unfused_attention(
    trace: Trace, *, min_step_fraction: float = 0.02, live: Inspection | None = None
) -> list[Finding]:
    """Fire when the passes over eager attention's scores take `min_step_fraction` of the median
    step."""
    chains = eager_chains(trace, live.model.softmax_chains if live is not None else None)
    if not chains:
        return []
    _, steps = typical_window(trace)
    timer = _Timer(trace)
    m = _measure(trace, chains, timer)
    between_ms, backward_ms = m.per_step(steps)
    step_ms = trace.breakdown.median_step_ms
    if step_ms <= 0 or between_ms + backward_ms < min_step_fraction * step_ms:
        return []
    busy = facts_of(trace).gpu_busy_share if timer.device else 1.0
    evidence = _evidence(m, len(chains), steps, timer.device)
    return [_finding(trace, chains, evidence, _saving(m, steps, busy, timer.device))]


def _evidence(m: _Measured, chains: int, steps: int, device: bool) -> dict[str, EvidenceValue]:
    between_ms, backward_ms = m.per_step(steps)
    rows = sorted(((k, us) for k, us in m.between_us.items() if k is not None), key=lambda r: -r[1])
    shapes: list[EvidenceValue] = []
    for shape, us in rows[:4]:
        row: dict[str, EvidenceValue] = {
            "batch_heads_count": shape[0],
            "query_len": shape[1],
            "key_len": shape[2],
            "calls_per_step": round(m.calls[shape] / steps, 1),
            "between_matmuls_ms_per_step": round(us / 1e3 / steps, 3),
        }
        shapes.append(row)
    return {
        "attention_calls_per_step": round(chains / steps, 1),
        "between_matmuls_ms_per_step": round(between_ms, 3),
        "softmax_backward_ms_per_step": round(backward_ms, 3),
        "attention_matmul_ms_per_step": round(m.matmul_us / 1e3 / steps, 3),
        "time_source": "GPU kernels" if device else "host ops (CPU run)",
        "scores_shapes": shapes,
        "dropout_between": m.dropout,
    }


def _saving(m: _Measured, steps: int, busy: float, device: bool) -> tuple[float | None, str]:
    """The saving per step and how it was estimated."""
    if not device and m.dropout:
        return None, f"not estimated: {CPU_DROPOUT}"
    method = METHOD.format(
        where="GPU kernel time" if device else "host time",
        busy=" x GPU busy share" if device else "",
    )
    return round(sum(m.per_step(steps)) * busy, 3), method


def _finding(
    trace: Trace,
    chains: list[Chain],
    evidence: dict[str, EvidenceValue],
    saving: tuple[float | None, str],
) -> Finding:
    shapes = evidence["scores_shapes"]
    top = shapes[0] if isinstance(shapes, list) and shapes else None
    where = ""
    if isinstance(top, dict):
        dims = (top["batch_heads_count"], top["query_len"], top["key_len"])
        where = f" (scores {list(dims)})"
    backward = float(evidence["softmax_backward_ms_per_step"])  # type: ignore[arg-type]
    passes = float(evidence["between_matmuls_ms_per_step"]) + backward  # type: ignore[arg-type]
    return Finding(
        rule="unfused-attention",
        severity=Severity.MEDIUM,
        summary=(
            f"Attention runs as matmul -> softmax -> matmul {evidence['attention_calls_per_step']:g}"
            f" time(s) per step{where}: the passes over the scores (scale, mask, softmax"
            f"{' and its backward' if backward else ''}) take {passes:.1f} ms per step that one "
            "scaled_dot_product_attention call would fuse"
        ),
        evidence=evidence,
        fix=FIX,
        saving_ms=saving[0],
        saving_method=saving[1],
        locations=_locations(trace, chains),
        caveat="SDPA's fused kernels need a supported dtype, head size and mask (flash: fp16/"
        "bf16, head_dim <= 256); otherwise it runs its math fallback, no faster. "
        f"{CPU_DROPOUT[0].upper()}{CPU_DROPOUT[1:]}. Returning the attention weights "
        "(output_attentions, need_weights) needs the eager path.",
    )


def _locations(trace: Trace, chains: list[Chain]) -> tuple[SourceLocation, ...]:
    if not trace.has_stacks:
        return ()
    found = Counter(trace.user_frame(c.softmax) for c in chains[:64])
    return tuple(loc for loc, _ in found.most_common(3) if loc is not None)
