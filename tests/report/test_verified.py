"""Every report format shows what `doctor --verify` measured beside the estimate."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.verification import ArmFigures, MeasuredSaving, Verification
from torchpace.report import render

ANSI = re.compile(r"\x1b\[[0-9;]*m")

FASTER = ArmFigures("num_workers=4, persistent_workers=True", 120.0, 110.0, 130.0, 60.0, 55.0,
                    66.0, 2.0, 1.8, 2.2, "faster", 3)  # fmt: skip
SLOWER = ArmFigures("pin_memory=False", 120.0, 110.0, 130.0, 125.0, 120.0, 131.0, 0.96, 0.9,
                    1.01, "no-change", 3)  # fmt: skip
VERIFIED = Verification(
    warmup_steps=3, steps=12, rounds=3, baseline_ms=120.0, baseline_low_ms=110.0,
    baseline_high_ms=130.0, profiled_step_ms=150.0, load="machine load: 2 usable cores",
    load_warning="", total_s=95.0, budget_s=180.0, combined=FASTER,
    combined_fixes=(FASTER.label,), not_measured=("channels_last",),
    failed=(("no-grad", "exited with status 1: boom"),),
)  # fmt: skip


MEASURED = {
    "dataloader-stall": MeasuredSaving("measured", FASTER.label, "", FASTER, (FASTER,)),
    "pageable-copy": MeasuredSaving("no-gain", SLOWER.label, "", SLOWER, (SLOWER,)),
    "allocator-churn": MeasuredSaving("needs-code", "", note="not measured: needs a code change"),
}


def _verified(plain: Diagnosis) -> Diagnosis:
    findings = tuple(replace(f, measured=MEASURED[f.rule]) for f in plain.findings)
    return replace(plain, findings=findings, verification=VERIFIED)


def _rendered(diagnosis: Diagnosis, fmt: str) -> str:
    if fmt == "colour":  # the terminal's report: rich, escape codes taken out
        return ANSI.sub("", render(diagnosis, "text", color=True, width=140))
    if fmt == "md":  # brackets are escaped (no text becomes a link); shown as written
        return render(diagnosis, fmt).replace("\\[", "[").replace("\\]", "]")
    return render(diagnosis, fmt)


def test_every_format_shows_measured_beside_estimated(diagnosis: Diagnosis) -> None:
    for fmt in ("text", "colour", "md", "html"):
        out = _rendered(_verified(diagnosis), fmt)
        assert "60.0 ms per step with num_workers=4" in out, fmt  # 120 - 120 / 2
        assert "2.00x [1.80-2.20, 95%]" in out and "plain 120 ms" in out, fmt
        assert "estimated 42.0 ms (-30% off)" in out, fmt
        assert "no gain here" in out and "not prescribed" in out, fmt
        assert "needs a code change" in out, fmt
        assert "the profiler&#x27;s own effect 1.25x" in out or "profiler's own effect 1.25x" in out
        assert "channels_last" in out and "boom" in out and "95 s of a 180 s budget" in out, fmt


def test_json_carries_the_measured_record_and_the_verification(diagnosis: Diagnosis) -> None:
    doc = json.loads(render(_verified(diagnosis), "json"))
    by_rule = {f["rule"]: f["measured"] for f in doc["findings"]}
    stall = by_rule["dataloader-stall"]
    assert stall["status"] == "measured" and stall["saving_ms"] == 60.0
    assert stall["best"]["speedup_interval_ratio"] == [1.8, 2.2]
    assert stall["estimate_error_fraction"] == -0.3
    assert by_rule["pageable-copy"]["status"] == "no-gain"
    assert by_rule["pageable-copy"]["saving_ms"] is None
    v = doc["verification"]
    assert v["profiler_inflation_ratio"] == 1.25 and v["not_measured_for_time"] == ["channels_last"]
    assert v["combined"]["speedup_ratio"] == 2.0


def test_unverified_reports_say_nothing_of_verification(diagnosis: Diagnosis) -> None:
    for fmt in ("text", "md", "html"):
        assert "Measured saving" not in render(diagnosis, fmt)
    assert json.loads(render(diagnosis, "json"))["findings"][0]["measured"] is None
