"""Arms that are separate processes (what doctor --verify runs), and the real load probe."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchpace.measure import MachineProbe, Settings, measure
from torchpace.measure.process import command_arm, read_steps, window_from_env, write_steps

CHILD = """
import sys
from torchpace.measure.process import window_from_env, write_steps
warmup, steps = window_from_env()
if sys.argv[1] == "fail":
    raise SystemExit("the script broke")
write_steps([float(sys.argv[1])] * steps)
"""


def _arm(tmp_path: Path, name: str, arg: str):  # type: ignore[no-untyped-def]
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return command_arm(name, [sys.executable, str(script), arg], timeout_s=60)


def test_a_fresh_process_per_run_reports_its_steps(tmp_path: Path) -> None:
    arms = [
        _arm(tmp_path, "plain", "10"),
        _arm(tmp_path, "fixed", "5"),
        _arm(tmp_path, "x", "fail"),
    ]
    result = measure(arms, Settings(warmup=1, steps=4, repeats=2))
    fixed = result.arm("fixed")
    assert len(fixed.runs) == 2 and all(len(r.timed.step_ms) == 4 for r in fixed.runs)
    assert fixed.ratio is not None and fixed.ratio.point == pytest.approx(0.5)
    assert fixed.verdict == "faster"
    ((name, why),) = result.failed
    assert name == "x" and "exited with status 1: the script broke" in why


def test_window_and_steps_round_trip_through_the_environment(tmp_path: Path) -> None:
    env = {"TORCHPACE_MEASURE_OUT": str(tmp_path / "s.json"), "TORCHPACE_MEASURE_STEPS": "7"}
    assert window_from_env(env) == (0, 7)
    assert window_from_env({}) is None
    write_steps([1.0, 2.0], env["TORCHPACE_MEASURE_OUT"])
    assert read_steps(tmp_path / "s.json").step_ms == (1.0, 2.0)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(RuntimeError, match="wrote no step times"):
        read_steps(tmp_path / "bad.json")


def test_the_machine_probe_records_load_without_judging_time() -> None:
    probe = MachineProbe()
    probe.start()
    sum(range(10_000))
    sample = probe.stop()
    assert sample.seconds > 0
    if Path("/proc/stat").exists():
        assert sample.other_cores is not None and sample.other_cores >= 0.0
