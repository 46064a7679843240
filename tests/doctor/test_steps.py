"""Step detection policy, fed event sequences (no torch)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from torchpace.runner.steps import Event, StepDetector, TimeWindows, outranks


def boundaries(det: StepDetector, events: list[tuple[str, int]]) -> list[int]:
    """Positions of the events that ended a step."""
    out: list[int] = []
    det.ticks = lambda: len(out)  # the session counts every boundary, as here
    for i, (kind, arg) in enumerate(events):
        if kind == "freeze":
            det.freeze()  # profiling starts
            continue
        if kind == "opt":
            ev = det.optimizer_step(arg)
        elif kind == "batch":
            ev = det.loader_batch()
        elif kind == "closure-backward":
            ev = det.backward_done(inside_optimizer=True)
        else:
            ev = det.backward_done()
        if ev is not Event.NONE:
            out.append(i)
    return out


def test_one_optimizer_each_step_is_a_boundary_after_the_first_cycle() -> None:
    det = StepDetector(settle=3)
    events = [("batch", 0), ("backward", 0), ("opt", 1)] * 5
    assert boundaries(det, events) == [5, 8, 11, 14]
    assert det.mode == "optimizer"
    assert det.describe() == "steps are optimizer.step() calls"


def test_two_optimizers_group_into_one_iteration() -> None:
    det = StepDetector()
    events = [("opt", 1), ("opt", 2)] * 6  # discriminator, then generator
    found = boundaries(det, events)
    assert [events[i][1] for i in found[1:]] == [2] * (len(found) - 1)
    assert "2 optimizers" in det.describe()


def test_critic_stepping_five_times_per_generator_step_groups_by_the_generator() -> None:
    det = StepDetector()
    events = ([("opt", 1)] * 5 + [("opt", 2)]) * 4
    found = boundaries(det, events)
    assert all(events[i][1] == 2 for i in found[-2:])


def test_an_optimizer_that_trains_after_the_anchor_stopped_takes_over() -> None:
    """pytorch/examples' forward-forward: layer 0's Adam steps 60 times, then layer 1's. Frozen
    on the first, the detector counted none of the second's steps (`--follow` called them
    tear-down); now the second takes over at its second step."""
    det = StepDetector()
    events = [("opt", 1)] * 8 + [("freeze", 0)] + [("opt", 1)] * 4 + [("opt", 2)] * 5
    found = boundaries(det, events)
    assert [events[i][1] for i in found[-4:]] == [2, 2, 2, 2] and det.anchor == 2
    assert "2 optimizers trained one after the other" in det.describe()
    assert found[-4] == len(events) - 4  # the takeover, at its second step: it ends two steps
    det = StepDetector()
    ends = []
    det.ticks = lambda: len(ends)
    for opt in [1] * 8 + [0] + [1] * 4 + [2] * 5:
        if opt == 0:
            det.freeze()
        elif det.optimizer_step(opt) is Event.BOUNDARY:
            ends.append(det.steps_ended(first=not ends))
    assert ends == [2] + [1] * 10 + [2, 1, 1, 1] and sum(ends) == 17  # every step, once
    # A probe's optimizer stepping in an evaluation takes over for its steps; the anchor takes
    # back over after two of its own.
    det = StepDetector()
    events = [("opt", 1)] * 8 + [("freeze", 0)] + [("opt", 3)] * 3 + [("opt", 1)] * 4
    found = boundaries(det, events)
    assert [events[i][1] for i in found[-5:]] == [3, 3, 1, 1, 1] and det.anchor == 1


def test_a_frozen_critic_stepping_five_times_per_generator_step_never_takes_over() -> None:
    det = StepDetector()
    cycle = [("opt", 1)] * 5 + [("opt", 2)]
    found = boundaries(det, cycle * 3 + [("freeze", 0)] + cycle * 20)
    assert det.anchor == 2 and det.took_over == 0 and len([i for i in found if i > 18]) == 20


def test_closure_optimizer_is_one_step_per_call() -> None:
    det = StepDetector()
    events = ([("closure-backward", 0)] * 3 + [("opt", 1)]) * 4
    assert boundaries(det, events) == [7, 11, 15]
    assert "closure" in det.describe()


def test_dataloader_steps_without_optimizer() -> None:
    det = StepDetector(settle=4)
    found = boundaries(det, [("batch", 0)] * 8)
    assert found == [3, 4, 5, 6, 7]
    assert det.mode == "dataloader"


def test_backward_steps_without_optimizer_or_loader() -> None:
    det = StepDetector(settle=2)
    assert boundaries(det, [("backward", 0)] * 4) == [1, 2, 3]
    assert det.mode == "backward"


def test_a_late_optimizer_restarts_counting() -> None:
    # Gradient accumulation over many batches looks like an evaluation loop at first.
    det = StepDetector(settle=2)
    assert det.loader_batch() is Event.NONE
    for _ in range(3):
        assert det.loader_batch() is Event.BOUNDARY
    assert det.optimizer_step(7) is Event.NONE  # one step: no cycle seen yet
    assert det.loader_batch() is Event.BOUNDARY
    assert det.optimizer_step(7) is Event.RESTART
    assert det.mode == "optimizer"


def test_window_only_when_nothing_else() -> None:
    det = StepDetector()
    assert det.window_tick() is Event.BOUNDARY
    assert det.mode == "window"
    assert det.describe().startswith("steps are fixed time windows")


def test_the_first_window_waits_for_quiet_cpu_time_not_wall_time() -> None:
    # A slow first step on a busy machine: 30 s of wall time pass while the main thread runs
    # 3 s, then 10 s of its CPU time pass with no step signal.
    cpu = [0.0]
    windows = TimeWindows(10.0, 0.5, cpu_clock=lambda: cpu[0])
    assert not windows.due(0.0, None, lambda: False)
    cpu[0] = 3.0
    assert not windows.due(30.0, None, lambda: False)  # wall time alone is not quiet
    cpu[0] = 10.0
    assert windows.due(31.0, None, lambda: False)


def test_settling_restarts_both_quiet_clocks_and_an_unreadable_cpu_clock_leaves_wall_time() -> None:
    cpu = [5.0]
    windows = TimeWindows(10.0, 0.5, cpu_clock=lambda: cpu[0])
    assert not windows.due(0.0, None, lambda: True)  # imports: the quiet starts at 5 s of CPU
    cpu[0] = 14.0
    assert not windows.due(12.0, None, lambda: False)
    cpu[0] = 15.0
    assert windows.due(12.0, None, lambda: False)
    assert TimeWindows(10.0, 0.5, cpu_clock=lambda: None).due(10.0, None, lambda: False)


@given(st.lists(st.sampled_from([1, 2, 3]), min_size=2, max_size=30), st.integers(2, 6))
def test_periodic_optimizer_patterns_step_with_the_rarest_optimizer(
    pattern: list[int], repeats: int
) -> None:
    # Whatever order optimizers step in, once the detector has seen the repeating pattern each
    # period yields as many boundaries as the rarest optimizer steps in it.
    det = StepDetector()
    events = [("opt", o) for o in pattern] * (repeats + 2)
    found = boundaries(det, events)
    tail = [i for i in found if i >= 2 * len(pattern)]
    assert len(tail) == repeats * min(Counter(pattern).values())


@given(st.lists(st.sampled_from([1, 2, 3]), min_size=2, max_size=30), st.integers(2, 6))
def test_a_periodic_pattern_frozen_keeps_its_anchor(pattern: list[int], repeats: int) -> None:
    # Frozen once the pattern has been seen twice (profiling starts), no optimizer of a repeating
    # pattern takes over, and every period still ends as many steps.
    det = StepDetector()
    events = [("opt", o) for o in pattern] * 2 + [("freeze", 0)]
    events += [("opt", o) for o in pattern] * repeats
    found = boundaries(det, events)
    anchor, tail = det.anchor, [i for i in found if i > 2 * len(pattern)]
    assert det.took_over == 0 and det.anchor == anchor
    assert len(tail) == repeats * Counter(pattern)[anchor]


def test_outranks_orders_the_signals_and_any_signal_beats_none() -> None:
    order = ["window", "backward", "dataloader", "optimizer"]
    for i, weaker in enumerate(order):
        assert outranks(weaker, None)
        assert not outranks(weaker, weaker)
        for stronger in order[i + 1 :]:
            assert outranks(stronger, weaker) and not outranks(weaker, stronger)
    assert not outranks(None, None) and not outranks(None, "window")


def test_the_first_boundary_says_how_many_steps_it_ends() -> None:
    """A signal settles only once seen again, so the first boundary ends several steps: --follow
    counted HF Trainer's 50 steps as 49 and nanoGPT's 301 as 300."""
    det = StepDetector()
    assert det.optimizer_step(1) is Event.NONE
    assert det.optimizer_step(1) is Event.BOUNDARY and det.first_steps() == 2
    gan = StepDetector()  # D then G each iteration: G closes it
    events = [gan.optimizer_step(o) for o in (1, 2, 1, 2)]
    assert events[-1] is Event.BOUNDARY and gan.anchor == 2 and gan.first_steps() == 2
    loader = StepDetector()
    events = [loader.loader_batch() for _ in range(6)]
    assert events[-1] is Event.BOUNDARY and loader.first_steps() == 6
