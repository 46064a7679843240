"""The loader rules on a machine whose other processes hold the cores: a share of the step that
the load shrank is judged with the training thread's wait for a core taken out, never reported
as nothing found."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from torchpace.doctor.finding import Severity
from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.dataloader_stall import dataloader_stall
from torchpace.doctor.rules.repeated_decode import repeated_decode
from torchpace.doctor.severity import judge
from torchpace.policy.threads import FewerThreads
from torchpace.runner.sensors.host import DeviceRecord, HostRecord
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.loader import LoaderFacts
from torchpace.runner.sensors.samples import SampleProbe
from torchpace.trace import Trace

Load = Callable[[str], Trace]
QUIET, LOADED = "loader_under_load/mnist_quiet", "loader_under_load/mnist_loaded"

# MNIST's samples as the doctor's probe read them (pytorch/examples mnist, quiet run): 0.26 ms of
# CPU per read, 0.014 ms once cached, the same twice, computing.
PROBE = SampleProbe(
    cpu_ms=0.259,
    cached_ms=0.014,
    wall_ms=0.262,
    compute_share=0.99,
    same=True,
    draws_random=False,
    sample_bytes=3144,
    dataset_len=6000,
    available_bytes=24 << 30,
)


def _mnist(
    step_ms: float, wait_ms: float, cpu_share: float, others: float, ready: float
) -> Inspection:
    loader = LoaderFacts(
        num_workers=0,
        batch_size=64,
        pin_memory=False,
        persistent_workers=False,
        prefetch_factor=None,
        iterable=False,
        dataset_type="MNIST",
        wait_fraction=wait_ms / step_ms,
        wait_cpu_fraction=0.95,
        wait_compute_share=1.0,
        wait_ms_per_batch=wait_ms,
        wait_cpu_share=cpu_share,
        sample_probe=PROBE,
    )
    host = HostRecord(cores=2, torch_threads=2, others_cores=others, ready_ms_per_step=ready)
    return Inspection(
        device=DeviceRecord(kind="cpu"), host=host, loaders=(loader,), step_ms=step_ms
    )


# The loaded run: two busy loops beside it held 1.06 of 2 cores; the training thread waited
# 294.6 ms of each 527.1 ms step for a core; the loader's CPU share read 5.5% (24% quiet).
LOADED_LIVE = _mnist(527.1, 31.7, 0.055, others=1.06, ready=294.6)
QUIET_LIVE = _mnist(93.5, 22.8, 0.24, others=0.1, ready=0.5)


def test_quiet_mnist_gets_both_loader_findings(trace_fixture: Load) -> None:
    (stall,) = dataloader_stall(trace_fixture(QUIET), live=QUIET_LIVE)
    (decode,) = repeated_decode(QUIET_LIVE)
    assert stall.rule == "dataloader-stall" and decode.rule == "repeated-decode"


def test_loaded_mnist_gets_both_loader_findings_judged_without_the_load(
    trace_fixture: Load,
) -> None:
    # 6% of the step as it read; 13.7% with the thread's 294.6 ms wait for a core taken out.
    (stall,) = dataloader_stall(trace_fixture(LOADED), live=LOADED_LIVE)
    assert "the share read 6.1% of the step, 13.7% with that wait taken out" in stall.caveat
    assert "waited 56% of its step" in stall.caveat
    (decode,) = repeated_decode(LOADED_LIVE)
    assert decode.rule == "repeated-decode"
    assert "the share read 5.5% of the step, 12.5% with that wait taken out" in decode.caveat
    # Judged alike, with the same fixes as on the quiet machine.
    (quiet_stall,) = dataloader_stall(trace_fixture(QUIET), live=QUIET_LIVE)
    (quiet_decode,) = repeated_decode(QUIET_LIVE)
    assert stall.fix == quiet_stall.fix and decode.fix == quiet_decode.fix
    assert "Judged while" not in quiet_stall.caveat + quiet_decode.caveat


def test_the_same_low_share_without_contention_is_nothing_found(trace_fixture: Load) -> None:
    # One thread fits the free core: no barrier to wait at.
    one_thread = replace(LOADED_LIVE, host=replace(LOADED_LIVE.host, torch_threads=1))
    assert dataloader_stall(trace_fixture(LOADED), live=one_thread) == []
    assert repeated_decode(one_thread) == []
    # Busy, but the thread hardly waited for a core: the shares describe the script.
    calm = _mnist(527.1, 31.7, 0.055, others=1.06, ready=20.0)
    assert dataloader_stall(trace_fixture(LOADED), live=calm) == []
    assert repeated_decode(calm) == []


def test_a_share_too_small_even_without_the_wait_is_not_judged(trace_fixture: Load) -> None:
    # The thread waited 150 ms of its 527.1 ms step for a core (28%: contention), but with that
    # taken out the 31.7 ms wait is 8% of the 377 ms left: under the 10% threshold, yet the
    # compute's threads also spin at each op's barrier, which that wait does not count
    # (pytorch/examples' MNIST in another loaded run: 3.3% of a 506 ms step, 6.6% without the
    # wait, 24% quiet). Not judged, never nothing found.
    live = _mnist(527.1, 31.7, 0.055, others=1.06, ready=150.0)
    assert live.contention() is not None
    with pytest.raises(NotApplicable) as stall:
        dataloader_stall(trace_fixture(LOADED), live=live)
    assert "31.7 ms (6.1% of 523.7 ms)" in stall.value.reason
    assert "was not judged: other processes held the cores" in stall.value.reason
    assert "torch.set_num_threads(1)" in stall.value.enable
    with pytest.raises(NotApplicable) as decode:
        repeated_decode(live)
    assert "MNIST computes each sample again every epoch" in decode.value.reason
    assert "(5.5%) was not judged" in decode.value.reason


def test_a_share_judged_without_the_wait_is_given_the_severity_of_that_share(
    trace_fixture: Load,
) -> None:
    # The severity policy judges a share read under the load as the rule judged it: without the
    # thread's wait for a core (the caveat's figure), a lower bound of the quiet share, since the
    # load also stretches the compute's other threads. Here 2.9% of the 527 ms step as read
    # (LOW), 6.5% without the 294.6 ms wait (MEDIUM), 17% quiet (HIGH); in the sweep's loaded
    # MNIST 10.0% of a 184 ms step as read (MEDIUM), 20% without the wait, 15% quiet (HIGH).
    (decode,) = repeated_decode(LOADED_LIVE)
    assert decode.stretch == pytest.approx(527.1 / (527.1 - 294.6))
    loaded = judge(decode, 527.1)
    assert loaded.saving_fraction == pytest.approx(0.0286, abs=1e-3)  # the figure shown: as read
    assert loaded.severity is Severity.MEDIUM
    assert judge(replace(decode, stretch=1.0), 527.1).severity is Severity.LOW
    (quiet,) = repeated_decode(QUIET_LIVE)
    assert quiet.stretch == 1.0 and judge(quiet, 93.5).severity is Severity.HIGH
    # The training thread's CPU time is not load-proof under contention (its threads spin at
    # each op's barrier): a busy run's cap applies to the loaded finding only.
    assert quiet.load_proof and not decode.load_proof


def test_one_torch_thread_a_rank_keeps_its_cpu_shares_under_contention() -> None:
    """torchrun's default, one torch thread a rank: 2 ranks shared the 1 core the busy loops left,
    each training thread waiting 56% of its step for it. With no barrier to spin at, a rank's CPU
    time is its own work, so its loader's share of it is the quiet share: under the line it is
    nothing found (taking the wait out would have inflated 5.5% to 12.5% and found it), over the
    line it is load-proof, not capped."""
    ranks = replace(LOADED_LIVE, host=replace(LOADED_LIVE.host, torch_threads=1), world_size=2)
    assert ranks.contention() is not None
    assert repeated_decode(ranks) == []
    busy_quiet_share = replace(ranks, loaders=(replace(ranks.loaders[0], wait_cpu_share=0.24),))
    (decode,) = repeated_decode(busy_quiet_share)
    assert decode.load_proof and decode.stretch == 1.0 and "Judged while" not in decode.caveat
    # Two threads a rank spin at each op's barrier: not load-proof there.
    two = replace(busy_quiet_share, host=replace(ranks.host, torch_threads=2))
    assert not repeated_decode(two)[0].load_proof


def test_a_saving_per_step_is_a_share_of_the_typical_step() -> None:
    """PyG's gin.py evaluates inside 2 of its 10 profiled steps (a mean of 62.6 ms, a median of
    36.7): the window's 38% read as 65% of the median step."""
    window = replace(QUIET_LIVE, step_ms=62.6)
    (mean,) = repeated_decode(window)
    (typical,) = repeated_decode(replace(window, typical_step_ms=36.7))
    assert mean.saving_ms and typical.saving_ms
    assert typical.saving_ms == pytest.approx(mean.saving_ms * 36.7 / 62.6, rel=1e-3)
    assert typical.saving_ms < 0.24 * 36.7  # within the loader's share of the typical step


def test_a_pyg_datasets_transform_is_moved_to_pre_transform() -> None:
    pyg = replace(
        QUIET_LIVE.loaders[0], dataset_type="TUDataset", pyg_transform="OneHotDegree(135)"
    )
    (decode,) = repeated_decode(replace(QUIET_LIVE, loaders=(pyg,)))
    assert "TUDataset(..., pre_transform=OneHotDegree(135))" in decode.fix
    assert "TensorDataset" not in decode.fix  # graphs of any size do not stack


def test_an_evaluation_read_once_by_a_script_that_ended_has_nothing_to_cache() -> None:
    """pytorch/examples' mnist_hogwild trains in child processes; its main process evaluates
    the test set once: "later epochs would skip it" (60% of the step) was said of no later epoch.
    A training loader keeps its finding (a user's `--epochs 1` run stands for a longer one)."""
    once = replace(QUIET_LIVE.loaders[0], epochs_started=1, trained_batches=0)
    assert repeated_decode(replace(QUIET_LIVE, loaders=(once,), ran_to_end=True)) == []
    (stopped,) = repeated_decode(replace(QUIET_LIVE, loaders=(once,)))  # the doctor stopped it
    trained = replace(once, trained_batches=6)
    (training,) = repeated_decode(replace(QUIET_LIVE, loaders=(trained,), ran_to_end=True))
    again = replace(once, epochs_started=2)
    (evaluated,) = repeated_decode(replace(QUIET_LIVE, loaders=(again,), ran_to_end=True))
    assert stopped.rule == training.rule == evaluated.rule == "repeated-decode"


# pytorch/examples' VAE beside two busy loops: 3 unprofiled steps at torch.set_num_threads(1)
# after the window took 35.1 ms (78.0 ms at its 2 threads); its quiet run waited 54% of the step.
VAE_FEWER = FewerThreads(threads=2, fewer=1, step_ms=78.0, fewer_ms=35.1, steps=3)


def test_a_share_the_wait_could_not_decide_is_judged_at_fewer_threads(
    trace_fixture: Load,
) -> None:
    # The case above: 31.7 ms of loading, 6.1% of the 523.7 ms step, 8% without the wait; the
    # steps at one thread measure what the load stretched: 31.7 of 35.1 ms.
    live = _mnist(527.1, 31.7, 0.055, others=1.06, ready=150.0)
    measured = replace(live, host=replace(live.host, fewer_threads=VAE_FEWER))
    (stall,) = dataloader_stall(trace_fixture(LOADED), live=measured)
    assert (
        "against the steps at fewer threads; a quiet run measures its size. 3 steps at torch.set_num_threads(1)"
        in (stall.caveat)
    )
    assert stall.stretch == pytest.approx(527.1 / 35.1)
    (decode,) = repeated_decode(measured)
    assert "the share read 5.5% of the step" in decode.caveat
    assert judge(decode, 527.1).severity is Severity.HIGH  # the quiet run's severity


def test_a_share_small_at_fewer_threads_too_is_nothing_found(trace_fixture: Load) -> None:
    # 31.7 ms of loading against 1 s steps at one thread: at most 6.1% at the script's 2
    # threads (their compute sped up at most 2x), under the line as on a quiet machine.
    live = _mnist(527.1, 31.7, 0.055, others=1.06, ready=150.0)
    slow = replace(VAE_FEWER, step_ms=540.0, fewer_ms=1000.0)
    measured = replace(live, host=replace(live.host, fewer_threads=slow))
    assert dataloader_stall(trace_fixture(LOADED), live=measured) == []
    assert repeated_decode(measured) == []


def test_loading_the_script_s_threads_slowed_is_floored_at_its_time_there(
    trace_fixture: Load,
) -> None:
    # The case above, but the batches at one thread took 5% of the profiled steps' wait (the
    # compute's spinning threads held the core the loading waited for: accelerate's BERT example
    # beside two busy loops kept 31-72%): its floor falls under the line, not judged.
    live = _mnist(527.1, 31.7, 0.055, others=1.06, ready=150.0)
    kept = replace(VAE_FEWER, loading=0.05)
    measured = replace(live, host=replace(live.host, fewer_threads=kept))
    with pytest.raises(NotApplicable, match="around the line"):
        dataloader_stall(trace_fixture(LOADED), live=measured)


def test_a_share_whose_bounds_straddle_the_line_is_not_judged(trace_fixture: Load) -> None:
    # pytorch/examples' MNIST beside two busy loops: 13.8 ms of loading, 171 ms steps at one
    # thread (8.1%), at most 15% at 2 threads; its quiet run read 14%, a MEDIUM finding. Here:
    # 31.7 ms against 520 ms steps at one thread, 6.1%, or 8.5% of the profiled step without
    # the wait for a core (the higher floor), to 11.6%, across the 10% line.
    live = _mnist(527.1, 31.7, 0.055, others=1.06, ready=150.0)
    across = replace(VAE_FEWER, step_ms=540.0, fewer_ms=520.0)
    measured = replace(live, host=replace(live.host, fewer_threads=across))
    with pytest.raises(NotApplicable) as stall:
        dataloader_stall(trace_fixture(LOADED), live=measured)
    assert "between 8.5% and 11.6% of a quiet step, around the line (10.0%)" in stall.value.reason
    with pytest.raises(NotApplicable) as decode:
        repeated_decode(measured)
    assert "around the line (10.0%)" in decode.value.reason


def test_a_pyg_in_memory_dataset_read_without_a_transform_has_nothing_to_cache() -> None:
    # PyG's compiled GIN on MUTAG (TUDataset, no transform), one run beside two busy loops: its
    # reads cost 0.049 ms, 3.06x the in-memory twin, and it was told to stack its graphs into a
    # TensorDataset. InMemoryDataset already keeps each graph; a read copies it.
    pyg = replace(QUIET_LIVE.loaders[0], dataset_type="TUDataset", pyg_in_memory=True)
    assert repeated_decode(replace(QUIET_LIVE, loaders=(pyg,))) == []
