"""Steps timed at fewer torch threads after the window of a CPU run whose threads contended with
other processes for the cores (runner/window.py): when, at what count, and the count restored."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from torchpace.policy.threads import FewerThreads
from torchpace.runner import window as window_module
from torchpace.runner.math_clock import MathClock
from torchpace.runner.options import DoctorOptions, SessionState
from torchpace.runner.phases import MATH_STEPS
from torchpace.runner.sensors.loader import LoaderRecord, LoaderSensor, static_facts
from torchpace.runner.window import Window


@pytest.fixture(autouse=True)
def two_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Two torch threads on a 2-core machine, whatever this one has; its count put back."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(window_module, "usable_cores", lambda: 2)
    yield
    torch.set_num_threads(before)


def _window(tmp_path: Path, ready_ms: float, **options: object) -> Window:
    """After the timed steps of pytorch/examples' VAE beside two busy loops: other processes
    kept 1 of 2 cores busy over the profiled 474 ms steps; the training thread waited `ready_ms`
    of each for a core."""
    opts = DoctorOptions(out_dir=tmp_path, profile_memory=False, **options)  # type: ignore[arg-type]
    state = SessionState(phase="timed", profiled_others_cores=1.0, profiled_ready_ms=ready_ms)
    compiles = SimpleNamespace(compiled_any=lambda: False)
    inspector = SimpleNamespace(
        memory=None, watcher=None, compiled=False, compiles=compiles, loader=LoaderSensor()
    )
    w = Window(opts, tmp_path, state, inspector, lambda _: None)  # type: ignore[arg-type]
    w.clock.profiled_ms = [474.0] * 10
    w.clock.after_ms = [78.0, 70.0, 90.0]
    return w


def test_a_contended_cpu_run_times_steps_at_the_free_cores_then_restores_its_count(
    tmp_path: Path,
) -> None:
    w = _window(tmp_path, ready_ms=237.0)
    w.timing_done(here=True)
    assert w.state.phase == "probe" and torch.get_num_threads() == 1
    w.clock.fewer_ms = [40.0, 35.1, 33.0]
    w.probe_done()
    assert w.state.phase == "done" and torch.get_num_threads() == 2
    assert w.state.fewer_threads == FewerThreads(2, 1, 78.0, 35.1, 3)
    assert "3 ran at torch.set_num_threads(1)" in w.state.notes[-1]


def test_the_steps_at_fewer_threads_say_how_long_their_batches_took(tmp_path: Path) -> None:
    # accelerate's BERT example beside two busy loops: 1.9 ms a step waiting for batches in the
    # profiled steps at 2 threads, 0.7 ms at 1 (1.0 ms quiet at 2): its spinning compute thread
    # held the free core while the loading waited for one.
    w = _window(tmp_path, ready_ms=237.0)
    record = LoaderRecord(static_facts(torch.utils.data.DataLoader(range(4)), None))
    record.wait_s, record.batches_profiled = 0.019, 10
    w.inspector.loader.records.append(record)
    w.timing_done(here=True)
    w.clock.fewer_ms = [40.0, 35.1, 33.0]
    for _ in range(3):
        record.probed(lambda _: time.sleep(0.0007), None)
    w.probe_done()
    fewer = w.state.fewer_threads
    assert fewer is not None and fewer.loading is not None
    assert fewer.loading >= 0.7 / 1.9  # each batch slept at least 0.7 ms of the 1.9 ms
    assert (
        "their batches took 37% of the profiled steps' wait" in replace(fewer, loading=0.37).said()
    )
    assert "their batches" not in replace(fewer, loading=1.3).said()  # at most all of it


def test_the_last_steps_at_fewer_threads_time_their_matmuls(tmp_path: Path) -> None:
    """After the timed steps at fewer threads, MATH_STEPS more run under a CPU-only profiler:
    their outermost matmuls' time a step (the mm inside the addmm's wrapper once), the timed
    steps' median left to the unprofiled ones."""
    w = _window(tmp_path, ready_ms=237.0)
    w.timing_done(here=True)
    w.clock.fewer_ms = [40.0, 35.1, 33.0]
    w.time_math()
    a = torch.randn(256, 256)
    begun = time.perf_counter()
    for _ in range(MATH_STEPS):
        torch.nn.functional.linear(a, a, a[0])  # addmm
        (a @ a).relu_()  # mm, then an op that is no matmul
        time.sleep(0.01)
        w.clock.fewer_ms.append(60.0)
    took_ms = (time.perf_counter() - begun) * 1e3
    w.probe_done()
    fewer = w.state.fewer_threads
    assert fewer is not None and fewer.fewer_ms == 35.1 and fewer.steps == 3
    assert fewer.math_step_ms == 60.0  # the profiled steps' own
    assert (
        fewer.math_ms is not None and 0 < fewer.math_ms < (took_ms - 10 * MATH_STEPS) / MATH_STEPS
    )
    assert not torch.autograd._profiler_enabled() and torch.get_num_threads() == 2


def test_the_script_ending_while_its_matmuls_are_timed_stops_the_profiler(tmp_path: Path) -> None:
    w = _window(tmp_path, ready_ms=237.0)
    w.timing_done(here=True)
    w.clock.fewer_ms = [40.0, 35.1, 33.0]
    w.time_math()
    assert torch.autograd._profiler_enabled()
    w.end(partial=False, here=True, final=True)
    assert not torch.autograd._profiler_enabled() and torch.get_num_threads() == 2


def test_the_scripts_own_profiler_starting_meanwhile_gets_the_threads_and_the_profiler(
    tmp_path: Path,
) -> None:
    """Two profilers cannot record at once: the script's own, started while the matmuls of the
    steps at fewer threads are timed, takes over (the session steps aside) with its count back."""
    w = _window(tmp_path, ready_ms=237.0)
    w.timing_done(here=True)
    w.clock.fewer_ms = [40.0, 35.1, 33.0]
    w.time_math()
    w.inspector.unwatch = lambda: None  # nothing watched in this window
    w.aside(None)
    assert not torch.autograd._profiler_enabled() and torch.get_num_threads() == 2
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        torch.ones(2).sum()
    assert w.state.phase == "aside"


def test_the_script_ending_meanwhile_gets_its_count_back(tmp_path: Path) -> None:
    w = _window(tmp_path, ready_ms=237.0)
    w.timing_done(here=True)
    assert torch.get_num_threads() == 1
    w.end(partial=False, here=True, final=True)
    assert w.state.phase == "done" and torch.get_num_threads() == 2
    assert w.state.fewer_threads is None


@pytest.mark.parametrize(
    ("ready_ms", "here", "options"),
    [
        (20.0, True, {}),  # the thread hardly waited for a core: no contention
        (237.0, False, {}),  # another thread's step: its OpenMP count is not this thread's
        (237.0, True, {"full": True}),  # the script runs on: its steps keep their threads
        (237.0, True, {"follow": True}),
        (237.0, True, {"world_size": 2}),  # ranks stop together (runner/ranks.py)
        (237.0, True, {"probe_steps": 0}),
    ],
)
def test_no_steps_at_fewer_threads(
    tmp_path: Path, ready_ms: float, here: bool, options: dict[str, object]
) -> None:
    w = _window(tmp_path, ready_ms, **options)
    w.timing_done(here=here)
    assert w.state.phase == "done" and torch.get_num_threads() == 2


def test_a_script_training_in_two_threads_keeps_its_count(tmp_path: Path) -> None:
    # torch's thread count is the process's: not changed while another thread computes.
    w = _window(tmp_path, ready_ms=237.0)
    w.act("timing_done", window=False, here=True, dispatch=True, alone=False)
    assert w.state.phase == "done" and torch.get_num_threads() == 2
    w.act("timing_done", window=False, here=True, dispatch=True, alone=True)
    assert w.state.phase == "probe" and torch.get_num_threads() == 1
    w.probe_done()


def test_a_model_on_an_accelerator_keeps_its_threads(tmp_path: Path) -> None:
    w = _window(tmp_path, ready_ms=237.0)
    w.inspector.watcher = SimpleNamespace(model=SimpleNamespace(device_type="cuda"))  # type: ignore[assignment]
    w.timing_done(here=True)
    assert w.state.phase == "done" and torch.get_num_threads() == 2


def test_a_compiled_script_runs_its_steps_at_fewer_threads_eager(tmp_path: Path) -> None:
    # dynamo guards on torch's thread count: PyG's compiled GIN compiled its forward again
    # (`GLOBAL_STATE changed: grad_mode num_threads`, 17.7 s) in the steps at fewer threads.
    # Eager there, nothing compiles; the stance and the count come back after them.
    for how in ("called", "by_library"):
        w = _window(tmp_path, ready_ms=237.0)
        if how == "called":
            w.inspector.compiled = True  # type: ignore[attr-defined]
        else:
            w.inspector.compiles.compiled_any = lambda: True  # type: ignore[attr-defined]
        w.timing_done(here=True)
        assert w.state.phase == "probe" and torch.get_num_threads() == 1
        assert torch._dynamo.eval_frame._stance.stance == "force_eager"
        w.clock.fewer_ms = [61.0, 60.0, 64.0]
        w.probe_done()
        assert torch._dynamo.eval_frame._stance.stance == "default"
        assert torch.get_num_threads() == 2
        assert w.state.fewer_threads == FewerThreads(2, 1, 78.0, 61.0, 3, eager=True)
        assert "ran at torch.set_num_threads(1) eager" in w.state.notes[-1]


def test_the_script_ending_while_eager_gets_its_stance_back(tmp_path: Path) -> None:
    w = _window(tmp_path, ready_ms=237.0)
    w.inspector.compiled = True  # type: ignore[attr-defined]
    w.timing_done(here=True)
    w.end(partial=False, here=True, final=True)
    assert torch._dynamo.eval_frame._stance.stance == "default"
    assert torch.get_num_threads() == 2


def test_dynamo_compiling_a_frame_is_seen(tmp_path: Path) -> None:
    from torchpace.runner.sensors.compile import CompileSensor

    sensor = CompileSensor()
    sensor.install()
    assert not sensor.compiled_any()
    torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2))
    assert sensor.compiled_any()
    torch._dynamo.reset()  # no compiled frame left for the tests after this one


@pytest.mark.parametrize(
    ("script", "probed"), [("conv_bias_bn.py", True), ("two_threads.py", False)]
)
def test_the_session_times_fewer_threads_for_one_training_thread_only(
    doctor_run: Any, monkeypatch: pytest.MonkeyPatch, script: str, probed: bool
) -> None:
    """A script training in its main thread alone gets its steps at fewer threads (the main
    thread is among the threads seen once it is the anchor: the last stop's check counted it as
    another, and no script was ever probed); one training in two threads keeps its count."""
    monkeypatch.setattr(Window, "_fewer_threads", lambda self: 1)  # as if contended
    timed: list[int] = []
    probed_batch = LoaderRecord.probed
    monkeypatch.setattr(
        LoaderRecord, "probed", lambda self, *a: timed.append(1) or probed_batch(self, *a)
    )
    ran = doctor_run(script, probe_steps=3)
    assert ran.exit_code == 0, ran.error
    fewer = ran.inspection.host.fewer_threads
    assert (fewer is not None) is probed
    assert fewer is None or fewer.loading is not None  # its batches timed there too
    assert len(timed) == (3 if probed else 0)  # not those of the steps profiled for their math
    assert fewer is None or (fewer.math_ms or 0) > 0  # its conv and linear timed at the end
    assert torch.get_num_threads() == 2  # its count back


def test_the_matmul_clock_reads_the_same_ops_from_kineto_and_from_events() -> None:
    """Kineto's own events are read (events() builds a tree of every one: 30x slower); a torch
    without their accessors falls back to events(), which must find the same ops."""
    clock = MathClock(memory=False)
    clock.start()
    a = torch.randn(64, 64)
    torch.nn.functional.linear(a, a, a[0])
    torch.nn.functional.conv2d(torch.randn(1, 1, 8, 8), torch.randn(1, 1, 3, 3)).relu_()
    clock._profiler.stop()
    fast = clock._math_ops()
    events = clock._profiler.events()
    clock._profiler.profiler = SimpleNamespace(function_events=events)  # no kineto_results
    slow = clock._math_ops()
    assert len(fast) == len(slow) >= 2
    durations = [
        [end - start for _, start, end in sorted(x, key=lambda s: s[1])] for x in (fast, slow)
    ]
    # the same ops, but for events() rounding both ends of kineto's nanoseconds to microseconds
    assert all(abs(f - s) <= 2.0 for f, s in zip(*durations, strict=True))
