"""doctor --follow: the whole run's account and the findings that need the whole run.

Figures are the run's own: the account is checked against the wall time it measured itself, and
the findings for their presence and units, never for a speed."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpace.doctor.finding import Finding
from torchpace.doctor.registry import NotApplicable, get_rule
from torchpace.doctor.rules import loader_config
from torchpace.runner import autograd_cost, capture_reading, projection, slow_steps
from torchpace.runner.follow import Follow
from torchpace.runner.ledger import BINS, Ledger
from torchpace.runner.run import RunResult
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.whole_run import PHASES, AccountPhase, RunAccount

DoctorRun = Callable[..., RunResult]
WHOLE_RUN_RULES = ("grad-in-eval", "loader-config", "blocking-checkpoint")


def findings(rule: str, live: Inspection) -> list[Finding]:
    # No cut-off for savings too small to report: on a loaded machine the steps slow down and a
    # restart or a save can fall under 1% of a step; this test checks what was measured.
    kwargs = {"min_saving_share": 0.0} if rule == "blocking-checkpoint" else {}
    try:
        return get_rule(rule).func(live, **kwargs)
    except NotApplicable:
        return []


def adds_up(account: RunAccount) -> None:
    total = sum(p.seconds for p in account.phases)
    assert account.wall_s > 0
    assert abs(total - account.wall_s) <= 0.02 * account.wall_s, (total, account)
    assert all(p.seconds >= 0 for p in account.phases)
    assert [p.name for p in account.phases] == list(PHASES)


def test_whole_run_smell_gets_its_three_findings_with_costs_per_epoch(
    doctor_run: DoctorRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader_config, "MIN_SAVING_SHARE", 0.0)
    ran = doctor_run("whole_run.py", follow=True)
    assert ran.exit_code == 0, ran.error
    whole = ran.inspection.whole_run
    assert whole is not None and whole.epochs == 3
    # every optimizer step counted: the first boundary ends the first two (HF Trainer's 50 read 49)
    assert whole.steps == whole.account.steps == 3 * 256 // 16, whole.account
    adds_up(whole.account)
    assert whole.account.ended == "the script ran to its end"
    for phase in ("training", "evaluation", "checkpoint", "epoch-start"):
        assert whole.account.seconds(phase) > 0, phase
    (grad,) = findings("grad-in-eval", ran.inspection)
    assert grad.evidence["grad_passes"] == 3 and grad.evidence["grad_eval_ms_per_epoch"] > 0
    assert grad.locations[0].file.endswith("whole_run.py")
    assert grad.evidence["grad_forwards"] == 3 * 32  # 512 samples in batches of 16, 3 epochs
    for key in ("forward_ms_autograd", "forward_ms_no_grad"):  # one of the run's eval batches
        assert grad.evidence[key] > 0, key  # type: ignore[operator]
    assert grad.saving_ms is not None and "alternating pairs" in grad.saving_method
    assert whole.account.projection is None  # the script ran to its end
    restarts = [f for f in findings("loader-config", ran.inspection) if "every epoch" in f.summary]
    assert len(restarts) == 2  # the training and the validation loader
    assert all(f.evidence["restarts"] == 2 and f.evidence["epochs"] == 3 for f in restarts)
    assert all(f.evidence["restart_ms_per_epoch"] > 0 for f in restarts)  # type: ignore[operator]
    # A restart's first step is timed against its second where the doctor did no work of its
    # own meanwhile (after the window, no slow-step capture under way or due).
    assert all(len(g.first_step_extra_ms) <= 2 for g in ran.inspection.loaders)
    (save,) = findings("blocking-checkpoint", ran.inspection)
    assert save.evidence["saves"] == 3 and save.evidence["saves_per_epoch"] == 1
    assert save.evidence["checkpoint_ms_per_epoch"] > 0  # type: ignore[operator]
    assert save.evidence["bytes_per_save"] > 32 << 20  # type: ignore[operator]
    assert save.locations[0].file.endswith("whole_run.py")


def test_fixed_twin_is_clean(doctor_run: DoctorRun, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader_config, "MIN_SAVING_SHARE", 0.0)
    ran = doctor_run("whole_run_fixed.py", follow=True)
    assert ran.exit_code == 0, ran.error
    whole = ran.inspection.whole_run
    assert whole is not None and whole.evaluation is not None
    assert whole.evaluation.passes == 3 and whole.evaluation.grad_passes == 0
    assert whole.checkpoints is None  # saved from a background thread: no step waits
    adds_up(whole.account)
    assert findings("blocking-checkpoint", ran.inspection) == []
    assert not [f for f in findings("loader-config", ran.inspection) if "every epoch" in f.summary]
    assert not [f for f in findings("grad-in-eval", ran.inspection) if "grad_passes" in f.evidence]


def test_epochs_stops_as_the_next_epoch_starts_with_each_epochs_eval_and_save_in(
    doctor_run: DoctorRun,
) -> None:
    # Each epoch's evaluation and torch.save follow its training loader's last batch: --epochs 2
    # stops at the third epoch's iter(train), so both epochs' passes and saves are counted.
    ran = doctor_run("whole_run.py", follow=True, epochs=2)
    assert ran.exit_code == 0, ran.error
    whole = ran.inspection.whole_run
    assert whole is not None and whole.epochs == 2
    assert whole.account.ended == "stopped after epoch 2 (--epochs)"
    assert whole.evaluation is not None and whole.evaluation.passes == 2
    assert whole.evaluation.grad_passes == 2
    assert whole.checkpoints is not None and whole.checkpoints.saves == 2
    train = next(f for f in ran.inspection.loaders if f.created_at and f.created_at.line == 16)
    assert train.epochs_started == 2  # stopped before the third epoch's workers started
    assert not ran.stopped_early
    adds_up(whole.account)
    projected = whole.account.projection  # EPOCHS = 3 in the script
    assert projected is not None and projected.epochs == 3, projected
    assert "EPOCHS = 3" in projected.method and projected.epoch_s > 0
    fixed = whole.account.seconds("start-up") + whole.account.seconds("tear-down")
    assert projected.wall_s == pytest.approx(fixed + 3 * projected.epoch_s)


def test_a_killed_run_still_has_its_account(doctor_run: DoctorRun) -> None:
    ran = doctor_run("sigterm_self.py", follow=True)
    assert ran.terminated
    whole = ran.inspection.whole_run
    assert whole is not None and whole.account.ended == "stopped by SIGTERM"
    adds_up(whole.account)


def test_a_timed_out_run_still_has_its_account(doctor_run: DoctorRun) -> None:
    ran = doctor_run("forever.py", follow=True, max_seconds=4.0)
    assert ran.timed_out
    whole = ran.inspection.whole_run
    assert whole is not None and whole.account.ended == "stopped at --max-seconds 4"
    adds_up(whole.account)


def test_unfollowed_runs_have_no_account(doctor_run: DoctorRun) -> None:
    assert doctor_run("whole_run.py", "--epochs", "1").inspection.whole_run is None


def test_the_ledger_counts_nested_and_overlapping_activities_once() -> None:
    ledger = Ledger(0.0)
    ledger.first_signal(1.0)  # start-up: 1 s
    ledger.enter("evaluation", 2.0)
    ledger.enter("checkpoint", 3.0)  # inside the evaluation: counted as checkpoint
    ledger.enter("epoch-start", 3.5)  # overlaps the save: the save owns it
    ledger.leave("checkpoint", 4.0)
    ledger.leave("epoch-start", 4.5)
    ledger.leave("evaluation", 5.0)
    ledger.credit("gc", "training", 0.25)  # a pause judged after it ended
    step, inside = ledger.boundary(6.0)
    assert step == pytest.approx(2.0 - 0.25)  # the step's training time
    assert inside == pytest.approx(
        {"evaluation": 1.5, "checkpoint": 1.0, "epoch-start": 0.5, "gc": 0.25}
    )
    ledger.enter("torchpace", 6.5)
    ledger.leave("torchpace", 7.0)
    totals = ledger.close(8.0)  # training after the last step is tear-down
    assert totals["start-up"] == 1.0
    assert totals["evaluation"] == pytest.approx(1.5)
    assert totals["checkpoint"] == pytest.approx(1.0)
    assert totals["epoch-start"] == pytest.approx(0.5)
    assert totals["training"] == pytest.approx(1.75)
    assert totals["gc"] == pytest.approx(0.25)
    assert totals["torchpace"] == pytest.approx(0.5)
    assert totals["tear-down"] == pytest.approx(1.5)
    assert sum(totals.values()) == pytest.approx(8.0)
    timeline = ledger.timeline()  # the same seconds, bin by bin
    for i, phase in enumerate(PHASES):
        assert sum(b[i] for b in timeline.bins) == pytest.approx(totals[phase]), phase
    assert len(timeline.bins) * timeline.bin_s >= 8.0


def test_an_unexplained_excess_leaves_the_next_steps_time_whole() -> None:
    ledger = Ledger(0.0)
    ledger.first_signal(0.0)
    ledger.boundary(1.0)  # a slow step of 1 s...
    ledger.credit("unexplained", "training", 0.9, ended=True)  # ...judged once it ended
    step, _ = ledger.boundary(1.1)
    assert step == pytest.approx(0.1)  # was -0.8: the next step paid the excess back
    totals = ledger.close(1.1)
    assert totals["training"] == pytest.approx(0.2) and totals["unexplained"] == pytest.approx(0.9)


def test_an_epochs_first_step_beside_restarted_workers_is_the_epochs_start() -> None:
    """ignite's CIFAR-10 example: each epoch's first step took 560-830 ms against 115-185 ms, its
    batch's wait 60-130 ms of it; read as 'the training work itself', 4.7 s 'unexplained' of a
    102 s run, and captured to no avail. The step is the epoch's start; so is the extra time the
    loader sensor measures on it afterwards."""
    from torchpace.runner.slow_steps import RESTARTED, UNEXPLAINED, SlowSteps

    slow = SlowSteps(None, contextlib.nullcontext)
    inside = {"epoch-start": 0.07}
    assert not slow.judge(32, 9.7, 0.56, inside, 0.11, RESTARTED)  # explained: no capture
    assert slow.judge(33, 9.8, 0.56, inside, 0.11)  # the same step without a restart
    first, second = sorted(slow.kept(), key=lambda s: s.step)
    assert first.cause == RESTARTED and "epoch-start 70 ms" in first.evidence
    assert second.cause == UNEXPLAINED
    ledger = Ledger(0.0)
    ledger.first_signal(0.0)
    ledger.boundary(1.0)
    ledger.credit("epoch-start", "training", 0.4, ended=True, counted=False)
    step, inside = ledger.boundary(1.5)
    assert step == pytest.approx(0.5) and inside == {}  # the next step keeps its own time
    totals = ledger.close(1.5)
    assert totals["epoch-start"] == pytest.approx(0.4) and totals["training"] == pytest.approx(1.1)
    assert ledger.counts["epoch-start"] == 0  # counted where it began (iter(loader))


def test_only_workers_started_again_make_an_epochs_first_step_its_start() -> None:
    from types import SimpleNamespace

    from torchpace.runner.slow_steps import RESTARTED

    for persistent, epochs, cause in ((False, 2, RESTARTED), (True, 2, ""), (False, 1, "")):
        follow, it = Follow(None), object()
        static = SimpleNamespace(num_workers=2, persistent_workers=persistent)
        record = SimpleNamespace(static=static, first_batch_s=[0.1] * epochs)
        follow.iter_started(it, time.perf_counter())
        follow.first_batch(it, record)
        assert follow._restarted == cause, (persistent, epochs)


def test_an_epoch_left_early_ends_at_the_training_loaders_next_iter() -> None:
    from types import SimpleNamespace

    from torchpace.runner.follow import Follow

    class Stopped(Exception):
        pass

    def stop() -> None:
        raise Stopped

    follow = Follow(None)
    follow.epoch_limit, follow.on_limit = 2, stop
    train = SimpleNamespace(static=SimpleNamespace(batches_per_epoch=100))
    started = 0
    with pytest.raises(Stopped):
        for _ in range(3):
            follow.next_epoch(train)  # iter(loader): the third one stops the script
            started += 1
            for _ in range(5):  # 5 of its 100 batches (a break, Lightning's limit_train_batches)
                follow.batch(train)
                follow.optimizer_step()
    assert started == 2 and follow.epochs == 2


def test_steps_that_are_batches_are_counted_to_the_end(doctor_run: DoctorRun) -> None:
    # No optimizer: every batch ends a step, also once the session has settled (after its
    # window only an optimizer-step run may leave batches out of the step count).
    ran = doctor_run("eval_no_optimizer.py", follow=True)
    assert ran.exit_code == 0, ran.error
    whole = ran.inspection.whole_run
    # 40 batches: 28 steps counted (as before the change), the window over after the first 8
    assert whole is not None and whole.steps >= 20, whole.account
    adds_up(whole.account)


def test_an_optimizer_that_trains_after_another_stopped_counts_its_steps(
    doctor_run: DoctorRun,
) -> None:
    # 2 layers x 30 steps, each layer its own optimizer: the first optimizer's steps ended the
    # iterations for good, and the second's 30 went to tear-down; then the takeover's boundary
    # ended two steps counted as one (the forward-forward example: 199 of 200).
    ran = doctor_run("layerwise.py", follow=True)
    assert ran.exit_code == 0, ran.error
    whole = ran.inspection.whole_run
    assert whole is not None and whole.steps == 60, whole.account
    adds_up(whole.account)


def test_torch_compile_compiling_is_its_own_phase(doctor_run: DoctorRun) -> None:
    import torch

    torch._dynamo.reset()  # a compile cached by another test would not compile again
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ran = doctor_run("compiled.py", follow=True)
    assert ran.exit_code == 0, ran.error
    # the model is found when torch.compile returns it: no global hook for torch to warn of
    assert not [w for w in seen if "global hooks" in str(w.message)]
    whole = ran.inspection.whole_run
    assert whole is not None
    adds_up(whole.account)
    (phase,) = (p for p in whole.account.phases if p.name == "compile")
    assert phase.seconds > 0 and phase.count >= 1, whole.account  # the first compile, step 1


def test_a_compile_inside_an_evaluation_pass_is_counted_as_compile() -> None:
    ledger = Ledger(0.0)
    ledger.first_signal(0.0)
    ledger.enter("evaluation", 1.0)
    ledger.enter("compile", 1.5)  # eval mode's forward compiles its own graph
    ledger.leave("compile", 3.5)
    ledger.leave("evaluation", 4.0)
    totals = ledger.close(4.0)
    assert totals["compile"] == pytest.approx(2.0) and totals["evaluation"] == pytest.approx(1.0)
    assert ledger.counts["compile"] == 1


@contextlib.contextmanager
def mode_patch(follow: Follow) -> Iterator[None]:
    """What Follow.install patches for the model's mode (Module.train), undone after."""
    import torch

    from torchpace.runner.patching import Patcher

    patcher = Patcher()
    patcher.wrap(torch.nn.Module, "train", follow._wrap_train)
    try:
        yield
    finally:
        patcher.restore()


def train_step(
    follow: Follow, model: Any, x: Any, loader: Any, phase: str, pause: float = 0
) -> None:
    """What the hooks tell Follow of one training step: a batch (none when `loader` is None: a
    script that slices its own batches), a backward, an optimizer step, the boundary (`pause`
    seconds of training before it)."""
    import time

    follow.signal()
    if loader is not None:
        follow.batch(loader)
    model(x).sum().backward()
    follow.training_signal()
    follow.optimizer_step()
    time.sleep(pause)
    follow.boundary(phase)


@contextlib.contextmanager
def watching() -> Iterator[tuple[Follow, Any, Any, Any]]:
    """A Follow that has found its model (Module.train patched meanwhile): the follow, the
    model, an input and a training loader's record."""
    from types import SimpleNamespace

    import torch

    follow = Follow(None)
    model, x = torch.nn.Linear(2, 2), torch.zeros(1, 2)
    train = SimpleNamespace(static=SimpleNamespace(batches_per_epoch=50))
    with mode_patch(follow):
        follow._first_module(model, ())
        yield follow, model, x, train


@contextlib.contextmanager
def evaluating_after_training() -> Iterator[tuple[Follow, Any, Any]]:
    """A Follow whose model took 3 training steps, then went to eval mode under no_grad: the
    follow, the model and an input."""
    import torch

    with watching() as (follow, model, x, train):
        for _ in range(3):
            train_step(follow, model, x, train, "done")
        model.eval()
        with torch.no_grad():
            yield follow, model, x


def test_the_models_forwards_are_hooked_in_eval_mode_only() -> None:
    # A hooked module takes torch's slower call path: training forwards go unhooked.
    import torch

    from torchpace.runner.follow import Follow

    follow = Follow(None)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with mode_patch(follow):
        follow._first_module(model, ())
        assert not model._forward_pre_hooks
        model.eval()
        assert len(model._forward_pre_hooks) == 1
        model[0].train()  # a submodule's mode is not the model's
        assert len(model._forward_pre_hooks) == 1
        model.train()
        assert not model._forward_pre_hooks
        compiled = torch.compile(model)  # its wrapper found first: the model's eval() counts
        other = Follow(None)
        with mode_patch(other):
            other._first_module(compiled, ())
            model.eval()
            assert len(compiled._forward_pre_hooks) == 1
            other.uninstall()
    follow.uninstall()


def test_an_evaluation_before_the_first_optimizer_step_is_evaluation() -> None:
    # Lightning's sanity check: validation batches, the model in eval mode, before fit's first
    # training batch. They were counted as the first training step.
    import time
    from types import SimpleNamespace

    import torch

    from torchpace.runner.follow import Follow

    follow = Follow(None)
    model = torch.nn.Linear(2, 2)
    val, train = (SimpleNamespace(static=SimpleNamespace(batches_per_epoch=n)) for n in (4, 100))
    x = torch.zeros(1, 2)
    with mode_patch(follow):
        follow._first_module(model, ())  # the model's forwards are watched in eval mode
        model.eval()
        with torch.no_grad():
            for _ in range(2):
                follow.signal()
                follow.batch(val)
                model(x)
                time.sleep(0.02)  # the pass lasts at least 40 ms
        model.train()
        for _ in range(3):
            train_step(follow, model, x, train, "warmup")
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert whole.evaluation is not None and whole.evaluation.passes == 1
    assert whole.evaluation.grad_passes == 0
    assert whole.account.seconds("evaluation") >= 0.04
    assert follow.train is train and follow.clock.batches == 4  # 1 sanity batch: known late


def test_a_model_that_trains_in_eval_mode_is_training_not_evaluation() -> None:
    # A frozen BatchNorm: the script keeps the model in eval mode and trains it. Its forwards
    # were each counted as an evaluation pass with autograd on.
    from types import SimpleNamespace

    import torch

    follow = Follow(None)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    train, val = (SimpleNamespace(static=SimpleNamespace(batches_per_epoch=n)) for n in (100, 4))
    x = torch.randn(4, 2)
    with mode_patch(follow):
        follow._first_module(model, ())
        model.eval()  # for good
        for _ in range(4):
            train_step(follow, model, x, train, "done", pause=0.005)
        with torch.no_grad():  # a real evaluation, from another loader, is still one
            follow.batch(val)
            model(x)
        follow.batch(train)
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert follow.trains_in_eval
    assert whole.evaluation is not None and whole.evaluation.passes == 1
    assert whole.evaluation.grad_passes == 0
    assert whole.account.seconds("training") >= 0.015  # the steps' time stays training
    adds_up(whole.account)


def test_an_evaluation_without_a_loader_ends_as_the_model_trains_again() -> None:
    # nanoGPT's estimate_loss: model.eval(), forwards under no_grad on batches it slices from a
    # memmap itself (no DataLoader), model.train(). The next step's backward read the open pass
    # as a model trained in eval mode: the first evaluation was undone, every later one counted
    # as training (nanoGPT under --follow: 3 evaluations as "unexplained" slow steps).
    import time

    import torch

    follow = Follow(None)
    model = torch.nn.Linear(2, 2)
    x = torch.randn(4, 2)
    with mode_patch(follow):
        follow._first_module(model, ())
        for step in range(12):
            if step % 4 == 3:
                model.eval()
                with torch.no_grad():
                    for _ in range(3):
                        model(x)
                time.sleep(0.005)
                model.train()
            train_step(follow, model, x, None, "done")
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert not follow.trains_in_eval
    assert whole.evaluation is not None and whole.evaluation.passes == 3
    assert whole.evaluation.grad_passes == 0
    assert whole.account.seconds("evaluation") >= 0.015
    adds_up(whole.account)


def test_an_evaluation_over_the_training_loader_is_evaluation() -> None:
    # PyG's examples test on train_loader every epoch, the model in eval mode: each of its
    # batches closed the pass its forward opened (48 passes over 3 epochs of mutag_gin.py), and
    # its end counted as a training epoch.
    from types import SimpleNamespace

    import torch

    follow = Follow(None)
    model = torch.nn.Linear(2, 2)
    train, test = (SimpleNamespace(static=SimpleNamespace(batches_per_epoch=n)) for n in (4, 2))
    stops: list[tuple[int, bool]] = []  # (epochs ended, in training mode) at each stop asked
    follow.epoch_limit, follow.on_limit = 2, lambda: stops.append((follow.epochs, model.training))
    x = torch.zeros(1, 2)
    with mode_patch(follow):
        follow._first_module(model, ())
        for _ in range(3):  # epochs: train, then test(train_loader), then test(test_loader)
            model.train()
            follow.next_epoch(train)
            for _ in range(4):
                train_step(follow, model, x, train, "done")
            follow.exhausted(train, object())
            model.eval()
            with torch.no_grad():
                for loader, n in ((train, 4), (test, 2)):
                    follow.next_epoch(loader)
                    for _ in range(n):
                        follow.batch(loader)
                        model(x)
                    follow.exhausted(loader, object())
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert whole.evaluation is not None and whole.evaluation.passes == 6
    assert follow.epochs == 3 and follow.clock.ended == 3
    # --epochs 2: from the third training epoch's iter() on (this stop does not raise), never
    # at the iter() of the evaluation over the training data that follows the second
    assert stops and stops[0] == (2, True) and all(training for _, training in stops)
    adds_up(whole.account)


def test_an_evaluator_that_takes_its_first_batch_before_model_eval_ends_no_epoch() -> None:
    """ignite's evaluator over the training loader (mnist_save_resume_engine.py): its first batch
    comes with the model still in training mode, model.eval() and the forward follow; the pass
    was opened by that forward, and its end counted an epoch (5 of 3)."""
    from types import SimpleNamespace

    import torch

    follow = Follow(None)
    model = torch.nn.Linear(2, 2)
    train, val = (SimpleNamespace(static=SimpleNamespace(batches_per_epoch=n)) for n in (4, 2))
    x = torch.zeros(1, 2)
    with mode_patch(follow):
        follow._first_module(model, ())
        for _ in range(3):
            model.train()
            follow.next_epoch(train)
            for _ in range(4):
                train_step(follow, model, x, train, "done")
            follow.exhausted(train, object())
            for loader, n in ((train, 4), (val, 2)):  # the evaluator, on each loader
                follow.next_epoch(loader)
                for _ in range(n):
                    follow.batch(loader)  # ignite: the batch first, then model.eval()
                    model.eval()
                    with torch.no_grad():
                        model(x)
                follow.exhausted(loader, object())
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert follow.epochs == 3 and whole.evaluation is not None and whole.evaluation.passes == 6
    adds_up(whole.account)


def test_an_evaluation_over_the_training_loader_left_at_its_length_is_no_epoch() -> None:
    """ignite's mnist.py: its engines stop each pass at the loader's length, so no iterator is
    ever exhausted; after the one training epoch, the evaluator's iter() of the training loader
    ends it, and its first batch, read before model.eval(), left that loader's epoch open: the
    script's end then counted a second epoch (1 epoch read as 2)."""
    import torch

    with watching() as (follow, model, x, train):
        follow.next_epoch(train)
        for _ in range(4):
            train_step(follow, model, x, train, "done")
        follow.next_epoch(train)  # the evaluator over the training data
        for _ in range(4):
            follow.batch(train)  # ignite: the batch first, then model.eval()
            model.eval()
            with torch.no_grad():
                model(x)
        model.train()
    follow.uninstall()
    whole = follow.facts("the script ran to its end")
    assert whole.epochs == 1 and whole.steps == 4, whole
    assert whole.evaluation is not None and whole.evaluation.passes == 1


def test_an_epoch_left_early_then_the_end_is_an_epoch() -> None:
    """Lightning's autoencoder with limit_train_batches and 2 epochs: no StopIteration, and no
    iter() after the last epoch: 2 epochs read as 1."""

    def epochs(ended: str) -> int:
        with watching() as (follow, model, x, train):
            for _epoch in range(2):
                follow.next_epoch(train)  # iter(): the epoch before it, left early, ends here
                for _ in range(3):
                    train_step(follow, model, x, train, "done")
        follow.uninstall()
        return follow.facts(ended).epochs

    assert epochs("the script ran to its end") == 2
    assert epochs("stopped at --max-seconds 5") == 1  # cut short: not a whole epoch


def test_hf_trainers_evaluations_count_once_each() -> None:
    """HF Trainer under accelerate: its eval loader reads one batch ahead, so the last eval batch
    runs after the loader's end; and the next training batch is read before training_step's
    model.train(). 5 evaluations counted 10, then 9."""
    from types import SimpleNamespace

    import torch

    with watching() as (follow, model, x, train):
        follow.next_epoch(train)
        for step in range(1, 21):
            if step > 1:
                follow.batch(train)  # get_batch_samples: read before model.train()
            model.train()
            follow.signal()
            if step == 1:
                follow.batch(train)
            model(x).sum().backward()
            follow.training_signal()
            follow.optimizer_step()
            follow.boundary("done")
            if step % 5 == 0:  # evaluate(): a new loader each time, read one batch ahead
                model.eval()
                val = SimpleNamespace(static=SimpleNamespace(batches_per_epoch=4))
                follow.next_epoch(val)
                with torch.no_grad():
                    for k in range(4):
                        follow.batch(val)
                        if k == 3:
                            follow.exhausted(val, object())  # before the last batch's forward
                        model(x)
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert whole.evaluation is not None and whole.evaluation.passes == 4, whole.account
    (phase,) = (p for p in whole.account.phases if p.name == "evaluation")
    assert phase.count == 4, whole.account  # the account's table counts the same passes
    adds_up(whole.account)


def test_passes_left_before_their_loaders_end_count_one_each() -> None:
    """Lightning's limit_val_batches leaves the last validation before its loader's end; test
    and predict then read their loaders in eval mode: 3 passes counted as 1. Two loaders read
    side by side (their first batches before any forward) stay one pass."""
    from types import SimpleNamespace

    with evaluating_after_training() as (follow, model, x):
        for name in ("validation", "test", "predict"):
            loader = SimpleNamespace(static=SimpleNamespace(batches_per_epoch=4), name=name)
            it = object()
            follow.iter_started(it, time.perf_counter())
            for k in range(2):  # left after 2 of its 4 batches
                follow.batch(loader)
                if k == 0:
                    follow.first_batch(it)
                model(x)
        a, b = (SimpleNamespace(static=SimpleNamespace(batches_per_epoch=4)) for _ in "ab")
        its = object(), object()
        for it in its:
            follow.iter_started(it, time.perf_counter())
        for k in range(3):  # zip(a, b)
            for loader, it in zip((a, b), its, strict=True):
                follow.batch(loader)
                if k == 0:
                    follow.first_batch(it)
            model(x)
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert whole.evaluation is not None and whole.evaluation.passes == 4, whole.account
    adds_up(whole.account)


@pytest.mark.parametrize("read_ahead", [False, True])
def test_the_last_pass_ends_at_its_work_not_at_the_scripts_end(read_ahead: bool) -> None:
    """Nothing closes a pass after HF Trainer's final evaluation or Lightning's predict but the
    script's end: a save_model after it read as evaluation. With accelerate's read-ahead the
    open pass is the one-forward continuation after the loader's end."""
    from types import SimpleNamespace

    val = SimpleNamespace(static=SimpleNamespace(batches_per_epoch=50))
    with evaluating_after_training() as (follow, model, x):
        for k in range(3):
            follow.batch(val)
            if read_ahead and k == 2:
                follow.exhausted(val, object())  # before the last batch's forward
            model(x)
            time.sleep(0.01)
    time.sleep(1.0)  # the save after it
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    seconds = {p.name: p.seconds for p in whole.account.phases}
    assert seconds["evaluation"] < 0.5 <= seconds["tear-down"], whole.account
    assert whole.evaluation is not None and whole.evaluation.seconds < 0.5
    adds_up(whole.account)


def test_a_new_loader_trained_on_takes_over_from_the_training_loader() -> None:
    """Lightning's k-fold example: a new model and new loaders for each fold, the last fold's
    model left in eval mode; each fold's steps never outvoted the first fold's, and read as
    evaluation passes (309 passes, 64% of the run)."""
    from types import SimpleNamespace

    import torch

    follow = Follow(None)
    first = torch.nn.Linear(2, 2)
    x = torch.zeros(1, 2)
    folds = [
        tuple(SimpleNamespace(static=SimpleNamespace(batches_per_epoch=n)) for n in (6, 2))
        for _ in range(3)
    ]
    with mode_patch(follow):
        follow._first_module(first, ())
        for k, (train, val) in enumerate(folds):
            model = first if k == 0 else torch.nn.Linear(2, 2)
            model.train()
            follow.next_epoch(train)
            for _ in range(6):
                train_step(follow, model, x, train, "done")
            follow.exhausted(train, object())
            model.eval()
            follow.next_epoch(val)
            with torch.no_grad():
                for _ in range(2):
                    follow.batch(val)
                    model(x)
            follow.exhausted(val, object())
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert follow.train is folds[-1][0]
    assert whole.evaluation is not None and whole.evaluation.passes == 3
    adds_up(whole.account)


def test_a_model_probed_before_any_batch_is_no_evaluation() -> None:
    import torch

    from torchpace.runner.follow import Follow

    follow = Follow(None)
    model = torch.nn.Linear(2, 2)
    with mode_patch(follow):
        follow._first_module(model, ())
        model.eval()
        model(torch.zeros(1, 2))  # a shape probe at start-up, no DataLoader yet
        model.train()
    follow.uninstall()
    assert follow.eval_pass is None and follow._eval_totals["passes"] == 0
    assert follow.ledger.counts.get("evaluation", 0) == 0


def test_an_evaluation_before_the_first_step_with_no_loader_is_one() -> None:
    """nanoGPT's estimate_loss at iteration 0: model.eval(), 40 forwards of batches it slices
    itself, model.train(), then the first step; it read as start-up."""
    import time

    import torch

    follow = Follow(None)
    model, x = torch.nn.Linear(2, 2), torch.zeros(1, 2)
    with mode_patch(follow):
        follow._first_module(model, ())
        model.eval()
        with torch.no_grad():
            for _ in range(4):
                model(x)
                time.sleep(0.01)
        model.train()
        for _ in range(3):
            train_step(follow, model, x, None, "done")
    whole = follow.facts("the script ran to its end")
    follow.uninstall()
    assert whole.evaluation is not None and whole.evaluation.passes == 1
    assert whole.account.seconds("evaluation") >= 0.04, whole.account
    adds_up(whole.account)


def test_a_module_without_parameters_called_first_is_not_the_model() -> None:
    """torchvision's Normalize is a module: called as the first batch was read in the main
    process, it was taken for the model, and ignite's evaluations went unseen."""
    import torch
    from torch.nn.modules.module import register_module_forward_pre_hook

    follow = Follow(None)
    model, x = torch.nn.Linear(2, 2), torch.zeros(1, 2)
    follow._root_hook = register_module_forward_pre_hook(follow._first_module)  # as install()
    with mode_patch(follow):
        torch.nn.Identity()(x)  # a transform, as the first batch is read
        torch.nn.MSELoss()(x, x)  # a loss
        model(x)
        model.eval()
    follow.uninstall()
    assert follow.module == "Linear" and follow.model_eval


@pytest.mark.slow
def test_lightnings_sanity_check_is_an_evaluation_pass(doctor_run: DoctorRun) -> None:
    pytest.importorskip("lightning")
    ran = doctor_run("lightning_sanity.py", follow=True)
    assert ran.exit_code == 0, ran.error
    whole = ran.inspection.whole_run
    assert whole is not None and whole.evaluation is not None
    assert whole.evaluation.passes == 3, whole.account  # the sanity check and each epoch's end
    adds_up(whole.account)


_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(
            ["boundary", "boundary", "boundary", "enter", "leave", "gc", "slow", "undo"]
        ),
        st.sampled_from(["evaluation", "checkpoint", "epoch-start", "torchpace"]),
        st.floats(0.001, 0.5),
    ),
    max_size=60,
)


def _drive(ledger: Ledger, events: list[tuple[str, str, float]], eager: bool) -> list[Any]:
    """Run `events` on a ledger (eager: its totals brought up to each boundary first, as before
    typical steps were left unflushed); what each call returned, then the account."""
    now, seen, opened = 0.0, [], []
    ledger.first_signal(0.0)
    for kind, phase, dt in events:
        began, now = now, now + dt
        if kind == "boundary":
            if eager:
                ledger._flush(now)
            step, inside = ledger.boundary(now)
            seen += [step, *sorted(inside.items())]
        elif kind == "enter":
            ledger.enter(phase, now)
            opened.append((phase, now))
        elif kind == "leave" and opened:
            ledger.leave(opened.pop()[0], now)
        elif kind == "undo" and opened:
            phase, since = opened.pop()
            ledger.undo(phase, since, now)
        elif kind == "gc":
            ledger.credit("gc", ledger.top(), (now - began) / 2)
        elif kind == "slow":
            ledger.credit("unexplained", "training", dt / 4, ended=True)
    totals = ledger.close(now + 1.0)
    return [seen, totals, ledger.timeline(), dict(ledger.counts)]


@given(_EVENTS)
@settings(max_examples=200, deadline=None)
def test_a_typical_step_left_unflushed_changes_no_figure(events: list[Any]) -> None:
    # Ledger.boundary leaves a step of training alone out of the totals and the timeline until
    # the next flush: every step's time, every total and every bin are as if flushed each step.
    lazy, eager = _drive(Ledger(0.0), events, False), _drive(Ledger(0.0), events, True)
    for a, b in zip(lazy[0], eager[0], strict=True):  # each step's time, what was inside it
        assert _close(a, b), (a, b)
    assert lazy[1] == pytest.approx(eager[1], abs=1e-9) and lazy[3] == eager[3]
    assert lazy[2].bin_s == eager[2].bin_s and len(lazy[2].bins) == len(eager[2].bins)
    for a, b in zip(lazy[2].bins, eager[2].bins, strict=True):
        assert a == pytest.approx(b, abs=1e-9)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return a[0] == b[0] and a[1] == pytest.approx(b[1], abs=1e-9)
    return bool(a == pytest.approx(b, abs=1e-9))


def test_the_timeline_stays_bounded_over_a_long_run() -> None:
    ledger = Ledger(0.0)
    ledger.first_signal(0.5)
    for k in range(1, 20_001):
        ledger.boundary(0.5 + k * 0.01)  # 200 s of 10 ms steps
    totals = ledger.close(201.0)
    timeline = ledger.timeline()
    assert len(timeline.bins) <= BINS
    assert sum(map(sum, timeline.bins)) == pytest.approx(201.0)
    assert sum(b[PHASES.index("training")] for b in timeline.bins) == pytest.approx(
        totals["training"]
    )


def test_epochs_without_follow_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from torchpace.cli.main import main

    assert main(["doctor", "--epochs", "1", "train.py"]) == 2
    assert "--follow" in capsys.readouterr().err


def test_slow_steps_are_captured_and_their_cause_read(
    doctor_run: DoctorRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1 s stalls; a loaded machine slows steps of 1 ms to 300 ms at times: those are left out.
    monkeypatch.setattr(slow_steps, "MIN_EXCESS_S", 0.6)
    ran = doctor_run("slow_logger.py", follow=True)
    assert ran.exit_code == 0, ran.error
    run = ran.inspection.whole_run.account  # type: ignore[union-attr]
    adds_up(run)
    stalls = [s for s in run.slow_steps if s.ms >= 1000]
    assert len(stalls) >= 4, run.slow_steps  # 6; the first before the median is known
    assert {b.step - a.step for a, b in itertools.pairwise(stalls)} == {10}
    assert all(s.cause == slow_steps.UNEXPLAINED or s.trace for s in stalls)
    captured = [s for s in stalls if s.trace]
    assert 1 <= len(captured) <= slow_steps.MAX_CAPTURES, run.slow_steps
    for s in captured:
        assert os.path.exists(s.trace) and s.evidence.startswith("profiled:")
        assert s.cause == capture_reading.PHASE_CAUSE["other"], s
    excess_s = sum(s.ms - s.median_ms for s in stalls) / 1000.0  # the median grows with the load
    assert run.seconds("unexplained") >= 0.99 * excess_s


def test_slow_steps_explained_by_activities_need_no_capture(doctor_run: DoctorRun) -> None:
    ran = doctor_run("whole_run.py", follow=True)
    run = ran.inspection.whole_run.account  # type: ignore[union-attr]
    # Each epoch's end: its evaluation, its save and the next epoch's start (each ~60 ms, the
    # largest names the cause: evaluation or the start, by the machine's moment).
    # The next epoch's workers start there too: its own excess may outweigh the activities.
    explained = (*slow_steps.ACTIVITY.values(), slow_steps.RESTARTED)
    ends = [s for s in run.slow_steps if "evaluation" in s.evidence]
    assert ends and all(s.cause in explained for s in ends), run.slow_steps
    assert not any(s.trace for s in run.slow_steps if s.cause in explained)


def test_steps_whose_work_grew_are_slow_only_until_their_neighbours_catch_up() -> None:
    # ignite's actor-critic trains once an episode, and its episodes grow from 10 to 2,285 env
    # steps: against the run's median alone every later step was slow (72% of the run read
    # "unexplained"). A step is slow against its last RECENT neighbours too.
    from torchpace.runner.follow import RECENT

    follow, now = Follow(None), 0.0
    for _ in range(40):
        follow._ended(0.010, {}, now, "done")
    slow = []
    for _ in range(40):  # five times the work from here on, for good
        seen = follow.slow.seen
        follow._ended(0.050, {}, now, "done")
        slow.append(follow.slow.seen > seen)
    assert any(slow) and not any(slow[RECENT // 2 + 1 :])
    follow._ended(1.0, {}, now, "done")  # a stall among them still is one
    assert follow.slow.seen == sum(slow) + 1


def test_the_next_slow_step_is_predicted_from_the_gap_that_recurs(tmp_path: Path) -> None:
    slow = slow_steps.SlowSteps(tmp_path, contextlib.nullcontext)
    assert slow.judge(30, 1.0, 0.5, {}, 0.01)  # unexplained: 50x the median
    assert slow.next_step == 60  # one seen: its distance from the start
    for step in (60, 63, 90):  # 63: a step slowed by load between two periodic ones
        slow.judge(step, 1.0, 0.5, {}, 0.01)
    assert slow.next_step == 120
    assert not slow.judge(91, 1.0, 0.5, {"evaluation": 0.45}, 0.01)  # the hooks explain it
    assert not slow.judge(92, 1.0, 0.02, {}, 0.01)  # 2x: not slow
    assert slow.seen == 5 and [s.step for s in slow.kept()] == [30, 60, 63, 90, 91]
    assert slow.kept()[-1].cause == slow_steps.ACTIVITY["evaluation"]
    # No capture can start (its budget spent, or nowhere to write one): none is due, so the
    # typical steps after it take the short path (Follow.settled_step).
    slow.next_step, slow.tries = None, slow_steps.MAX_CAPTURES
    slow.judge(150, 1.0, 0.5, {}, 0.01)
    assert slow.next_step is None
    nowhere = slow_steps.SlowSteps(None, contextlib.nullcontext)
    nowhere.judge(30, 1.0, 0.5, {}, 0.01)
    assert nowhere.next_step is None and nowhere.seen == 1


def test_slow_steps_kept_are_bounded_to_the_slowest() -> None:
    slow = slow_steps.SlowSteps(None, contextlib.nullcontext)
    for step in range(1, 1001):
        slow.judge(step, float(step), 0.1 + step / 1e4, {}, 0.01)
    assert slow.seen == 1000
    assert [s.step for s in slow.kept()] == list(range(1001 - slow_steps.MAX_KEPT, 1001))


def test_the_scripts_epoch_count_is_read_from_its_own_variables() -> None:
    from types import SimpleNamespace

    def train_one_epoch(args: object) -> tuple[int, str] | None:
        return projection.script_epochs()

    found = train_one_epoch(SimpleNamespace(epochs=90, lr=0.1))
    assert found is not None and found[0] == 90 and "args.epochs = 90" in found[1]

    def loop(max_epochs: int) -> tuple[int, str] | None:
        return projection.script_epochs()

    at = loop(7)
    assert at is not None and at[0] == 7 and "max_epochs = 7 in loop()" in at[1]


def test_the_projection_takes_the_last_whole_epoch() -> None:
    clock = projection.EpochClock(first_step=1.0, length=10, script_epochs=(10, "EPOCHS = 10"))
    clock.epoch_ended(11.0, 10)
    clock.epoch_ended(19.0, 10)  # the second epoch: 8 s, end to end
    phases = (AccountPhase("start-up", 1.0), AccountPhase("tear-down", 0.5))
    run = RunAccount(wall_s=20.0, phases=phases, steps=21, epochs=2)
    projected = clock.project(run, 20.0)
    assert projected is not None and projected.epoch_s == pytest.approx(8.0)
    assert projected.wall_s == pytest.approx(1.0 + 10 * 8.0 + 0.5)
    mid = projection.EpochClock(first_step=1.0, length=10)
    mid.batches = 5  # stopped half way through the first epoch: no count found
    half = mid.project(RunAccount(wall_s=6.0, phases=phases, steps=5, epochs=1), 6.0)
    assert half is not None and half.wall_s is None
    assert half.epoch_s == pytest.approx((6.0 - 1.0 - 0.5) / 0.5)
    assert "not found" in half.method


def test_an_eval_forward_is_timed_both_ways_and_the_modes_put_back() -> None:
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(), torch.nn.Linear(8, 2))
    model[1].eval()  # a module the script froze in eval mode stays so
    measured, method = autograd_cost.forward_ms(model, (torch.randn(4, 8),), {})
    assert measured is not None and all(ms > 0 for ms in measured), method
    assert "alternating pairs" in method
    assert [m.training for m in model.modules()] == [True, True, False, True]
    broken, why = autograd_cost.forward_ms(model, (torch.randn(4, 3),), {})  # wrong shape
    assert broken is None and "could not be run again" in why
    assert [m.training for m in model.modules()] == [True, True, False, True]


def test_steps_after_warmup_count_every_step_of_a_run_that_goes_on(doctor_run: DoctorRun) -> None:
    """--full: the steps after the window are counted by the session's clock, not a call at each
    step; the recompile rule spreads the recompiles' cost over all of them."""
    import torch

    torch._dynamo.reset()
    ran = doctor_run("recompile_periodic.py", "--iters", "40", full=True)
    assert ran.exit_code == 0, ran.error
    record = ran.inspection.compiles
    # 40 optimizer steps less the warm-up's: 36, the figure the per-step count of the sensor
    # (compiles.boundary at every settled step, before the clock) gave on this script.
    assert record.steps_after_warmup == 36, record
    assert record.recompiles and sum(r.after_warmup for r in record.recompiles) >= 2, record
