"""A GPU that lags the host: kernel time per step is judged against the GPU's step, not the host's.

Recorded on an H200 (tests/fixtures/traces/gpu_lag/PROVENANCE.md): fp32 GEMMs with TF32 off, host
steps of ~2 ms, 30.3 ms of GPU timeline per step (30.3 ms measured side by side). The doctor read
"fp32 GEMM time per step" as 1.02 of the host's step and withheld tf32-disabled.
"""

from __future__ import annotations

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.facts import facts_of
from torchpace.doctor.plausible import impossible
from trace_fixtures import recorded

MEASURED_BEFORE_MS, MEASURED_AFTER_MS = 30.325, 5.375  # pair.json, outside the profiler


def test_the_recorded_lag_is_seen_and_the_step_is_the_gpus() -> None:
    lag = facts_of(recorded("gpu_lag/tf32_off")).device_steps
    assert lag.lags and lag.host_ms < 3.0
    assert lag.step_ms == pytest.approx(MEASURED_BEFORE_MS, rel=0.05)
    assert len(lag.windows) == 5
    after = facts_of(recorded("gpu_lag/tf32_on")).device_steps
    assert after.lags and after.step_ms == pytest.approx(MEASURED_AFTER_MS, rel=0.05)


def test_tf32_disabled_fires_on_the_lagging_trace_with_a_true_fraction() -> None:
    diagnosis = diagnose([recorded("gpu_lag/tf32_off")])
    by_rule = {f.rule: f for f in diagnosis.findings}
    assert not [s for s in diagnosis.skipped if "cannot be true" in s.reason]
    finding = by_rule["tf32-disabled"]
    assert impossible(finding) is None
    assert 0.8 < finding.evidence["fp32_step_fraction"] <= 1.0  # type: ignore[operator]
    # The GEMMs' time per step comes from the kernels the steps launched (most of 30 ms).
    assert 20 < finding.evidence["fp32_ms_per_step"] < MEASURED_BEFORE_MS  # type: ignore[operator]
    # Estimated at 2x, measured 5.64x: the estimate stays under the measured saving.
    assert finding.saving_ms is not None
    assert 0 < finding.saving_ms < MEASURED_BEFORE_MS - MEASURED_AFTER_MS
    assert any(note.startswith("the GPU lags the host") for note in diagnosis.notes)


def test_silent_once_tf32_is_on() -> None:
    diagnosis = diagnose([recorded("gpu_lag/tf32_on")])
    assert {"tf32-disabled", "no-mixed-precision"}.isdisjoint(f.rule for f in diagnosis.findings)


@pytest.mark.parametrize(
    "name",
    [
        "loader_workers/resnet50_v100_num_workers_0",  # a sync every step
        "nccl/nccl_a100",
        "rocm/mi250_minitoy_rocm6.2",  # one step holds all the device work
        "host_sync/event_sync_item",
    ],
)
def test_a_device_that_keeps_up_leaves_the_hosts_step(name: str) -> None:
    trace = recorded(name)
    lag = facts_of(trace).device_steps
    assert not lag.lags
    assert lag.step_ms == trace.breakdown.median_step_ms
