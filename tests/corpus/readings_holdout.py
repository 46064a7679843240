"""The expert readings of the held-out traces, as checks on torchpace's JSON report.

The held-out set (tests/fixtures/holdout/PROVENANCE.md) judges whether the rules fixed against the
corpus generalise: its readings were written from the raw JSON before torchpace ran on it, and the
checks below were encoded from them before torchpace's output was seen. Same predicates, same
policy checks as the corpus (readings.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from .readings import (
    Check,
    Doc,
    at_most,
    evidence,
    findings,
    fires,
    header,
    like_with_like_headline,
    loads,
    mentions,
    no_high_below_floor,
    not_flagging_stem_conv,
    one_figure_for_sync_idle,
    phase_below,
    saving_at_least,
    savings_within_step,
    silent,
    syncs_per_step,
)

HOLDOUT = Path(__file__).resolve().parents[1] / "fixtures" / "holdout"

ORDER = {"low": 1, "medium": 2, "high": 3}


def idle_cause_in(*causes: str) -> Callable[[Doc], bool]:
    """gpu-idle fires and names one of `causes` as the host's main activity in the idle time."""
    return evidence("gpu-idle", "top_cause_name", lambda cause: cause in causes)


def at_least(rule: str, severity: str) -> Callable[[Doc], bool]:
    return lambda doc: any(ORDER[f["severity"]] >= ORDER[severity] for f in findings(doc, rule))


def skipped(rule: str) -> Callable[[Doc], bool]:
    """`rule` is listed as skipped, with a reason."""
    return lambda doc: any(s["rule"] == rule and s["reason"] for s in doc["skipped"])


def rank_count(n: int) -> Callable[[Doc], bool]:
    return lambda doc: len(doc["ranks"]) == n


B200 = "tl_b200_gptoss_eager_prefill_rank0.json.gz"
TSF = "tl_h100_timesformer_bf16_inference.json.gz"
TSF_AMD = "tl_mi300xvf_timesformer_bf16_inference.json.gz"
VIT_AMD = "tl_mi300xvf_nsfw_vit_bf16_inference.json.gz"
MI210 = "tl_mi210_gpu_only_bf16.json.gz"
VLLM_DEC = "tl_mi300_vllm_gptoss_decode_graph.json.gz"
TREC = "hta_a100_torchrec_rank0of16.json.gz"
DLRM128 = "hta_a100_dlrm_2of128ranks"
GP100 = "hta_gp100_toy_train_loop.json.gz"
R50_NW4 = "kineto_v100_resnet50_nw4_profiler_api.pt.trace.json.gz"
R50_NW0 = "kineto_v100_resnet50_autograd_nw0.pt.trace.json.gz"
T2080 = "param_rtx2080ti_resnet_workers.json.gz"

TRACES = (
    B200,
    TSF,
    TSF_AMD,
    VIT_AMD,
    MI210,
    VLLM_DEC,
    TREC,
    DLRM128,
    GP100,
    R50_NW4,
    R50_NW0,
    T2080,
)

HOST_CAUSES = ("host_compute", "launch_overhead", "other")

READINGS: tuple[Check, ...] = (
    # B200 eager vLLM prefill, rank 0 of 8: the host paces the GPU.
    Check(B200, "loads", "CUDA 12.9 / B200 trace must load", loads),
    Check(B200, "launch-bound", "585 of 768 kernels under 10 us, 91% start at launch", fires("launch-bound")),
    Check(B200, "gpu-idle-host", "GPU idle 87% while the host runs eager Python and ops", idle_cause_in(*HOST_CAUSES)),
    Check(B200, "comm-bound-silent", "all-reduce is 2.4% of the window", silent("comm-bound")),
    Check(B200, "comm-overlap-silent", "all-reduce is 2.4% of the window", silent("comm-overlap")),
    Check(B200, "no-mixed-precision-silent", "MXFP8/MXFP4 and bf16 GEMMs", silent("no-mixed-precision")),
    Check(B200, "tf32-silent", "no fp32 GEMMs", silent("tf32-disabled")),
    Check(B200, "sync-point-silent", "no synchronize call", silent("sync-point")),
    Check(B200, "allocator-churn-silent", "no allocator call", silent("allocator-churn")),
    Check(B200, "pageable-copy-silent", "2 pageable copies of a few bytes", silent("pageable-copy")),
    Check(B200, "dataloader-stall-silent", "no DataLoader", silent("dataloader-stall")),
    Check(B200, "rank-imbalance-silent", "one rank of 8 cannot show imbalance", silent("rank-imbalance")),
    # H100 TimeSformer pipeline: host pre-processing, align1 attention bmm.
    Check(TSF, "gpu-idle-host", "GPU idle 59% while the host pre-processes video in Python", idle_cause_in("other", "data")),
    Check(TSF, "tensor-core-shape", "align1 attention bmm: 43 ms, 80% of bf16 GEMM time", fires("tensor-core-unfriendly-shape")),
    Check(TSF, "tensor-core-shape-saving", "a real per-step saving", saving_at_least("tensor-core-unfriendly-shape", 1.0)),
    Check(TSF, "pageable-copy", "38.5 MB pageable upload", fires("pageable-copy")),
    Check(TSF, "pageable-copy-minor", "the upload blocks 1% of the step", at_most("pageable-copy", "medium")),
    Check(TSF, "dataloader-stall-silent", "no DataLoader", silent("dataloader-stall")),
    Check(TSF, "no-mixed-precision-silent", "bf16 throughout", silent("no-mixed-precision")),
    Check(TSF, "tf32-silent", "bf16 throughout", silent("tf32-disabled")),
    Check(TSF, "launch-bound-silent", "2% of kernels start at launch", silent("launch-bound")),
    Check(TSF, "memory-pressure-silent", "4.3 of 79 GiB reserved", silent("memory-pressure")),
    Check(TSF, "allocator-churn-silent", "no allocator calls", silent("allocator-churn")),
    Check(TSF, "sync-point-low", "the syncs drain a GPU with no further work", at_most("sync-point", "low")),
    Check(TSF, "h2d-phase-small", "the logits' D2H wait is not host-to-device copy", phase_below("h2d", 0.05)),
    # Encoded when unfused-attention was added (issue 21 item 7): the reading names "unfused eager
    # attention" (softmax over the 3137x3137 scores 68.7 ms, 44% of kernel time) and "the bigger
    # fix, fused SDPA attention" that no rule covered.
    Check(TSF, "unfused-attention", "unfused eager attention, softmax 44% of kernel time", fires("unfused-attention")),
    Check(TSF, "unfused-attention-saving", "a real per-step saving", saving_at_least("unfused-attention", 1.0)),
    # MI300X VF TimeSformer: the same on ROCm.
    Check(TSF_AMD, "loads", "HIP 6.4 trace must load", loads),
    Check(TSF_AMD, "gpu-idle-host", "GPU idle 69% while the host pre-processes", idle_cause_in("other", "data")),
    Check(TSF_AMD, "tensor-core-shape", "bmm over 3137 tokens: 45% of bf16 GEMM time", fires("tensor-core-unfriendly-shape")),
    Check(TSF_AMD, "stem-conv-not-flagged", "the 3-channel patch conv is fine", not_flagging_stem_conv),
    Check(TSF_AMD, "no-mixed-precision-silent", "Tensile B_BS_BH bf16", silent("no-mixed-precision")),
    Check(TSF_AMD, "tf32-silent", "ROCm", silent("tf32-disabled")),
    Check(TSF_AMD, "pageable-copy-minor", "the upload is 5% of the step", at_most("pageable-copy", "medium")),
    # Encoded after a held-out validation found ROCm uploads never flagged ("may fire" in the
    # reading): the synchronous hipMemcpyWithStream of 38.5 MB keeps the host until it is done.
    Check(TSF_AMD, "pageable-copy", "a synchronous hipMemcpyWithStream upload of 38.5 MB", fires("pageable-copy")),
    Check(TSF_AMD, "sync-point-low", "the syncs drain a GPU with no further work", at_most("sync-point", "low")),
    Check(TSF_AMD, "launch-bound-silent", "2% of kernels start at launch", silent("launch-bound")),
    Check(TSF_AMD, "dataloader-stall-silent", "no DataLoader", silent("dataloader-stall")),
    Check(TSF_AMD, "allocator-churn-silent", "no allocator calls", silent("allocator-churn")),
    # MI300X VF small ViT: launch-bound on ROCm too.
    Check(VIT_AMD, "launch-bound", "117 of 155 kernels tiny, 100% at launch", fires("launch-bound")),
    Check(VIT_AMD, "gpu-idle", "GPU idle 77%", fires("gpu-idle")),
    Check(VIT_AMD, "stem-conv-not-flagged", "MIOpen bf16 stem conv with C_in=3", not_flagging_stem_conv),
    Check(VIT_AMD, "no-mixed-precision-silent", "bf16 hipBLASLt", silent("no-mixed-precision")),
    Check(VIT_AMD, "unfused-attention-silent", "Triton attn_fwd: fused attention", silent("unfused-attention")),
    Check(VIT_AMD, "sync-point-low", "one device sync at the step start", at_most("sync-point", "low")),
    # MI210, GPU activity only.
    Check(MI210, "loads", "a trace without host ops must load", loads),
    Check(MI210, "no-mixed-precision-silent", "bf16 MIOpen convolutions", silent("no-mixed-precision")),
    Check(MI210, "gpu-idle-silent", "GPU busy 87%", silent("gpu-idle")),
    Check(MI210, "launch-bound-silent", "25% of kernels start at launch", silent("launch-bound")),
    Check(MI210, "sync-point-low", "one device sync at the end", at_most("sync-point", "low")),
    Check(MI210, "dataloader-stall-silent", "no host ops", silent("dataloader-stall")),
    Check(MI210, "allocator-churn-silent", "no allocator calls", silent("allocator-churn")),
    # vLLM decode as one graph replay on MI300.
    Check(VLLM_DEC, "loads", "HIP 7.0 trace must load", loads),
    Check(VLLM_DEC, "launch-bound-silent", "425 kernels replayed by one hipGraphLaunch", silent("launch-bound")),
    Check(VLLM_DEC, "no-mixed-precision-silent", "MXFP4 and bf16", silent("no-mixed-precision")),
    Check(VLLM_DEC, "sync-point-low", "one 2 us event sync", at_most("sync-point", "low")),
    Check(VLLM_DEC, "allocator-churn-silent", "no allocator calls", silent("allocator-churn")),
    Check(VLLM_DEC, "dataloader-stall-silent", "no DataLoader", silent("dataloader-stall")),
    # A100 TorchRec rank 0 of 16: the host blocks in a device-to-host copy.
    Check(TREC, "sync-point", "the host blocks 139-147 ms per step in a D2H copy", at_least("sync-point", "medium")),
    Check(TREC, "sync-direction", "the blocking copy is device-to-host", mentions("sync-point", "device-to-host")),
    Check(TREC, "sync-count", "15 copies to/from pageable memory per step, each synced", syncs_per_step(6, 20)),
    # Encoded after a held-out validation found sync-point's saving at 6.65 ms per step: the
    # reading's "93 of the 139 ms of idle per step fall inside these copies" is the syncs' cost.
    Check(TREC, "sync-point-saving", "the GPU idles ~93 ms per step inside these copies", saving_at_least("sync-point", 80.0)),
    Check(TREC, "gpu-idle-sync", "the GPU idles while the host is blocked", idle_cause_in("sync")),
    Check(TREC, "h2d-phase-small", "the D2H wait is not host-to-device copy", phase_below("h2d", 0.05)),
    Check(TREC, "comm-bound-silent", "NCCL 14-17% of the step", silent("comm-bound")),
    Check(TREC, "comm-overlap", "NCCL almost all exposed, 14-17% of the step", fires("comm-overlap")),
    Check(TREC, "launch-bound-silent", "1-5% of kernels start at launch", silent("launch-bound")),
    Check(TREC, "no-mixed-precision-silent", "TF32 tensor-core CUTLASS GEMMs", silent("no-mixed-precision")),
    Check(TREC, "tf32-silent", "TF32 is on", silent("tf32-disabled")),
    Check(TREC, "pageable-copy-silent", "under 0.01 MB per step", silent("pageable-copy")),
    Check(TREC, "allocator-churn-silent", "no allocator calls", silent("allocator-churn")),
    Check(TREC, "dataloader-stall-silent", "no DataLoader", silent("dataloader-stall")),
    Check(TREC, "rank-imbalance-silent", "one rank of 16", silent("rank-imbalance")),
    # 2 of 128 ranks of a DLRM run.
    Check(DLRM128, "both-ranks", "a folder of 2 rank files", rank_count(2)),
    Check(DLRM128, "comm-bound", "all-to-all 27-33% of the step", fires("comm-bound")),
    Check(DLRM128, "comm-overlap", "exposed 22-28% of the step", fires("comm-overlap")),
    Check(DLRM128, "rank-imbalance-silent", "work spread 5%", silent("rank-imbalance")),
    Check(DLRM128, "headline-like-with-like", "the headline compares like with like", like_with_like_headline),
    Check(DLRM128, "gpu-idle-every-rank", "GPU idle 53-55% on both ranks", fires("gpu-idle", on_every_rank=2)),
    Check(DLRM128, "no-mixed-precision-silent", "TF32 and fp16 kernels", silent("no-mixed-precision")),
    Check(DLRM128, "launch-bound-silent", "~22% of kernels start at launch", silent("launch-bound")),
    # Quadro GP100 toy loop: no tensor cores.
    Check(GP100, "steps-inferred", "5 iterations from the optimizer markers", header("step_count", lambda n: n >= 4)),
    Check(GP100, "steady-step", "iterations of ~1.55 ms", header("median_step_ms", lambda ms: 1.0 <= ms <= 2.5)),
    Check(GP100, "gpu-idle", "GPU busy 3.7%", fires("gpu-idle")),
    Check(GP100, "no-mixed-precision-silent", "compute capability 6.0 has no tensor cores", silent("no-mixed-precision")),
    Check(GP100, "no-mixed-precision-skipped", "and says why", skipped("no-mixed-precision")),
    Check(GP100, "tf32-silent", "not an Ampere GPU", silent("tf32-disabled")),
    Check(GP100, "sync-point-low", "two blocking uploads of a few bytes", at_most("sync-point", "low")),
    Check(GP100, "pageable-copy-silent", "a few bytes per iteration", silent("pageable-copy")),
    # Kineto V100 ResNet-50, 4 workers, ProfilerStep.
    Check(R50_NW4, "steps", "6 ProfilerSteps", header("step_count", lambda n: n == 6)),
    Check(R50_NW4, "gpu-idle-silent", "GPU ~81% busy", silent("gpu-idle")),
    Check(R50_NW4, "dataloader-stall-silent", "DataLoader ~1% of the step", silent("dataloader-stall")),
    Check(R50_NW4, "no-mixed-precision", "fp32 cuDNN/cuBLAS on a V100", fires("no-mixed-precision")),
    Check(R50_NW4, "pageable-copy", "19.3 MB pageable per step", fires("pageable-copy")),
    Check(R50_NW4, "pageable-copy-minor", "3.2 ms of a ~125 ms step", at_most("pageable-copy", "medium")),
    Check(R50_NW4, "sync-point-silent", "only the uploads' own syncs", silent("sync-point")),
    Check(R50_NW4, "allocator-churn-silent", "no allocator calls", silent("allocator-churn")),
    Check(R50_NW4, "launch-bound-silent", "17-35% start at launch", silent("launch-bound")),
    # Kineto V100 ResNet-50, num_workers=0, no ProfilerStep.
    Check(R50_NW0, "steps-inferred", "6 iterations from the loop's markers", header("step_count", lambda n: n >= 4)),
    Check(R50_NW0, "steady-step", "steady iterations ~157 ms", header("median_step_ms", lambda ms: 120 <= ms <= 200)),
    Check(R50_NW0, "dataloader-stall", "single-process DataLoader ~30% of each iteration", fires("dataloader-stall")),
    Check(R50_NW0, "gpu-idle-data", "GPU idle 35% while the host loads data", idle_cause_in("data")),
    Check(R50_NW0, "allocator-churn-silent", "one top-up in iteration 2, none after", silent("allocator-churn")),
    Check(R50_NW0, "sync-point-silent", "warm-up syncs are not steady state", silent("sync-point")),
    Check(R50_NW0, "no-mixed-precision", "fp32 on a V100 (volta_* names)", fires("no-mixed-precision")),
    Check(R50_NW0, "pageable-copy", "19.3 MB pageable per iteration", fires("pageable-copy")),
    Check(R50_NW0, "launch-bound-silent", "9-23% start at launch", silent("launch-bound")),
    # PARAM ResNet on an RTX 2080 Ti: the workers cannot keep up, in bursts.
    Check(T2080, "steps-inferred", "29 whole iterations from the DataLoader markers", header("step_count", lambda n: n >= 20)),
    Check(T2080, "dataloader-stall", "the loop waits 63% of its steady time for batches", fires("dataloader-stall")),
    Check(T2080, "gpu-idle-data", "GPU busy 49%, idle while waiting for batches", idle_cause_in("data")),
    # Encoded after the first run, from the same reading: the GPU is busy 49% over the steady
    # iterations (the first run's header said 99%: 11 stalls dropped as outliers, and a median).
    Check(T2080, "gpu-busy-half", "the GPU is busy 49% over the steady iterations", header("gpu_busy_fraction", lambda f: 0.35 <= f <= 0.65)),
    Check(T2080, "no-mixed-precision", "fp32 on Turing (7.5)", fires("no-mixed-precision")),
    Check(T2080, "pageable-copy", "77 MB pageable per iteration", fires("pageable-copy")),
    Check(T2080, "allocator-churn-silent", "no allocator calls after iteration 2", silent("allocator-churn")),
    Check(T2080, "sync-point-silent", "only the uploads' own syncs", silent("sync-point")),
    Check(T2080, "launch-bound-silent", "1% start at launch", silent("launch-bound")),
)  # fmt: skip


def every_check() -> Iterator[Check]:
    """The held-out readings plus the policy checks that hold on every trace."""
    yield from READINGS
    for trace in TRACES:
        yield Check(trace, "no-high-below-floor", "never HIGH below a few percent of the step", no_high_below_floor)  # fmt: skip
        yield Check(trace, "savings-within-step", "no saving larger than the step", savings_within_step)  # fmt: skip
        yield Check(trace, "sync-idle-one-figure", "sync-point and gpu-idle agree on the syncs' idle", one_figure_for_sync_idle)  # fmt: skip
