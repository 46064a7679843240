"""memory-pressure: reserved memory near capacity, or far above what tensors use."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from gpu_traces import gpu_builder, recorded, write
from hypothesis import given
from hypothesis import strategies as st

from torchpace.doctor.finding import Severity
from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.memory_pressure import _nanmax, memory_pressure
from torchpace.trace import Trace, load_trace

GIB = 2**30


def _memory(tmp_path: Path, allocated: int, reserved: int, swing: int = 4 * GIB) -> Trace:
    """Allocated memory climbs by `swing` to `allocated` (activations) under a flat reservation."""
    b = gpu_builder(8, 0)
    b.kernel("ampere_sgemm_128x64_nn", 200, 100)
    for i in range(5):
        b.memory(1_000 + i * 1_000, swing // 4, allocated - (4 - i) * swing // 4, reserved)
    return write(b, tmp_path, f"synthetic_memory_{allocated}_{reserved}_{swing}")


def test_recorded_transformer_reserves_far_more_than_it_uses() -> None:
    (finding,) = memory_pressure(recorded("large/transformer_v100_rank1of2_memory"))
    assert finding.severity is Severity.LOW  # 38% of a 32 GB V100: no pressure yet
    assert 0.4 < float(finding.evidence["allocated_reserved_ratio"]) < 0.6
    assert "expandable_segments" in finding.fix
    assert finding.saving_ms is None and finding.saving_method.startswith("no step-time estimate")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("loader_workers/resnet50_v100_num_workers_0", "do not record Total Reserved"),
        ("nccl/nccl_a100", "no GPU memory events"),
        ("loader_workers/mlp_sleepy_dataset_torch2.13", "no GPU activity"),
    ],
)
def test_not_applicable_names_what_to_record(name: str, reason: str) -> None:
    with pytest.raises(NotApplicable, match=reason):
        memory_pressure(recorded(name))


def test_near_capacity(tmp_path: Path) -> None:
    (finding,) = memory_pressure(_memory(tmp_path, 34 * GIB, 36 * GIB))  # 92% of 42 GB
    assert finding.severity is Severity.MEDIUM and "near out-of-memory" in finding.summary
    assert "checkpoint" in finding.fix


def test_a_pool_held_flat_is_not_pressure(tmp_path: Path) -> None:
    """vLLM-style: tensors hold the whole reservation from start to end (a KV-cache pool)."""
    (finding,) = memory_pressure(_memory(tmp_path, 38 * GIB, 38 * GIB + 2**28, swing=2**26))
    assert finding.severity is Severity.LOW
    assert "reserved up front" in finding.summary and "pool" in finding.summary
    assert finding.evidence["pool_held_flat"] is True
    assert "gpu_memory_utilization" in finding.fix


def test_recorded_vllm_kv_cache_is_a_pool() -> None:
    corpus = Path(__file__).parents[2] / "fixtures" / "corpus"
    (finding,) = memory_pressure(
        load_trace(corpus / "tl_mi300_vllm_graph_capture.pt.trace.json.gz")
    )
    assert finding.severity is Severity.LOW and "not allocator pressure" in finding.summary
    assert 0.9 < float(finding.evidence["reserved_capacity_fraction"]) < 0.97  # type: ignore[arg-type]


def test_silent_when_reserved_tracks_allocated(tmp_path: Path) -> None:
    assert memory_pressure(_memory(tmp_path, 10 * GIB, 11 * GIB)) == []


@given(st.lists(st.one_of(st.floats(-1e12, 1e12), st.just(math.nan)), max_size=20))
def test_nanmax_ignores_nan_wherever_it_stands(values: list[float]) -> None:
    numbers = [v for v in values if not math.isnan(v)]
    got = _nanmax(values)
    assert got == max(numbers) if numbers else math.isnan(got)
