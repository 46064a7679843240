"""A profiled window short of what was asked: said first in the verdict; too short, no step-time
verdict."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from torchpace.analysis import analyze
from torchpace.checkup import MIN_STEPS, doctor_diagnosis, window_caveat
from torchpace.doctor.registry import all_rules
from torchpace.report.findings import verdict
from torchpace.runner.profiling import ProfileBounds
from torchpace.runner.run import DoctorOptions, RunResult

DoctorRun = Callable[..., RunResult]


def test_a_window_cut_before_three_steps_withholds_step_time_verdicts(
    doctor_run: DoctorRun, tmp_path: Path
) -> None:
    # No events allowed: cut at the first profiled step's boundary at the latest (whole steps),
    # or by the watchdog before it. A 1-byte memory bound was not enough: under load the warm-up
    # footprint measured could cover the profiler's growth, and 3 steps were recorded.
    ran = doctor_run("loader_waits.py", bounds=ProfileBounds(max_events=0))
    assert ran.steps_recorded < MIN_STEPS
    options = DoctorOptions(out_dir=tmp_path, warmup=2, steps=3)
    diagnosis = doctor_diagnosis([ran], options)
    assert diagnosis is not None
    live = {s.name for s in all_rules() if s.input == "live"}
    assert {f.rule for f in diagnosis.findings} <= live
    assert diagnosis.caveat.startswith(f"{ran.steps_recorded} of 3 steps profiled")
    assert verdict(diagnosis).startswith(f"{ran.steps_recorded} of 3 steps profiled")
    assert "withheld" in verdict(diagnosis)
    # Every step-time finding the short window gave is named as withheld (which fire depends on
    # how many steps the cut left, 0 or 1 here, and on the machine's load).
    given = analyze(list(ran.trace_files), jobs=1, live=ran.inspection).findings
    too_few = {s.rule for s in diagnosis.skipped if "too few for step-time verdicts" in s.reason}
    assert too_few == {f.rule for f in given if f.rule not in live}


def test_a_whole_window_has_no_caveat(doctor_run: DoctorRun, tmp_path: Path) -> None:
    ran = doctor_run("loader_waits.py")
    assert ran.steps_recorded == 3
    caveat, short = window_caveat([ran], DoctorOptions(out_dir=tmp_path, steps=3))
    assert (caveat, short) == ("", False)
    caveat, short = window_caveat([ran], DoctorOptions(out_dir=tmp_path, steps=10))
    assert caveat.startswith("3 of 10 steps profiled") and not short
