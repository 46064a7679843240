"""trace/capture.py: CUDA-graph capture phases."""

from __future__ import annotations

from pathlib import Path

from torchpace.trace import load_trace
from torchpace.trace.capture import capture_ranges
from torchpace.trace.synthetic import TraceBuilder

CORPUS = Path(__file__).parents[1] / "fixtures" / "corpus"


def test_recorded_vllm_capture_is_its_whole_range() -> None:
    """vLLM frees the cache, then captures 25 graphs, all inside capture_8192_PIECEWISE."""
    trace = load_trace(CORPUS / "tl_mi300_vllm_graph_capture.pt.trace.json.gz")
    (phase,) = capture_ranges(trace)
    frees = trace.runtime_of_kind("malloc", "free")
    assert frees and all(phase[0] <= r.ts_us <= phase[1] for r in frees)


def test_synthetic_capture_without_a_range_around_it_is_the_pair(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 10_000)
    b.step(2, 10_000, 10_000)
    b.op("train", 0, 20_000, cat="user_annotation")  # around everything: cut to the step
    b.runtime("cudaStreamBeginCapture", 12_000, 5)
    b.runtime("cudaStreamEndCapture", 13_000, 5)
    b.runtime("cudaStreamBeginCapture", 30_000, 5)  # never ended: no phase
    trace = load_trace(b.write(tmp_path / "synthetic_capture.json"))
    assert capture_ranges(trace) == [(10_000, 20_000)]
