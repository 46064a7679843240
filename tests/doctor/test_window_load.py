"""The profiled window's load figures cover its steps, not the profiler's stop after them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from torchpace.runner import window as window_module
from torchpace.runner.load import LoadSample
from torchpace.runner.options import DoctorOptions, SessionState
from torchpace.runner.window import Window


class _Machine:
    """The training thread's run-queue wait and the machine's busy time, advanced by hand."""

    def __init__(self) -> None:
        self.ready_s = 0.0
        self.busy_s = 0.0
        self.t = 0.0

    def sample(self) -> LoadSample:
        return LoadSample(self.t, self.busy_s, 0.0)


class _Recorder:
    """Stopping converts the events: on a busy machine the thread waits long for a core."""

    def __init__(self, machine: _Machine) -> None:
        self.machine = machine

    def stop(self) -> object:
        self.machine.ready_s += 0.5
        self.machine.busy_s += 2.0
        self.machine.t += 1.0
        return SimpleNamespace(prof=None)

    def write(self, window: object, steps: int) -> None:
        return None


def test_load_is_read_over_the_steps_not_the_profilers_stop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    m = _Machine()
    monkeypatch.setattr(window_module, "thread_ready_s", lambda: m.ready_s)
    monkeypatch.setattr(window_module, "sample_load", m.sample)
    options = DoctorOptions(out_dir=tmp_path, profile_memory=False)
    inspector = SimpleNamespace(memory=None)
    w = Window(options, tmp_path, SessionState(), inspector, lambda _: None)  # type: ignore[arg-type]
    w.recorder = _Recorder(m)  # type: ignore[assignment]
    w._load, w._ready0 = m.sample(), m.ready_s
    # Ten 2 ms steps; the thread waited 4 ms of them for a core, the others kept 1 core busy.
    m.ready_s, m.busy_s, m.t = 0.004, 0.02, 0.02
    w.state.recorded = 10
    w.finish(partial=False, here=True)
    assert w.state.profiled_ready_ms == pytest.approx(0.4)  # per step, not 50 ms of the stop
    assert w.state.profiled_others_cores == pytest.approx(1.0)
