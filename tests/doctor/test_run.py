"""Running scripts under the doctor: step sources, stopping, failures, own profilers, -m."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.errors import UsageError
from torchpace.runner.run import DoctorOptions, RunResult, Target, run_target

SCRIPTS = Path(__file__).parent / "scripts"

DoctorRun = Callable[..., RunResult]


def profiler_steps(path: str) -> int:
    assert path.endswith(".json.gz")  # the doctor writes its traces compressed
    events = json.loads(gzip.decompress(Path(path).read_bytes()))["traceEvents"]
    return sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))


def test_two_optimizers_are_grouped_by_iteration(doctor_run: DoctorRun) -> None:
    r = doctor_run("two_optimizers.py")
    assert (r.exit_code, r.steps_recorded, r.step_source) == (0, 3, "optimizer")
    assert "2 optimizers" in r.step_note
    (trace,) = r.trace_files
    assert profiler_steps(trace) == 3


def test_closure_optimizer_step_is_the_whole_iteration(doctor_run: DoctorRun) -> None:
    r = doctor_run("closure_lbfgs.py")
    assert (r.steps_recorded, r.step_source) == (3, "optimizer")
    assert "closure" in r.step_note


def test_evaluation_loop_falls_back_to_dataloader_batches(doctor_run: DoctorRun) -> None:
    r = doctor_run("eval_no_optimizer.py")
    assert (r.steps_recorded, r.step_source) == (3, "dataloader")


def test_a_script_that_ends_inside_the_window_says_so(doctor_run: DoctorRun) -> None:
    # mnist_hogwild's evaluation ended 6 batches into the window: "6 of 10 steps profiled (the
    # notes say why)", and no note did. Its loaders' epochs are then the whole run's.
    r = doctor_run("eval_no_optimizer.py", "--iters", "12", steps=10)
    assert (r.exit_code, r.stopped_early) == (0, False) and 0 < r.steps_recorded < 10
    assert f"the script ended after {r.steps_recorded} of the 10 profiled steps asked" in r.notes
    assert r.inspection.ran_to_end
    assert not doctor_run("forever.py").inspection.ran_to_end  # the doctor stopped it


def test_hand_written_updates_fall_back_to_backward_calls(doctor_run: DoctorRun) -> None:
    r = doctor_run("manual_update.py")
    assert (r.steps_recorded, r.step_source) == (3, "backward")


def test_a_loop_with_no_signal_is_cut_into_time_windows_and_bounded(doctor_run: DoctorRun) -> None:
    # 8 s: windows must have begun before the deadline, on a loaded machine too (issue 22).
    r = doctor_run("forever_idle.py", window_after_s=0.3, window_s=0.1, steps=200, max_seconds=8.0)
    assert r.step_source == "window" and r.timed_out
    assert r.steps_recorded > 0 and not r.stopped_early
    (trace,) = r.trace_files
    assert profiler_steps(trace) == r.steps_recorded  # the unfinished window is left out
    assert any("--max-seconds 8" in n for n in r.notes)


def test_never_ending_training_stops_after_the_profiled_steps(doctor_run: DoctorRun) -> None:
    r = doctor_run("forever.py")
    assert r.stopped_early and r.exit_code == 0 and r.steps_recorded == 3


def test_script_exception_keeps_captured_steps_and_its_traceback(doctor_run: DoctorRun) -> None:
    r = doctor_run("raises.py")
    assert r.exit_code == 1
    assert "RuntimeError: boom at step 6" in r.error
    assert r.error.splitlines()[1].strip().startswith(f'File "{SCRIPTS / "raises.py"}"')
    assert r.steps_recorded == 2
    assert profiler_steps(r.trace_files[0]) == 2
    assert any("left out (unfinished)" in n for n in r.notes)


def test_a_failed_script_leaves_torchs_loader_signal_handler_in_place(
    doctor_run: DoctorRun,
) -> None:
    # The doctor drops torch's SIGCHLD handler while a failed script's workers end (it would
    # raise inside the doctor's teardown), then puts it back: torch installs it once per process,
    # and a process that goes on (a notebook, this test suite) would not watch its DataLoader
    # workers again.
    import signal

    from torch.utils.data._utils import signal_handling

    before, was_set = signal.getsignal(signal.SIGCHLD), signal_handling._SIGCHLD_handler_set
    signal_handling._SIGCHLD_handler_set = False
    try:
        signal_handling._set_SIGCHLD_handler()
        torchs = signal.getsignal(signal.SIGCHLD)
        assert doctor_run("raises.py").exit_code == 1
        assert signal.getsignal(signal.SIGCHLD) is torchs
    finally:
        signal.signal(signal.SIGCHLD, before)
        signal_handling._SIGCHLD_handler_set = was_set


def test_sys_exit_code_is_kept(doctor_run: DoctorRun) -> None:
    r = doctor_run("sys_exit.py")
    assert (r.exit_code, r.error, r.steps_recorded) == (3, "", 2)


def test_ctrl_c_still_yields_the_captured_steps(doctor_run: DoctorRun) -> None:
    import signal

    # What `python script.py` starts with, whatever the test process was left with.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        r = doctor_run("interrupted.py")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert r.exit_code == 130 and "KeyboardInterrupt" in r.error
    assert r.steps_recorded == 2 and r.trace_files


def test_script_with_its_own_profiler_is_left_alone(
    doctor_run: DoctorRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "own.json"
    r = doctor_run("own_profiler.py", "--trace", str(own))
    assert r.exit_code == 0, r.error
    assert r.aside and r.trace_files == (str(own),)
    assert "own profiler finished" in capsys.readouterr().out
    assert any("stepped aside" in n for n in r.notes)


def test_full_run_sees_what_python_would(
    doctor_run: DoctorRun, capsys: pytest.CaptureFixture[str]
) -> None:
    r = doctor_run("finishes.py", "--iters", "12", "-x", full=True)
    out = capsys.readouterr().out
    assert "args: ['--iters', '12', '-x'] name: __main__ path0: scripts" in out
    assert "script reached its end" in out
    assert r.exit_code == 0 and not r.stopped_early and r.steps_recorded == 3


def test_module_target_runs_like_python_dash_m(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(SCRIPTS)
    options = DoctorOptions(out_dir=tmp_path, warmup=1, steps=2, full=True)
    r = run_target(Target("finishes", ("--iters", "10"), module=True), options)
    assert r.exit_code == 0 and r.steps_recorded == 2
    assert "script reached its end" in capsys.readouterr().out


def test_missing_script_and_module_are_usage_errors(tmp_path: Path) -> None:
    options = DoctorOptions(out_dir=tmp_path)
    with pytest.raises(UsageError, match=r"script 'nope.py' not found; give the path"):
        run_target(Target("nope.py"), options)
    with pytest.raises(UsageError, match="no module named 'no_such_mod_xyz'"):
        run_target(Target("no_such_mod_xyz", module=True), options)


def test_patches_are_undone_after_a_run(doctor_run: DoctorRun) -> None:
    import torch
    import torch.utils.data.dataloader as dl

    before = (dl._BaseDataLoaderIter.__next__, torch.autograd.backward, torch.compile)
    doctor_run("forever.py")
    after = (dl._BaseDataLoaderIter.__next__, torch.autograd.backward, torch.compile)
    assert before == after
    assert not getattr(torch.optim.SGD.step, "_torchpace", False)


def test_a_patched_torchscript_op_stays_that_op_and_leaves_no_trace() -> None:
    """warnings.warn is aten::warn to TorchScript, by identity: its wrapper must be too (PyG's
    examples/jit/gin.py failed in torch.jit.script under the doctor), and only while it is in."""
    import warnings

    import torch
    from torch.jit import _builtins

    from torchpace.runner.patching import Patcher

    patcher = Patcher()
    patcher.wrap(warnings, "warn", lambda original: lambda *a, **k: original(*a, **k))
    wrapper = warnings.warn
    try:

        def warns(x: torch.Tensor) -> torch.Tensor:
            if bool(x.isnan().any()):
                warnings.warn("NaN", stacklevel=2)
            return x

        assert torch.jit.script(warns)(torch.ones(2)).sum().item() == 2.0
        assert _builtins._find_builtin(wrapper) == "aten::warn"
    finally:
        patcher.restore()
    assert warnings.warn is not wrapper and _builtins._find_builtin(wrapper) is None
    assert _builtins._find_builtin(warnings.warn) == "aten::warn"


def test_compiled_model_is_not_watched_but_autocast_and_compile_are_seen(
    doctor_run: DoctorRun,
) -> None:
    r = doctor_run("compiled.py")
    live = r.inspection
    assert r.exit_code == 0, r.error
    assert live.flags.compiled is True and live.model.steps == 0
    assert (
        live.model.autocast_in_forward is None
    )  # autocast was used; no watched forward says where


def test_no_autocast_anywhere_means_none_in_the_forward(doctor_run: DoctorRun) -> None:
    live = doctor_run("two_optimizers.py").inspection
    assert live.model.autocast_in_forward is False and live.model.autocast_dtype is None


def test_scoped_anomaly_detection_is_seen_inside_the_loop(doctor_run: DoctorRun) -> None:
    live = doctor_run("anomaly_scoped.py").inspection
    assert live.flags.anomaly_detection is True and live.flags.debug_apis


def test_own_profiler_started_while_the_doctor_profiles(
    doctor_run: DoctorRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "late.json"
    r = doctor_run("late_profiler.py", "--trace", str(own), steps=20)
    assert r.exit_code == 0, r.error
    assert r.aside and r.trace_files == (str(own),) and own.exists()
    assert "late profiler finished" in capsys.readouterr().out


def test_loaders_are_not_kept_alive_but_their_facts_are() -> None:
    import gc
    import weakref

    from torch.utils.data import DataLoader

    from torchpace.runner.sensors.inspector import Inspector

    inspector = Inspector()
    inspector.install()
    try:
        loader = DataLoader(list(range(10)), batch_size=2, pin_memory=False)
        ref = weakref.ref(loader)
        del loader
        gc.collect()
        assert ref() is None
        (facts,) = inspector.snapshot().loaders
    finally:
        inspector.restore()
    assert facts.batch_size == 2 and facts.created_at is not None
    assert facts.created_at.file.endswith("test_run.py")


def test_workers_of_an_iterator_left_in_a_global_get_their_stop_message(
    doctor_run: DoctorRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The collector frees the script's namespace (a cycle through its functions): it runs the
    # weakref callbacks first, so each index queue's finalizer queued its feeder's end before
    # the iterator's own shutdown queued the workers' stop message behind it, never sent: the
    # workers never got their stop message and torch waited 5 s per worker (20 s at the end of each run
    # of makemore, under the doctor and under --verify). The runner ends them first, through
    # the iterator's own shutdown, while its queues still deliver.
    from multiprocessing.queues import _sentinel  # type: ignore[attr-defined]

    from torch.utils.data import dataloader

    original = dataloader._MultiProcessingDataLoaderIter._shutdown_workers
    delivering: list[bool] = []

    def shutdown(it: object) -> None:
        if not getattr(it, "_shutdown", True):
            queues = getattr(it, "_index_queues", [])
            delivering.append(not any(_sentinel in q._buffer for q in queues))
        original(it)  # type: ignore[arg-type]

    monkeypatch.setattr(dataloader._MultiProcessingDataLoaderIter, "_shutdown_workers", shutdown)
    r = doctor_run("endless_iterator.py")
    assert r.stopped_early and r.exit_code == 0
    assert delivering == [True]


def test_an_installed_module_run_with_dash_m_is_the_users_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`torchpace doctor -m trl.scripts.sft`: the module lives in site-packages, and findings
    pointed at torchpace's launcher instead (a false grad-in-eval at the launcher's line)."""
    package = tmp_path / "site-packages" / "installedpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "evaluate.py").write_text((SCRIPTS / "grad_in_eval.py").read_text())
    monkeypatch.syspath_prepend(str(SCRIPTS))  # its _common helper
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    options = DoctorOptions(out_dir=tmp_path / "out", warmup=2, steps=3, window_after_s=0.0)
    r = run_target(Target("installedpkg.evaluate", module=True), options)
    assert r.exit_code == 0, r.error
    places = [g.location for g in r.inspection.model.grad_forwards if g.location is not None]
    assert places and all(p.file.endswith("installedpkg/evaluate.py") for p in places), places


def test_a_loop_with_no_signal_stops_once_a_bound_ends_its_window(doctor_run: DoctorRun) -> None:
    """With no step signal, the windows end on the clock: once a bound cut the profiled window
    nothing scheduled another, and the script ran on forever."""
    from torchpace.runner.profiling import ProfileBounds

    r = doctor_run(
        "forever_idle.py", window_after_s=0.3, window_s=1.0, steps=200, max_seconds=60.0,
        bounds=ProfileBounds(max_seconds=0.2),  # ends inside the first profiled window
    )  # fmt: skip
    assert r.step_source == "window" and r.stopped_early and not r.timed_out, r.notes
    assert any("0.2 s bound" in n for n in r.notes), r.notes


def test_data_preparation_before_the_first_step_is_not_cut_into_windows(
    doctor_run: DoctorRun,
) -> None:
    """Windows start only once a model runs: the sweep's DCGAN (imports under load) and any
    script that tokenises its data for minutes were profiled as time windows of their set-up."""
    r = doctor_run("slow_setup.py", window_after_s=0.3, window_s=0.1)
    assert r.step_source == "optimizer" and r.steps_recorded == 3, r.notes
