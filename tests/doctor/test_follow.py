"""doctor --follow: the whole run's account and the findings that need the whole run.

Figures are the run's own: the account is checked against the wall time it measured itself, and
the findings for their presence and units, never for a speed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from torchpace.doctor.finding import Finding
from torchpace.doctor.registry import NotApplicable, get_rule
from torchpace.doctor.rules import loader_config
from torchpace.runner.ledger import Ledger
from torchpace.runner.run import RunResult
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.whole_run import PHASES, RunAccount

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
    adds_up(whole.account)
    assert whole.account.ended == "the script ran to its end"
    for phase in ("training", "evaluation", "checkpoint", "epoch-start"):
        assert whole.account.seconds(phase) > 0, phase
    (grad,) = findings("grad-in-eval", ran.inspection)
    assert grad.evidence["grad_passes"] == 3 and grad.evidence["grad_eval_ms_per_epoch"] > 0
    assert grad.locations[0].file.endswith("whole_run.py")
    restarts = [f for f in findings("loader-config", ran.inspection) if "every epoch" in f.summary]
    assert len(restarts) == 2  # the training and the validation loader
    assert all(f.evidence["restarts"] == 2 and f.evidence["epochs"] == 3 for f in restarts)
    assert all(f.evidence["restart_ms_per_epoch"] > 0 for f in restarts)  # type: ignore[operator]
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


def test_epochs_stops_after_the_first_epoch(doctor_run: DoctorRun) -> None:
    ran = doctor_run("whole_run.py", follow=True, epochs=1)
    assert ran.exit_code == 0, ran.error
    whole = ran.inspection.whole_run
    assert whole is not None and whole.epochs == 1
    assert whole.account.ended == "stopped after epoch 1 (--epochs)"
    assert whole.checkpoints is not None and whole.checkpoints.saves == 1
    train = next(f for f in ran.inspection.loaders if f.created_at and f.created_at.line == 16)
    assert train.epochs_started == 2  # stopped at the first step of the second epoch
    assert not ran.stopped_early
    adds_up(whole.account)


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
    assert ledger.boundary(6.0) == pytest.approx(2.0 - 0.25)  # the step's training time
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


def test_epochs_without_follow_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from torchpace.cli.main import main

    assert main(["doctor", "--epochs", "1", "train.py"]) == 2
    assert "--follow" in capsys.readouterr().err
