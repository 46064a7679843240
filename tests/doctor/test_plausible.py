"""Figures no real run gives (a fraction above 1, a number that is not finite) are no finding."""

from __future__ import annotations

import math
from pathlib import Path

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.plausible import impossible
from torchpace.trace import load_trace
from torchpace.trace.synthetic import TraceBuilder


def _fp32_trace(tmp_path: Path, long_kernel_us: float) -> Path:
    """An A100 trace of fp32 GEMMs, 0.4 ms each in 0.9 ms steps but one of `long_kernel_us`."""
    b = TraceBuilder()
    b.gpu_device("NVIDIA A100-SXM4-40GB")
    for i in range(6):
        t = i * 1000
        b.step(i, t, 900)
        b.op("aten::mm", t + 200, 300)
        dur = long_kernel_us if i == 3 else 400
        b.kernel("ampere_sgemm_128x64_nn", t + 300, dur, launched_at=t + 230)
    return b.write(tmp_path / "synthetic_fp32_gemms.json")


def _fractions(finding: Finding) -> list[float]:
    return [v for k, v in finding.evidence.items() if k.endswith("fraction")]  # type: ignore[misc]


def test_a_kernel_longer_than_every_step_gives_no_fraction_above_one(tmp_path: Path) -> None:
    # 266 ms of GEMM in one 0.9 ms step: "fp32 time per step" would read 50x the step.
    diagnosis = diagnose(load_trace(_fp32_trace(tmp_path, 266_000)))
    assert all(0 <= f <= 1 for finding in diagnosis.findings for f in _fractions(finding))
    withheld = {s.rule: s.reason for s in diagnosis.skipped}
    for rule, key in (("no-mixed-precision", "fp32_matmul_step_fraction"),
                      ("tf32-disabled", "fp32_step_fraction")):  # fmt: skip
        assert rule not in {f.rule for f in diagnosis.findings}
        assert withheld[rule].startswith(f"its figures cannot be true ({key} is 49.6, a fraction ")
        assert withheld[rule].endswith("the trace's durations do not add up")


def test_the_same_run_without_it_is_judged(tmp_path: Path) -> None:
    diagnosis = diagnose(load_trace(_fp32_trace(tmp_path, 400)))
    assert "no-mixed-precision" in {f.rule for f in diagnosis.findings}
    assert not [s for s in diagnosis.skipped if "cannot be true" in s.reason]


def test_impossible_names_the_figure() -> None:
    def finding(saving: float | None = 1.0, **evidence: object) -> Finding:
        return Finding("gpu-idle", Severity.LOW, "s", evidence, "fix", saving_ms=saving)  # type: ignore[arg-type]

    assert impossible(finding(idle_fraction=1.0, step_ms=3.0, kernels=[{"x": 2}])) is None
    assert impossible(finding(idle_fraction=1.5)) == "idle_fraction is 1.5, a fraction outside 0-1"
    assert impossible(finding(top=[{"wait_fraction": -0.2}])) == (
        "wait_fraction is -0.2, a fraction outside 0-1"
    )
    assert impossible(finding(step_ms=math.inf)) == "step_ms is inf"
    assert impossible(finding(saving=math.nan)) == "saving_ms is nan"
