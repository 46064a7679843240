"""policy/threads.Contention: how a share of a busy machine's step is bounded, from the training
thread's wait for a core and from steps timed at fewer threads (figures of pytorch/examples'
VAE and MNIST beside two busy loops)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpace.policy.threads import LOADING, OPS, WORKERS, FewerThreads, contention

VAE = FewerThreads(threads=2, fewer=1, step_ms=78.0, fewer_ms=35.1, steps=3)


def _busy(ready_ms: float, step_ms: float = 474.0, fewer: FewerThreads | None = VAE):
    c = contention(2, 1, 2, 1.0, ready_ms, step_ms, fewer=fewer)
    assert c is not None
    return c


def test_the_loadings_share_is_floored_by_the_steps_at_fewer_threads() -> None:
    # 15 ms of loading, 3.2% of the 474 ms profiled step: 43% of the 35.1 ms steps at one thread.
    c = _busy(237.0)
    assert c.unloaded(0.032) == pytest.approx(0.032 * 474.0 / 35.1)
    assert "against the steps at fewer threads; a quiet run measures its size. 3 steps at" in (
        c.judged(0.032)
    )
    # A matmul's own time is stretched too: its share keeps the wait's floor.
    assert c.unloaded(0.032, OPS) == pytest.approx(0.064)
    assert "with that wait taken out" in c.judged(0.032, OPS)
    assert c.ceiling(0.032, OPS) == 1.0 and not c.cleared(0.001, 0.05, OPS)


def test_the_higher_floor_is_used_and_named() -> None:
    # Steps at one thread as long as the profiled ones: the wait's floor (2x) is the higher.
    c = _busy(237.0, fewer=FewerThreads(2, 1, 500.0, 480.0, 3))
    assert c.unloaded(0.05) == pytest.approx(0.10)
    assert "with that wait taken out" in c.judged(0.05)


def test_the_ceiling_speeds_the_compute_up_in_proportion_to_the_threads() -> None:
    # MNIST: 13.8 ms of loading in 502 ms profiled steps; 171 ms steps at one thread.
    c = _busy(250.0, step_ms=502.0, fewer=FewerThreads(2, 1, 236.0, 171.0, 3))
    share = 13.8 / 502.0
    assert c.ceiling(share) == pytest.approx(13.8 / (13.8 + (171.0 - 13.8) / 2))
    assert not c.cleared(share, 0.10)  # 8.1% to 15%: across the 10% line
    assert "between 8.1% and 14.9% of a quiet step, around the line (10.0%)" in (
        c.unjudged(share, 0.10)
    )
    unmeasured = _busy(250.0, fewer=None)
    assert unmeasured.unjudged(share, 0.10) == unmeasured.why()


def test_the_loading_at_fewer_threads_is_the_share_the_floor_is_of() -> None:
    # accelerate's BERT example beside two busy loops: 1.9 ms of loading in 1,772 ms profiled
    # steps (2 threads spinning on 1 free core), 16.5 ms steps at one thread: 11.5%, a MEDIUM
    # stall its quiet run (5.1%) does not have. Another loaded run timed its batches at one
    # thread: 37% of the profiled wait (its spinning compute thread held the core the loading
    # waited for). The floor is of that: 0.7 ms of 16.5, 4.3%, under the 10% line.
    share = 1.895 / 1771.9
    timed = FewerThreads(2, 1, 1728.3, 16.46, 3)
    assert _busy(896.6, 1771.9, fewer=timed).judges(share, 0.10)
    c = _busy(896.6, 1771.9, fewer=replace(timed, loading=0.37))
    assert c.unloaded(share) == pytest.approx(1.895 * 0.37 / 16.46)
    assert not c.judges(share, 0.10)
    # The ceiling keeps the profiled wait: at one thread the load stretched MNIST's compute
    # 2.5x and its loading 1.2x, and a ceiling of their shares read 9.8% (quiet: 14%).
    assert c.ceiling(share) == pytest.approx(1.895 / (1.895 + (16.46 - 1.895) / 2))
    assert "between 4.3% and 20.6% of a quiet step" in c.unjudged(share, 0.10)
    mnist = _busy(251.3, 499.9, fewer=FewerThreads(2, 1, 206.6, 207.8, 3, loading=0.641))
    assert not mnist.cleared(16.65 / 499.9, 0.10)
    # Workers' loading runs in other processes: their wait keeps its own allowance.
    assert c.unloaded(share, WORKERS) == _busy(896.6, 1771.9, fewer=timed).unloaded(share, WORKERS)
    # Loading that took longer at fewer threads keeps the profiled wait (at most all of it).
    slower = _busy(896.6, 1771.9, fewer=replace(timed, loading=1.4))
    assert slower.unloaded(share) == pytest.approx(share * 1771.9 / 16.46)


def test_a_workers_loading_is_allowed_its_own_stretch() -> None:
    # Lightning's GAN, 16 workers beside two busy loops: 4.9% of the 77.4 ms step, 10.1% with
    # the training thread's 52% wait for a core taken out, over the 10% line; its quiet run read
    # 9.7%. The workers wait for cores as well: 4.9% as the worker's floor, not judged.
    c = _busy(0.52 * 77.4, step_ms=77.4, fewer=FewerThreads(2, 1, 91.3, 40.2, 3))
    assert c.judges(0.049, 0.10) and not c.judges(0.049, 0.10, WORKERS)
    # The wait's factor (2.08x) over the steps at one thread's (1.93x), and the workers' own
    # 52% allowed for: the share as read.
    assert c.unloaded(0.049, WORKERS) == pytest.approx(0.049)
    assert not c.cleared(0.049, 0.10, WORKERS)  # at most 17% on a quiet step
    assert "its workers' loading about as much as the training thread waited" in (
        c.unjudged(0.049, 0.10, WORKERS)
    )


@given(
    share=st.floats(0.0, 1.0),
    ready=st.floats(120.0, 470.0),
    fewer_ms=st.floats(1.0, 2000.0),
    loading=st.none() | st.floats(0.01, 3.0),
)
def test_the_floor_never_passes_the_ceiling(
    share: float, ready: float, fewer_ms: float, loading: float | None
) -> None:
    fewer = FewerThreads(2, 1, 80.0, fewer_ms, 3, loading=loading)
    c = _busy(ready, fewer=fewer)
    assert c.unloaded(share, LOADING) <= 1.0
    if c.unloaded(share) < 1.0 and share * 474.0 <= fewer_ms:
        assert c._fewer_factor(LOADING) * share <= c.ceiling(share) + 1e-9


def test_the_steps_at_fewer_threads_are_set_against_the_typical_step() -> None:
    # Lightning's GAN beside two busy loops: its profiled steps' mean was 593 ms (an epoch's 16
    # workers starting), their median 104 ms, the shares' step: 3.5% of it is 3.6 ms of loading,
    # 10% of the 35.7 ms steps at one thread, not 58%.
    from torchpace.runner.sensors.host import HostRecord
    from torchpace.runner.sensors.inspection import Inspection

    fewer = FewerThreads(2, 1, 962.4, 35.7, 3)
    host = HostRecord(
        cores=2, torch_threads=2, others_cores=1.0, ready_ms_per_step=302.0, fewer_threads=fewer
    )
    live = Inspection(host=host, step_ms=593.0, typical_step_ms=103.6)
    c = live.contention()
    assert c is not None and c.step_ms == 103.6
    assert c.unloaded(0.035) == pytest.approx(0.035 * 103.6 / 35.7)


def test_ranks_of_one_thread_are_bounded_by_their_wait_for_a_core() -> None:
    # pytorch/examples' imagenet resnet18 under torchrun, 2 ranks of 1 torch thread beside two
    # busy loops: 0.63 of 2 cores busy, the training thread waited 577.5 ms of its 1,681.8 ms
    # step for a core, 0.4% waiting for batches (0.4% quiet). No op spins at a barrier, so the
    # step less that wait is the compute: nothing is found, as on the quiet run.
    c = contention(1, 2, 2, 0.63, 577.5, 1681.8)
    assert c is not None and c.one_thread and c.free == 1
    assert c.ceiling(0.004) == pytest.approx(0.004 / (0.004 + (1 - 577.5 / 1681.8 - 0.004) / 1.1))
    assert c.cleared(0.004, 0.10) and c.cleared(0.004, 0.10, WORKERS)
    # The wait stretched the share's own work as much as the rest: the share is as read.
    assert c.unloaded(0.08) == 0.08 and not c.judges(0.08, 0.10) and c.judges(0.11, 0.10)
    assert "between 6.2% and 10.3% of a quiet step, around the line (10.0%)" in c.unjudged(
        0.062, 0.10
    )
    # Lightning's ddp_spawn autoencoder, 2 processes of 1 thread beside two busy loops: fp32
    # matmuls 3.2% of a step whose thread waited 38% for a core; under the 5% line quiet.
    lightning = contention(1, 2, 2, 1.1, 0.38 * 30.5, 30.5)
    assert lightning is not None and not lightning.judges(0.032, 0.05, OPS)
    assert 0.05 < lightning.ceiling(0.032, OPS) < 0.06  # not analysed, not found
    assert "fewer ranks" in c.enable()
    # Two threads a process spin at each op's barrier: that wait bounds nothing from above.
    two = contention(2, 2, 2, 0.63, 577.5, 1681.8)
    assert two is not None and not two.one_thread and two.ceiling(0.004) == 1.0


@given(share=st.floats(0.0, 1.0), ready=st.floats(0.0, 1681.0))
def test_one_threads_floor_never_passes_its_ceiling(share: float, ready: float) -> None:
    c = contention(1, 4, 2, 0.5, ready, 1681.8, min_ready_fraction=0.0)
    assert c is not None
    for kind in (LOADING, WORKERS):
        assert c.unloaded(share, kind) <= c.ceiling(share, kind) + 1e-9 or c.ceiling(share) == 1.0


def test_eager_steps_of_a_compiled_run_floor_the_share_but_bound_nothing_above() -> None:
    # An eager step is no faster than the compiled one, so the loading against it is still at
    # most its quiet share; its compute says nothing of the compiled compute's least.
    eager = FewerThreads(2, 1, 2425.0, 60.0, 3, eager=True)
    c = _busy(1200.0, step_ms=2425.0, fewer=eager)
    assert c.unloaded(0.005) == pytest.approx(0.005 * 2425.0 / 60.0)  # 20%: found
    assert c.ceiling(0.001) == 1.0 and not c.cleared(0.001, 0.10)
    assert "eager (its compiled frames set aside)" in eager.said()


@given(
    share=st.floats(0.0, 1.0),
    threads=st.integers(1, 64),
    fewer=st.integers(1, 64),
    waited=st.floats(0.0, 0.95),
    waits=st.integers(0, 100),
)
def test_the_quiet_matmul_share_is_bounded_around_the_one_at_fewer_threads(
    share: float, threads: int, fewer: int, waited: float, waits: int
) -> None:
    """More threads speed the matmuls at most threads/fewer times and slow the rest at most
    REST_SLOWER times: the quiet share lies between the bounds, which hold the measured one,
    meet where no thread was taken away and no core waited for, and widen with the waits (none
    of them the matmuls', or their share and two standard deviations of chance)."""
    f = FewerThreads(threads, fewer, 100.0, 90.0, 3, math_ms=share * 100.0, math_step_ms=100.0)
    least, most = f.math_share() or (2.0, -1.0)
    assert 0.0 <= least <= min(share, most) + 1e-9 and share <= most + 1e-9 <= 1.0 + 1e-9
    if threads <= fewer:
        assert least == pytest.approx(share) and most == pytest.approx(share)
    waiting = replace(f, math_ready_ms=waited * 90.0, math_waits=waits).math_share()
    assert waiting is not None and waiting[0] <= least + 1e-9 and waiting[1] >= most - 1e-9


def test_the_matmul_share_bounds_need_their_steps_timed_and_run_as_the_script_runs() -> None:
    f = FewerThreads(2, 1, 60.0, 45.0, 3, math_ms=15.0, math_step_ms=50.0)
    assert f.math_share() == pytest.approx((0.3 / 2.4, 0.6 / 1.3))  # 30% at 1: 12-46% at 2
    assert replace(f, math_ms=None).math_share() is None
    # 25 of the 50 ms waiting for a core: the matmuls' own 15 ms are at most 60% of the rest;
    # over 100 waits, 30% +- 9.2% of them fell in the matmuls: their own 5.2 ms at least, 21%
    waiting = replace(f, math_ready_ms=25.0, math_waits=100).math_share()
    low = (15.0 - 25.0 * (0.3 + 2 * (0.3 * 0.7 / 100) ** 0.5)) / 25.0
    assert waiting == pytest.approx((low / (low + 3 * (1 - low)), 0.75))
    # uncounted waits may all have fallen in the matmuls: 15 ms of 25 waited, nothing left
    assert replace(f, math_ready_ms=25.0).math_share() == pytest.approx((0.0, 0.75))
    assert replace(f, eager=True).math_share() is None  # a compiled run's matmuls ran eager


def test_a_runs_own_processes_outnumbering_quiet_cores_are_named_as_such() -> None:
    # pytorch/examples' mnist_hogwild on a quiet 2-core machine: 2 trainers of 2 torch threads,
    # the training thread waiting 45% of its step. "Other processes held the cores" and "run
    # again on a quieter machine" were said of it; the cores were the run's own.
    own = contention(2, 2, 2, 0.02, 19.6, 43.5)
    assert own is not None and not own.others
    assert own.why().startswith("the run's own processes held the cores (2 processes x 2 torch")
    assert own.enable() == "run each process with torch.set_num_threads(1) (OMP_NUM_THREADS=1)"
    # The same beside a busy loop: other processes.
    busy = contention(2, 2, 2, 1.0, 19.6, 43.5)
    assert busy is not None and busy.others and busy.why().startswith("other processes held")
    assert busy.enable().startswith("run again on a quieter machine")
    # Ranks of one thread, more of them than the quiet cores.
    ranks = contention(1, 3, 2, 0.0, 19.6, 43.5)
    assert ranks is not None and ranks.enable() == "run fewer processes than cores"
    assert "(3 processes x 1 torch thread(s) on 2 core(s)" in ranks.why()
