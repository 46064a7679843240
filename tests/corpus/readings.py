"""The expert readings of the real-trace corpus, as checks on torchpace's JSON report.

Each reading in tests/fixtures/corpus/PROVENANCE.md (written from the raw JSON before torchpace ran)
becomes must-fire / must-not-fire / severity checks here. A check is a predicate over the report a
user gets (`torchpace analyze TRACE --format json`), so it judges what users see, not internals.
Thresholds in a check are the expert's figures with a margin, never a value read off our output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
Doc = dict[str, Any]

# The severity policy's floor (docs/severity.md): no HIGH finding below this share of the step.
HIGH_FLOOR_FRACTION = 0.03


@dataclass(frozen=True)
class Check:
    """One expert statement about one trace, as a predicate over its JSON report."""

    trace: str  # file or folder name under tests/fixtures/corpus
    name: str  # short id, kebab-case
    says: str  # the expert's statement this check encodes
    holds: Callable[[Doc], bool]

    @property
    def id(self) -> str:
        return f"{self.trace.split('.')[0]}::{self.name}"


# --- predicates ---------------------------------------------------------------------------------


def findings(doc: Doc, rule: str) -> list[Doc]:
    return [f for f in doc["findings"] if f["rule"] == rule]


def fires(rule: str, *, on_every_rank: int = 0) -> Callable[[Doc], bool]:
    def holds(doc: Doc) -> bool:
        found = findings(doc, rule)
        if on_every_rank:
            return {f["rank"] for f in found} == set(range(on_every_rank))
        return bool(found)

    return holds


def silent(rule: str) -> Callable[[Doc], bool]:
    return lambda doc: not findings(doc, rule)


def at_most(rule: str, severity: str) -> Callable[[Doc], bool]:
    order = {"low": 1, "medium": 2, "high": 3}
    return lambda doc: all(order[f["severity"]] <= order[severity] for f in findings(doc, rule))


def loads(doc: Doc) -> bool:
    return doc["header"]["step_count"] >= 1 and doc["header"]["event_count"] > 0


def no_high_below_floor(doc: Doc) -> bool:
    """No HIGH finding whose saving (or lack of one) is under the policy's share of the step."""
    for f in doc["findings"]:
        if f["severity"] != "high":
            continue
        fraction = f.get("saving_fraction")
        if fraction is None or fraction < HIGH_FLOOR_FRACTION:
            return False
    return True


def savings_within_step(doc: Doc) -> bool:
    return all(
        f.get("saving_fraction") is None or 0 <= f["saving_fraction"] <= 1 for f in doc["findings"]
    )


def no_high_under_ms(ms: float) -> Callable[[Doc], bool]:
    return lambda doc: all(
        f["severity"] != "high" or (f["saving_ms"] or 0) >= ms for f in doc["findings"]
    )


def evidence(rule: str, key: str, test: Callable[[Any], bool]) -> Callable[[Doc], bool]:
    """Every finding of `rule` fires and its evidence[key] passes `test`."""

    def holds(doc: Doc) -> bool:
        found = findings(doc, rule)
        return bool(found) and all(key in f["evidence"] and test(f["evidence"][key]) for f in found)

    return holds


def mentions(rule: str, *words: str) -> Callable[[Doc], bool]:
    """`rule` fires and its summary, caveat or evidence names every word (case-insensitive)."""

    def holds(doc: Doc) -> bool:
        for f in findings(doc, rule):
            text = f"{f['summary']} {f['caveat']} {f['evidence']}".lower()
            if all(w.lower() in text for w in words):
                return True
        return False

    return holds


def if_fires_mentions(rule: str, *words: str) -> Callable[[Doc], bool]:
    return lambda doc: not findings(doc, rule) or mentions(rule, *words)(doc)


def phase_below(phase: str, fraction: float) -> Callable[[Doc], bool]:
    return lambda doc: doc["breakdown"]["median_phase_fraction"][phase] < fraction


def header(key: str, test: Callable[[Any], bool]) -> Callable[[Doc], bool]:
    return lambda doc: test(doc["header"][key])


def idle_cause(expected: str) -> Callable[[Doc], bool]:
    """gpu-idle fires and names `expected` as the host's main activity in the idle time."""
    return evidence("gpu-idle", "top_cause_name", lambda cause: cause == expected)


def saving_at_least(rule: str, ms: float) -> Callable[[Doc], bool]:
    return lambda doc: any((f["saving_ms"] or 0) >= ms for f in findings(doc, rule))


def no_high_zero_saving(doc: Doc) -> bool:
    return all(f["severity"] != "high" or (f["saving_ms"] or 0) > 0 for f in doc["findings"])


def not_flagging_stem_conv(doc: Doc) -> bool:
    """tensor-core-unfriendly-shape does not cite a convolution whose input has 3 channels."""
    for f in findings(doc, "tensor-core-unfriendly-shape"):
        for shape in f["evidence"].get("misaligned_shapes", []):
            if "conv" in str(shape.get("op_name", "")) and "c=3" in str(shape).replace(" ", ""):
                return False
            if "conv" in str(shape.get("op_name", "")):
                return False  # the only conv in this model is the RGB stem
    return True


def one_figure_for_sync_idle(doc: Doc) -> bool:
    """Where sync-point and gpu-idle both speak on a rank, sync-point's saving is the idle that
    gpu-idle attributes to syncs: one cause, one figure (gpu-idle leaves it to sync-point)."""
    idle = {f["rank"]: f for f in findings(doc, "gpu-idle")}
    for sync in findings(doc, "sync-point"):
        other = idle.get(sync["rank"])
        if other is None:
            continue
        attributed = other["evidence"]["idle_ms_by_cause"]["sync_ms"]
        if abs((sync["saving_ms"] or 0.0) - attributed) > max(0.01, 0.01 * attributed):
            return False
    return True


def syncs_per_step(low: float, high: float) -> Callable[[Doc], bool]:
    return evidence("sync-point", "syncs_per_step_count", lambda n: low <= n <= high)


def like_with_like_headline(doc: Doc) -> bool:
    """The rank called slowest is the slowest by the measure the report states for it."""
    ranks = doc["ranks"]
    slowest = doc["slowest_rank"]
    if not ranks or slowest is None:
        return False
    headline = [n for n in doc["notes"] if "slowest" in n.lower()]
    step = {r["rank"]: r["header"]["median_step_ms"] for r in ranks}
    work = {r["rank"]: r.get("work_ms") for r in ranks}
    if all(v is not None for v in work.values()):
        # Named by work: the report must say so and compare work with work.
        by_work = max(work, key=lambda k: work[k])
        return slowest == by_work and any("work" in n.lower() for n in headline)
    return slowest == max(step, key=lambda k: step[k])


# --- the readings -------------------------------------------------------------------------------

OWL = "tl_h100_owlv2_bf16_inference.json.gz"
QWEN = "tl_h100_qwen05b_bf16_inference.json.gz"
VIT = "tl_h100_nsfw_vit_bf16_inference.json.gz"
QWEN_AMD = "tl_mi300xvf_qwen05b_bf16_inference.json.gz"
NOPOOL = "tl_mi300x_ddp_resnet18_no_pool.json.gz"
CKPT = "tl_mi300x_resnet_act_checkpoint_rank0.json.gz"
VLLM = "tl_mi300_vllm_graph_capture.pt.trace.json.gz"
GEMM = "tl_mi300_gemm_misaligned_bf16.json.gz"
HTA = "hta_v100_trace_diff_treatment.json.gz"
R50 = "kineto_v100_resnet50_autograd_nw4.pt.trace.json.gz"
DLRM = "param_v100_dlrm_8rank"

TRACES = (OWL, QWEN, VIT, QWEN_AMD, NOPOOL, CKPT, VLLM, GEMM, HTA, R50, DLRM)

READINGS: tuple[Check, ...] = (
    # H100 OWLv2: single-process DataLoader stalls the GPU; align1 attention GEMMs; D2H syncs.
    Check(OWL, "dataloader-stall", "the pipeline's DataLoader is 51% of the step", fires("dataloader-stall")),
    Check(OWL, "gpu-idle-data", "GPU idle 53%, the host loading data meanwhile", idle_cause("data")),
    Check(OWL, "tensor-core-shape", "align1 bf16 attention GEMMs, 19% of the step", fires("tensor-core-unfriendly-shape")),
    Check(OWL, "sync-count", "80 cudaStreamSynchronize per step must be counted", syncs_per_step(70, 90)),
    Check(OWL, "sync-direction", "the syncs are device-to-host copies and nonzero", mentions("sync-point", "device-to-host")),
    Check(OWL, "pageable-copy", "pageable H2D 30.9 MB per step (minor)", fires("pageable-copy")),
    Check(OWL, "pageable-copy-minor", "pageable H2D is minor", at_most("pageable-copy", "medium")),
    Check(OWL, "no-mixed-precision-silent", "bf16 everywhere", silent("no-mixed-precision")),
    Check(OWL, "tf32-silent", "bf16 everywhere", silent("tf32-disabled")),
    Check(OWL, "h2d-phase-small", "D2H waits are not host-to-device copy", phase_below("h2d", 0.05)),
    # H100 Qwen generation: healthy.
    Check(QWEN, "sync-point-low", "one .item() and one is_nonzero per step: at most LOW", at_most("sync-point", "low")),
    Check(QWEN, "no-high-under-1ms", "no HIGH finding whose saving is under a millisecond", no_high_under_ms(1.0)),
    Check(QWEN, "no-mixed-precision-silent", "bf16", silent("no-mixed-precision")),
    # H100 small ViT: launch-bound, the RGB stem conv is fine.
    Check(VIT, "launch-bound", "115 tiny kernels per step, 99% start at launch", fires("launch-bound")),
    Check(VIT, "gpu-idle", "GPU idle 84%", fires("gpu-idle")),
    Check(VIT, "stem-conv-not-flagged", "in_channels=3 stem ran in align8 tensor-op kernels", not_flagging_stem_conv),
    # MI300X VF Qwen (ROCm 6.4): loads, healthy, hipBLASLt bf16.
    Check(QWEN_AMD, "loads", "ROCm 6.4 string `bytes` must not refuse the trace", loads),
    Check(QWEN_AMD, "no-mixed-precision-silent", "Cijk_..._B_BS_BH_ kernels are bf16", silent("no-mixed-precision")),
    Check(QWEN_AMD, "sync-point-low", "healthy like the H100 run", at_most("sync-point", "low")),
    Check(QWEN_AMD, "no-high-under-1ms", "healthy like the H100 run", no_high_under_ms(1.0)),
    # Encoded for unfused-attention (issue 21 item 7): these runs' attention is fused already
    # (aten::_scaled_dot_product_flash_attention in each trace), so the rule must stay silent.
    Check(QWEN, "unfused-attention-silent", "attention through flash SDPA", silent("unfused-attention")),
    Check(VIT, "unfused-attention-silent", "attention through flash SDPA", silent("unfused-attention")),
    Check(QWEN_AMD, "unfused-attention-silent", "attention through flash SDPA", silent("unfused-attention")),
    # MI300X ResNet-18 with the caching allocator off.
    Check(NOPOOL, "loads", "ROCm 7.0 string `bytes` must not refuse the trace", loads),
    Check(NOPOOL, "allocator-churn-high", "1460 hipMalloc + 1360 hipFree take 3.36 of 3.39 s", lambda d: any(f["severity"] == "high" for f in findings(d, "allocator-churn"))),
    Check(NOPOOL, "gpu-idle-allocator", "the GPU idles while the host allocates", idle_cause("allocator")),
    Check(NOPOOL, "no-mixed-precision-silent", "bf16 convolutions", silent("no-mixed-precision")),
    Check(NOPOOL, "tf32-silent", "bf16 convolutions", silent("tf32-disabled")),
    # MI300X ResNet with activation checkpointing, rank 0 of 8.
    Check(CKPT, "loads", "ROCm 6.4 trace must load", loads),
    Check(CKPT, "comm-bound", "RCCL all-reduce 80-99% of each step", fires("comm-bound")),
    Check(CKPT, "comm-overlap", "only 13-25% overlapped", fires("comm-overlap")),
    Check(CKPT, "comm-overlap-caveat", "one rank cannot tell waiting from transfer", mentions("comm-overlap", "rank", "wait")),
    # MI300 vLLM graph capture: one-off phase, KV-cache pool reserved by design.
    Check(VLLM, "loads", "must load", loads),
    Check(VLLM, "memory-pool-not-pressure", "94% reserved up front is a pool, not pressure", if_fires_mentions("memory-pressure", "reserved", "pool")),
    Check(VLLM, "memory-pressure-not-high", "a pool is not pressure", at_most("memory-pressure", "low")),
    Check(VLLM, "allocator-churn-silent", "capture-time allocations are not churn", silent("allocator-churn")),
    Check(VLLM, "no-high-zero-saving", "no HIGH finding with a zero saving", no_high_zero_saving),
    # MI300 misaligned GEMM micro-benchmark.
    Check(GEMM, "tensor-core-shape", "100% of GEMM time on 4097-sized bf16 matrices", fires("tensor-core-unfriendly-shape")),
    Check(GEMM, "tensor-core-shape-saving", "a real per-step saving, not 0.0 ms", saving_at_least("tensor-core-unfriendly-shape", 0.1)),
    # HTA V100 DLRM-like NCCL run.
    Check(HTA, "no-mixed-precision", "fp32 volta_sgemm is 97% of GEMM time", fires("no-mixed-precision")),
    Check(HTA, "comm-bound", "NCCL 19-38% of the step, 62-75% overlapped", fires("comm-bound")),
    Check(HTA, "comm-bound-moderate", "moderate", at_most("comm-bound", "medium")),
    Check(HTA, "sync-point-low", "syncs block the host 0.04 ms per step", at_most("sync-point", "low")),
    # Kineto V100 ResNet-50 without ProfilerStep: the first iteration is warm-up.
    Check(R50, "steps-inferred", "iterations visible from the repeating annotations", header("step_count", lambda n: n >= 3)),
    Check(R50, "steady-step", "steady iterations ~114 ms", header("median_step_ms", lambda ms: 80 <= ms <= 160)),
    Check(R50, "gpu-idle-silent", "GPU 86-90% busy in steady state", silent("gpu-idle")),
    Check(R50, "allocator-churn-silent", "allocations are warm-up", silent("allocator-churn")),
    Check(R50, "sync-point-silent", "no steady-state sync", silent("sync-point")),
    Check(R50, "dataloader-stall-silent", "the DataLoader is 1-2%", silent("dataloader-stall")),
    Check(R50, "no-mixed-precision", "fp32 on a V100 (volta_* kernels)", fires("no-mixed-precision")),
    Check(R50, "pageable-copy", "19 MB pageable per iteration", fires("pageable-copy")),
    # PARAM DLRM, 8 ranks on V100.
    Check(DLRM, "launch-bound-every-rank", "220-295 tiny kernels per step on every rank", fires("launch-bound", on_every_rank=8)),
    Check(DLRM, "comm-bound", "NCCL 14-57% of the step", fires("comm-bound")),
    Check(DLRM, "comm-overlap", "almost all exposed", fires("comm-overlap")),
    Check(DLRM, "rank-imbalance-silent", "work spans 8.8-11.6 ms, under the 25% threshold", silent("rank-imbalance")),
    Check(DLRM, "sync-count", "10 real GPU syncs per step; CPU .item() are not GPU syncs", lambda d: all(f["evidence"].get("syncs_per_step_count", 0) <= 14 for f in findings(d, "sync-point"))),
    Check(DLRM, "no-mixed-precision-silent", "fp32 GEMMs ~2% of the step", silent("no-mixed-precision")),
    Check(DLRM, "headline-like-with-like", "the headline compares like with like", like_with_like_headline),
)  # fmt: skip


def every_check() -> Iterator[Check]:
    """The readings plus the policy checks that hold on every corpus trace."""
    yield from READINGS
    for trace in TRACES:
        yield Check(
            trace,
            "no-high-below-floor",
            "never HIGH below a few percent of the step",
            no_high_below_floor,
        )
        yield Check(trace, "savings-within-step", "no saving larger than the step", savings_within_step)  # fmt: skip
        yield Check(trace, "sync-idle-one-figure", "sync-point and gpu-idle agree on the syncs' idle", one_figure_for_sync_idle)  # fmt: skip
