"""unfused-attention: attention written as matmul -> softmax -> matmul instead of one SDPA call."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_traces import recorded

from torchpace.doctor.rules.unfused_attention import (
    Chain,
    _products_alike,
    eager_chains,
    unfused_attention,
)
from torchpace.trace import load_trace
from torchpace.trace.events import HostOp
from torchpace.trace.synthetic import TraceBuilder

CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus"


def test_flags_hand_written_attention_with_chained_shapes() -> None:
    # nanoGPT's slow path, recorded with shapes: q @ k^T [32,128,16]x[32,16,128], softmax over
    # [8,4,128,128], then [32,128,128]x[32,128,16].
    (finding,) = unfused_attention(recorded("attention/cpu_gpt_eager_attention"))
    ev = finding.evidence
    assert ev["attention_calls_per_step"] == 2.0  # two layers
    assert ev["scores_shapes"] == [
        {
            "batch_heads_count": 32,
            "query_len": 128,
            "key_len": 128,
            "calls_per_step": 2.0,
            "between_matmuls_ms_per_step": ev["between_matmuls_ms_per_step"],
        }
    ]
    assert ev["time_source"] == "host ops (CPU run)" and ev["dropout_between"] is False
    # A CPU run: all of it, the forward passes between the matmuls and the softmax's backward.
    passes = ev["between_matmuls_ms_per_step"] + ev["softmax_backward_ms_per_step"]  # type: ignore[operator]
    assert ev["softmax_backward_ms_per_step"] > 0 and finding.saving_ms == pytest.approx(passes)  # type: ignore[operator]
    assert "host time" in finding.saving_method and "scaled_dot_product_attention" in finding.fix


def test_silent_once_the_attention_is_fused() -> None:
    assert unfused_attention(recorded("attention/cpu_gpt_sdpa")) == []
    # nn.MultiheadAttention(need_weights=False) runs SDPA.
    assert unfused_attention(recorded("user_labels/cpu_transformer_labels")) == []


def test_silent_on_sdpa_math_fallback_in_a_real_hf_run() -> None:
    # HF run_clm.py (GPT-2, torch 2.13 CPU) under the doctor: SDPA with dropout runs its math
    # fallback, whose bmm -> softmax -> bmm sits inside aten::scaled_dot_product_attention.
    trace = recorded("independent_ranks/hf_run_clm_cpu/rank0.pt.trace")
    assert trace.ops_named({"aten::softmax"})  # the fallback's softmax is in the trace
    assert eager_chains(trace) == [] and unfused_attention(trace) == []


def test_softmax_inside_sdpa_math_is_not_eager_attention() -> None:
    # A harness through nn.MultiheadAttention (need_weights=True by default: bmm, softmax, bmm)
    # and nn.TransformerEncoderLayer (SDPA's math fallback: bmm, _safe_softmax, bmm inside
    # aten::scaled_dot_product_attention): only the first is eager attention.
    chains = eager_chains(recorded("backward_steps/cpu_layer_harness"))
    assert len(chains) == 1
    assert chains[0].scores.name in ("aten::baddbmm", "aten::bmm")


def test_real_gpu_trace_of_an_eager_hf_model() -> None:
    # OWLv2 (Hugging Face, bf16, H100): its attention is bmm -> softmax -> bmm over 5185 tokens.
    trace = load_trace(CORPUS / "tl_h100_owlv2_bf16_inference.json.gz")
    (finding,) = unfused_attention(trace)
    ev = finding.evidence
    top = ev["scores_shapes"][0]  # type: ignore[index]
    assert (top["batch_heads_count"], top["query_len"], top["key_len"]) == (16, 5185, 5185)  # type: ignore[index]
    assert ev["time_source"] == "GPU kernels"
    assert 0 < finding.saving_ms < ev["between_matmuls_ms_per_step"]  # type: ignore[operator]
    assert finding.locations and finding.locations[0].file.endswith("modeling_owlv2.py")


def test_silent_on_flash_attention_traces() -> None:
    for name in ("tl_h100_qwen05b_bf16_inference", "tl_h100_nsfw_vit_bf16_inference"):
        assert unfused_attention(load_trace(CORPUS / f"{name}.json.gz")) == []


def _synthetic_cpu(between: list[str]) -> TraceBuilder:
    """Three 10 ms CPU steps of bmm -> softmax -> `between` -> bmm, without shapes."""
    b = TraceBuilder()
    for n in range(3):
        t = n * 10_000
        b.step(n, t, 10_000)
        b.op("aten::bmm", t + 100, 500)
        b.op("aten::softmax", t + 700, 2_000)
        for i, name in enumerate(between):
            b.op(name, t + 2_800 + i * 20, 10)
        b.op("aten::bmm", t + 2_900 + len(between) * 20, 500)
    return b


def test_no_saving_for_dropout_on_the_cpu(tmp_path: Path) -> None:
    # Without shapes the order decides; SDPA with dropout on the CPU is its unfused fallback.
    trace = load_trace(
        _synthetic_cpu(["aten::dropout", "aten::bernoulli_"]).write(
            tmp_path / "synthetic_cpu_dropout.json"
        )
    )
    (finding,) = unfused_attention(trace)
    assert finding.evidence["dropout_between"] is True
    assert finding.saving_ms is None and "math fallback" in finding.saving_method


def test_too_many_ops_between_is_not_attention(tmp_path: Path) -> None:
    b = _synthetic_cpu(["aten::add"] * 45)
    assert eager_chains(load_trace(b.write(tmp_path / "synthetic_far_apart.json"))) == []


def _shaped(softmax: list[int]) -> TraceBuilder:
    b = TraceBuilder()
    b.step(0, 0, 10_000)
    types = {"Input type": ["float", "float"]}
    b.op("aten::bmm", 100, 500, args={"Input Dims": [[4, 8, 16], [4, 16, 8]], **types})
    b.op("aten::softmax", 700, 200, args={"Input Dims": [softmax, [], []], **types})
    b.op("aten::bmm", 1_000, 500, args={"Input Dims": [[4, 8, 8], [4, 8, 16]], **types})
    return b


def test_recorded_shapes_must_chain(tmp_path: Path) -> None:
    chained = load_trace(_shaped([2, 2, 8, 8]).write(tmp_path / "synthetic_chained.json"))
    assert [c.shape for c in eager_chains(chained)] == [(4, 8, 8)]
    # A softmax over something else between two products is not their attention.
    other = load_trace(_shaped([2, 2, 8, 5]).write(tmp_path / "synthetic_unchained.json"))
    assert eager_chains(other) == []


def test_graph_attention_is_not_dot_product_attention(tmp_path: Path, clean_torch: None) -> None:
    # pytorch/examples' GAT (recorded without shapes, as the doctor does on the CPU) was told to
    # call scaled_dot_product_attention: its scores come from two thin products. Beside two busy
    # loops both products took 7.7 ms (torch's threads waiting at each op's barrier), so the
    # live doctor decides by the shapes it watched, whatever the load.
    from torchpace.runner.run import DoctorOptions, Target, run_target

    script = Path(__file__).parents[1] / "scripts" / "graph_attention.py"
    options = DoctorOptions(out_dir=tmp_path, warmup=2, steps=3, window_after_s=0)
    ran = run_target(Target(str(script), ("--iters", "20")), options)
    trace = load_trace(ran.trace_files[0])
    assert trace.ops_named({"aten::softmax"})
    chained, unchained = ran.inspection.model.softmax_chains or (None, None)
    assert chained == 0 and unchained
    assert unfused_attention(trace, live=ran.inspection) == []
    assert eager_chains(trace, (1, 0)) and eager_chains(trace, (0, 2)) == []


def test_without_a_watch_the_products_must_take_alike_times() -> None:
    """A trace without shapes and no live watch (`analyze`): attention's two products are both
    L x S x d. The real GAT's read 54-884x (its scores: two thin products), minGPT's 0.1-3.1x.
    Op times as given, so the machine's load plays no part here."""

    def chains(*ratios: float) -> list[Chain]:
        def op(dur_us: float) -> HostOp:
            return HostOp("aten::bmm", "op", 0.0, dur_us, 1, 1, None)

        softmax = HostOp("aten::softmax", "op", 0.0, 1.0, 1, 1, None)
        return [Chain(op(10.0), softmax, op(10.0 * r), None) for r in ratios]

    assert not _products_alike(chains(54, 200, 884))  # GAT
    assert _products_alike(chains(0.1, 1.0, 3.1))  # minGPT
    assert _products_alike(chains(1.0, 1.2, 900))  # one product stretched by a time slice


def test_the_watched_shapes_find_hand_written_attention(tmp_path: Path, clean_torch: None) -> None:
    from torchpace.runner.run import DoctorOptions, Target, run_target

    script = Path(__file__).parents[1] / "scripts" / "unfused_attention.py"
    options = DoctorOptions(out_dir=tmp_path, warmup=2, steps=3, window_after_s=0)
    ran = run_target(Target(str(script), ("--iters", "20")), options)
    chained, unchained = ran.inspection.model.softmax_chains or (0, None)
    assert chained > 0 and unchained == 0
    assert ran.trace_files, ran.notes
    (finding,) = unfused_attention(load_trace(ran.trace_files[0]), live=ran.inspection)
    assert finding.rule == "unfused-attention"
