"""Every expert reading of the real-trace corpus holds (tests/fixtures/corpus/PROVENANCE.md)."""

from __future__ import annotations

import pytest

from .conftest import report_of
from .readings import CORPUS, TRACES, Check, every_check

CHECKS = list(every_check())

# Readings that do not hold yet (issue 12 fixes them). Strict: a check that starts to hold while
# still listed fails, so this list only shrinks. It must be empty when issue 12 is done.
NOT_YET: frozenset[str] = frozenset({
    "tl_h100_owlv2_bf16_inference::sync-count",
    "tl_h100_owlv2_bf16_inference::sync-direction",
    "tl_h100_owlv2_bf16_inference::h2d-phase-small",
    "tl_h100_qwen05b_bf16_inference::sync-point-low",
    "tl_h100_qwen05b_bf16_inference::no-high-under-1ms",
    "tl_h100_nsfw_vit_bf16_inference::stem-conv-not-flagged",
    "tl_mi300xvf_qwen05b_bf16_inference::no-mixed-precision-silent",
    "tl_mi300xvf_qwen05b_bf16_inference::sync-point-low",
    "tl_mi300xvf_qwen05b_bf16_inference::no-high-under-1ms",
    "tl_mi300x_ddp_resnet18_no_pool::gpu-idle-allocator",
    "tl_mi300_vllm_graph_capture::memory-pool-not-pressure",
    "tl_mi300_vllm_graph_capture::memory-pressure-not-high",
    "tl_mi300_vllm_graph_capture::allocator-churn-silent",
    "tl_mi300_vllm_graph_capture::no-high-zero-saving",
    "tl_mi300_gemm_misaligned_bf16::tensor-core-shape-saving",
    "kineto_v100_resnet50_autograd_nw4::no-mixed-precision",
    "tl_h100_owlv2_bf16_inference::no-high-below-floor",
    "tl_h100_qwen05b_bf16_inference::no-high-below-floor",
    "tl_mi300xvf_qwen05b_bf16_inference::no-high-below-floor",
    "tl_mi300_vllm_graph_capture::no-high-below-floor",
    "tl_mi300_gemm_misaligned_bf16::no-high-below-floor",
    "param_v100_dlrm_8rank::no-high-below-floor",
})  # fmt: skip


def test_every_corpus_trace_is_read() -> None:
    on_disk = {p.name for p in CORPUS.iterdir() if p.name != "PROVENANCE.md"}
    assert on_disk == set(TRACES)


def test_check_ids_are_unique() -> None:
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
    assert set(ids) >= NOT_YET


def _param(check: Check) -> object:
    marks = [pytest.mark.xfail(strict=True, reason="not fixed yet")] if check.id in NOT_YET else []
    return pytest.param(check, id=check.id, marks=marks)


@pytest.mark.parametrize("check", [_param(c) for c in CHECKS])
def test_reading_holds(check: Check) -> None:
    doc = report_of(check.trace)
    assert check.holds(doc), f"{check.trace}: {check.says}"
