"""Estimated SM efficiency and achieved occupancy per step (the TensorBoard plugin's definitions)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from torchpace.trace import load_trace
from torchpace.trace.events import GpuEvent
from torchpace.trace.occupancy import launch_columns, step_figures
from torchpace.trace.synthetic import TraceBuilder

FIXTURES = Path(__file__).parents[1] / "fixtures"
VIT = FIXTURES / "corpus" / "tl_h100_nsfw_vit_bf16_inference.json.gz"


def test_recorded_h100_step_matches_the_plugins_definition_from_the_raw_json() -> None:
    # Computed here straight from the file: sum(min(blocks per SM, 1) x dur) / step duration, and
    # occupancy weighted by kernel duration.
    events = json.loads(gzip.decompress(VIT.read_bytes()))["traceEvents"]
    (step,) = [
        e
        for e in events
        if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") == "user_annotation"
    ]
    lo, hi = step["ts"], step["ts"] + step["dur"]
    kernels = [e for e in events if e.get("cat") == "kernel" and lo <= e["ts"] < hi]
    sm = sum(min(k["args"]["blocks per SM"], 1) * k["dur"] for k in kernels) / step["dur"]
    occupancy = sum(k["args"]["est. achieved occupancy %"] * k["dur"] for k in kernels) / sum(
        k["dur"] for k in kernels
    )
    (got,) = load_trace(VIT).breakdown.steps
    assert got.sm_efficiency is not None and abs(got.sm_efficiency - sm) < 1e-6
    assert (
        got.achieved_occupancy is not None and abs(got.achieved_occupancy - occupancy / 100) < 1e-6
    )
    assert 0.10 < got.sm_efficiency < got.gpu_busy_ms / got.duration_ms  # type: ignore[operator]


def test_torch_18_trace_gives_blocks_per_sm_through_warps_per_sm() -> None:
    # Its kernels record `warps per SM` and the block, not `blocks per SM`: 25088 blocks of 64
    # threads on 80 SMs is 627.2 warps per SM, so 313.6 blocks per SM.
    trace = load_trace(FIXTURES / "corpus" / "kineto_v100_resnet50_autograd_nw4.pt.trace.json.gz")
    assert trace.kernels[0].blocks_per_sm is not None
    assert abs(trace.kernels[0].blocks_per_sm - 313.6) < 1e-9
    assert trace.breakdown.sm_efficiency is not None and trace.breakdown.achieved_occupancy is None


def test_rocm_trace_has_neither_figure() -> None:
    trace = load_trace(FIXTURES / "traces" / "rocm" / "mi250_minitoy_rocm6.2.json.gz")
    assert trace.breakdown.gpu_busy_fraction is not None
    assert (trace.breakdown.sm_efficiency, trace.breakdown.achieved_occupancy) == (None, None)


def test_synthetic_step(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 1000)
    b.kernel("k_small", 100, 100, args={"blocks per SM": 0.25, "est. achieved occupancy %": 10})
    b.kernel("k_big", 300, 100, args={"blocks per SM": 3.0, "est. achieved occupancy %": 50})
    b.kernel("k_unknown", 500, 100, args={"blocks per SM": -1})  # CUPTI's "unknown"
    (step,) = load_trace(b.write(tmp_path / "synthetic_launch.json")).breakdown.steps
    assert step.sm_efficiency is not None and abs(step.sm_efficiency - 0.125) < 1e-9
    assert step.achieved_occupancy is not None and abs(step.achieved_occupancy - 0.30) < 1e-9


def _kernel(ts: float, dur: float, blocks: float | None) -> GpuEvent:
    return GpuEvent("k", "kernel", ts, dur, 0, 7, None, None, blocks_per_sm=blocks)


@given(
    st.lists(
        st.tuples(
            st.floats(0, 1000), st.floats(0.1, 500), st.one_of(st.none(), st.floats(0.001, 64))
        ),
        min_size=1,
        max_size=30,
    )
)
def test_sm_efficiency_never_exceeds_gpu_busy(
    specs: list[tuple[float, float, float | None]],
) -> None:
    kernels = sorted((_kernel(*s) for s in specs), key=lambda k: k.ts_us)
    durs = [k.dur_us for k in kernels]
    ends = sorted((k.ts_us, k.end_us) for k in kernels)
    busy, end = 0.0, -1.0
    for lo, hi in ends:  # union of the kernels' intervals
        busy += max(0.0, hi - max(lo, end))
        end = max(end, hi)
    step_us = 2000.0
    sm, _ = step_figures(launch_columns(kernels, durs), durs, 0, len(kernels), busy, step_us)
    if sm is not None:
        assert 0.0 <= sm <= busy / step_us + 1e-12
