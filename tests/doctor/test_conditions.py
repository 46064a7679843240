"""The noisy-run policy: which runs are noisy, and what that does to findings."""

from __future__ import annotations

from dataclasses import replace

from torchpace.doctor.conditions import cap_noisy, straggler_is_load, waiting_is_load
from torchpace.doctor.finding import Finding, Severity
from torchpace.runner.conditions import RunConditions, profiler_cost


def _finding(rule: str, **evidence: float) -> Finding:
    return Finding(rule, Severity.HIGH, "s", evidence, "fix")


def test_quiet_run_changes_nothing() -> None:
    quiet = RunConditions(
        usable_cores=8, others_cores=0.5, profiled_step_ms=11, unprofiled_step_ms=10
    )
    findings = [_finding("gpu-idle", idle_fraction=0.5)]
    assert quiet.reasons() == [] and cap_noisy(findings, quiet, frozenset()) == findings


def test_busy_machine_caps_timed_findings_but_not_configuration() -> None:
    busy = RunConditions(usable_cores=2, others_cores=1.5)
    live = frozenset({"debug-api-enabled", "loader-config"})
    found = cap_noisy(
        [
            _finding("gpu-idle", idle_fraction=0.5),
            _finding("loader-config", wait_fraction=0.4),
            _finding("debug-api-enabled", count=1),
        ],
        busy,
        live,
    )
    assert [f.severity for f in found] == [Severity.MEDIUM, Severity.MEDIUM, Severity.HIGH]
    assert "1.5 of 2 cores" in found[0].caveat


def test_profiler_inflation_is_a_reason() -> None:
    slow = RunConditions(profiled_step_ms=30.0, unprofiled_step_ms=10.0, unprofiled_steps=3)
    assert slow.inflation == 3.0
    assert slow.reasons() == ["the profiler made each step 3.0x slower"]


def test_profiler_cost_from_agreeing_medians() -> None:
    profiled, unprofiled, why = profiler_cost([21.0, 19.0, 20.0, 40.0], [10.0, 11.0, 9.0, 10.0])
    assert (profiled, unprofiled, why) == (20.5, 10.0, "")


def test_profiler_cost_not_stated_from_too_few_steps() -> None:
    _, unprofiled, why = profiler_cost([20.0, 20.0], [10.0, 10.0])
    assert unprofiled is None and "before 3 unprofiled steps" in why and "(2 were)" in why


def test_profiler_cost_not_stated_when_unprofiled_steps_disagree() -> None:
    _, _, why = profiler_cost([20.0] * 5, [5.0, 6.0, 20.0, 30.0, 31.0])
    assert "varied too much (5 ms-31 ms)" in why


def test_profiled_steps_faster_than_unprofiled_ones_are_noise_not_a_cost() -> None:
    # 0.46x was seen on a machine whose load changed midway: the profiler only adds work
    _, _, why = profiler_cost([10.0, 10.0, 10.0], [21.0, 22.0, 21.5])
    assert "slower than the profiled ones" in why
    unmeasured = RunConditions(
        profiled_step_ms=10.0, unprofiled_step_ms=21.5, unprofiled_steps=3, cost_unmeasured=why
    )
    assert unmeasured.inflation is None and unmeasured.reasons() == []


def _straggler(rank: int, spread_ms: float) -> Finding:
    return Finding(
        "rank-imbalance", Severity.MEDIUM, "straggler", {"work_spread_ms": spread_ms}, "", rank=rank
    )


def test_a_straggler_whose_extra_time_was_waiting_for_a_core_is_the_machines_load() -> None:
    # Rank 1 worked 6 ms longer per step and waited 5 ms longer on the run queue: load.
    why = straggler_is_load(_straggler(1, 6.0), {0: 0.5, 1: 5.5})
    assert why.startswith("rank 1 worked 6.0 ms per step longer") and "machine's load" in why


def test_a_straggler_with_its_own_extra_work_stays() -> None:
    # A sleeping or overloaded rank: the extra time is not run-queue wait.
    assert straggler_is_load(_straggler(1, 10.0), {0: 0.5, 1: 1.0}) == ""
    assert straggler_is_load(_straggler(1, 10.0), {1: 9.0}) == ""  # no other rank measured
    assert straggler_is_load(Finding("comm-bound", Severity.LOW, "", {}, ""), {0: 1, 1: 9}) == ""


def _comm(rule: str, rank: int) -> Finding:
    return Finding(rule, Severity.MEDIUM, "exposed collectives", {}, "", rank=rank)


def test_collective_wait_for_a_rank_held_back_by_load_is_the_machines_load() -> None:
    # HF run_clm, 2 CPU ranks beside two busy loops (the doctor's measures): rank 0 had 30.4 ms
    # of exposed collective time per step, rank 1 12.2 ms; rank 1 waited 62.2 ms per step on the
    # run queue, rank 0 39.3 ms. Quiet, neither rank crossed comm-overlap's line.
    wait, ready = {0: 30.4, 1: 12.2}, {0: 39.3, 1: 62.2}
    why = waiting_is_load(_comm("comm-overlap", 0), ready, wait)
    assert why.startswith("rank 0 waited 30.4 ms per step in collectives, 18.2 ms more than rank 1")
    assert "22.9 ms per step longer for a CPU core" in why
    # The rank that waits least measured the communication itself.
    assert waiting_is_load(_comm("comm-overlap", 1), ready, wait) == ""


def test_collective_time_that_no_load_explains_stays() -> None:
    wait = {0: 30.4, 1: 12.2}
    # The other rank was not held back on the run queue: a real straggler or real transfer.
    assert waiting_is_load(_comm("comm-bound", 0), {0: 39.3, 1: 41.0}, wait) == ""
    # Nearly all ranks wait alike: the time is the collective's own.
    assert waiting_is_load(_comm("comm-bound", 0), {0: 1.0, 1: 60.0}, {0: 30.4, 1: 25.0}) == ""
    # Not a collective finding, or a rank with no measure.
    assert waiting_is_load(_straggler(0, 5.0), {0: 1.0, 1: 60.0}, wait) == ""
    assert waiting_is_load(_comm("comm-bound", 2), {0: 1.0, 1: 60.0}, wait) == ""


def test_profiler_cost_not_stated_when_the_profiled_steps_disagree() -> None:
    # fabric's language model on a busy machine: profiled steps 0-5 took 8-9 s, 6-8 took 2 s
    # with the same ops; the medians called it "the profiler made each step 4.2x slower".
    profiled = [8000.0, 8500.0, 9300.0, 8800.0, 8100.0, 8600.0, 1600.0, 2000.0, 1800.0]
    _, _, why = profiler_cost(profiled, [2000.0, 2100.0, 1950.0, 2050.0])
    assert why.startswith("the 9 profiled steps varied too much")


def test_a_finding_whose_figures_load_does_not_change_keeps_its_severity() -> None:
    # padding-waste on TRL's SFT: 46% of the tokens saved on a quiet and a busy machine alike;
    # the cap made it HIGH quiet and MEDIUM loaded.
    busy = RunConditions(usable_cores=2, others_cores=1.0)
    padding = replace(_finding("padding-waste", token_saving_fraction=0.46), load_proof=True)
    (kept,) = cap_noisy([padding], busy, frozenset({"padding-waste"}))
    assert kept == padding and kept.severity is Severity.HIGH
