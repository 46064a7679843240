"""The session's phase decisions (runner/phases.py), with no thread, clock or torch."""

from __future__ import annotations

from pathlib import Path

from torchpace.runner.options import DoctorOptions, Phase
from torchpace.runner.phases import MATH_STEPS, Action, Counts, after_profile, at_boundary

# What each action does to the phase when it succeeds (runner/session.py carries them out).
_MOVES: dict[Action, Phase] = {
    "watch": "watch",
    "start_profiler": "profile",
    "finish": "done",
    "timing_done": "done",
}


def _walk(opts: DoctorOptions, boundaries: int, *, watchable: bool = True) -> list[tuple]:
    """Phase, profiled steps and actions at each boundary of a run whose actions all succeed."""
    phase: Phase = "warmup"
    recorded = timed = 0
    seen = []
    for n in range(1, boundaries + 1):
        timed += phase == "timed"
        recorded, actions = at_boundary(
            Counts(phase, n, recorded, timed), opts, watchable=watchable
        )
        for action in actions:
            if action == "start_timing":
                phase = after_profile(opts, window=False)
            phase = _MOVES.get(action, phase)
        seen.append((n, phase, recorded, actions))
    return seen


def test_warmup_watch_profile_timed_done(tmp_path: Path) -> None:
    opts = DoctorOptions(out_dir=tmp_path, warmup=5, steps=3, watch_steps=2, timed_steps=2)
    seen = _walk(opts, 12)
    phases = [phase for _, phase, _, _ in seen]
    expected = ["warmup"] * 3 + ["watch"] * 2 + ["profile"] * 3 + ["timed"] * 2 + ["done"] * 2
    assert phases == expected
    assert seen[3][3] == ("watch",)
    assert seen[5][3] == ("end_warmup", "start_profiler")
    assert seen[8][3] == ("finish", "start_timing") and seen[8][2] == 3
    assert seen[10][3] == ("timing_done",)


def test_unwatchable_runs_skip_the_watch_and_no_profile_goes_to_timing(tmp_path: Path) -> None:
    opts = DoctorOptions(out_dir=tmp_path, warmup=2, profile=False, timed_steps=0)
    seen = _walk(opts, 4, watchable=False)
    assert [phase for _, phase, _, _ in seen] == ["warmup", "warmup", "done", "done"]
    assert seen[2][3] == ("end_warmup", "start_timing")


def test_time_windows_have_no_timed_steps(tmp_path: Path) -> None:
    opts = DoctorOptions(out_dir=tmp_path)
    assert after_profile(opts, window=True) == "done"
    assert after_profile(opts, window=False) == "timed"
    assert after_profile(DoctorOptions(out_dir=tmp_path, timed_steps=0), window=False) == "done"


def test_aside_and_done_do_nothing(tmp_path: Path) -> None:
    opts = DoctorOptions(out_dir=tmp_path)
    for phase in ("aside", "done"):
        assert at_boundary(Counts(phase, 99, 4, 0), opts, watchable=True) == (4, ())


def test_steps_at_fewer_threads_end_after_their_count(tmp_path: Path) -> None:
    # The window moves a contended run from "timed" to "probe" (runner/window.py); the phases
    # count its steps, time the matmuls of MATH_STEPS more, and end it.
    opts = DoctorOptions(out_dir=tmp_path, probe_steps=3)
    assert at_boundary(Counts("probe", 20, 10, 3, 2), opts, watchable=True) == (10, ())
    assert at_boundary(Counts("probe", 21, 10, 3, 3), opts, watchable=True) == (10, ("time_math",))
    last = 3 + MATH_STEPS
    assert at_boundary(Counts("probe", 21, 10, 3, last - 1), opts, watchable=True) == (10, ())
    done = at_boundary(Counts("probe", 22, 10, 3, last), opts, watchable=True)
    assert done == (10, ("probe_done",))
