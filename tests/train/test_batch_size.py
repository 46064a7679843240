"""find_batch_size: search logic against fake trials; scale_lr rules and input errors."""

from __future__ import annotations

import math
import re
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchpace.train.batch_size as batch_size_module
from torchpace.train import find_batch_size, is_oom, scale_lr


@pytest.fixture(autouse=True)
def no_gc(monkeypatch):
    """Fake failures hold no memory; skip the (slow) gc.collect() a real OOM needs."""
    monkeypatch.setattr(batch_size_module, "release_memory", lambda: None)


class FakeTrial:
    """Fits when `fits(size)`; otherwise raises the given out-of-memory error."""

    def __init__(self, fits, error: Exception | None = None) -> None:
        self.fits = fits
        self.error = error or torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
        self.ran: list[int] = []
        self.passed: list[int] = []

    def __call__(self, size: int) -> None:
        self.ran.append(size)
        if not self.fits(size):
            raise self.error
        self.passed.append(size)


def test_largest_fit_then_margin_and_multiple_of_8():
    trial = FakeTrial(lambda n: n <= 100)
    # largest passing is 100; 100 * 0.95 = 95 -> rounded down to 88; 88 is run to confirm.
    assert find_batch_size(trial, start=2, max=1024) == 88
    assert trial.ran[-1] == 88 and 88 in trial.passed
    assert 101 in trial.ran and 100 in trial.passed


def test_no_margin_returns_the_largest_passing_size_rounded():
    assert find_batch_size(FakeTrial(lambda n: n <= 100), start=2, max=1024, margin=0) == 96
    assert (
        find_batch_size(FakeTrial(lambda n: n <= 100), start=2, max=1024, margin=0, multiple_of=1)
        == 100
    )


def test_small_sizes_are_not_rounded_to_zero():
    assert find_batch_size(FakeTrial(lambda n: n <= 5), start=1, max=64) == 4


def test_max_caps_the_search():
    trial = FakeTrial(lambda n: True)
    assert find_batch_size(trial, start=3, max=40, margin=0) == 40
    assert max(trial.ran) == 40


def test_failing_start_searches_down():
    assert find_batch_size(FakeTrial(lambda n: n <= 12), start=64, max=64, margin=0) == 8


def test_nothing_fits():
    with pytest.raises(RuntimeError, match="even batch size 1 runs out of memory"):
        find_batch_size(FakeTrial(lambda n: False), start=4, max=64)


def test_non_monotone_backoff_size_that_fails_falls_back_to_a_size_that_ran():
    # 64 passes but 56 (the backed-off target) fails: fragmentation makes memory non-monotone.
    trial = FakeTrial(lambda n: n <= 64 and n != 56)
    result = find_batch_size(trial, start=8, max=64)
    assert result in trial.passed and result < 56
    assert result == 32


def test_non_monotone_search_returns_only_sizes_that_ran():
    # 48 fails although 64 passes; bisection never tries what it cannot see, but the answer ran.
    trial = FakeTrial(lambda n: n <= 80 and n != 48)
    result = find_batch_size(trial, start=16, max=128)
    assert result in trial.passed


@given(
    limit=st.integers(1, 3000),
    holes=st.sets(st.integers(1, 3000), max_size=5),
    start=st.integers(1, 256),
    margin=st.floats(0, 0.5),
)
@settings(max_examples=60, deadline=None)
def test_property_result_always_ran(limit, holes, start, margin):
    trial = FakeTrial(lambda n: n <= limit and n not in holes)
    try:
        result = find_batch_size(trial, start=start, max=4096, margin=margin)
    except RuntimeError:
        assert not trial.passed
        return
    assert result in trial.passed
    assert result <= limit


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("CUDA error: out of memory"),
        RuntimeError("HIP out of memory. Tried to allocate"),
        RuntimeError("cuBLAS error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"),
        torch.OutOfMemoryError("CUDA out of memory."),
    ],
)
def test_oom_variants_are_caught(error):
    assert is_oom(error)
    assert find_batch_size(FakeTrial(lambda n: n <= 16, error), start=4, max=64, margin=0) == 16


def test_other_errors_propagate():
    with pytest.raises(ValueError, match="shape mismatch"):
        find_batch_size(FakeTrial(lambda n: n <= 16, ValueError("shape mismatch")), start=4, max=64)


def test_failed_trial_memory_is_released(monkeypatch):
    calls = []
    monkeypatch.setattr(batch_size_module, "release_memory", lambda: calls.append(1))
    trial = FakeTrial(lambda n: n <= 16)
    find_batch_size(trial, start=4, max=64, margin=0)
    assert len(calls) == len(trial.ran) - len(trial.passed) == 5  # 32, 24, 20, 18, 17


def test_a_failed_trials_tensors_are_freed_though_its_error_lives_on():
    # The error's traceback holds the failed trial's frames and so its tensors; here the trial
    # keeps the error (re-raised each time, as FakeTrial does), so the frames outlive the except.
    error = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
    held: list[weakref.ref[torch.Tensor]] = []

    def trial(size: int) -> None:
        activations = torch.empty(size, 256)
        held.append(weakref.ref(activations))
        if size > 16:
            raise error

    assert find_batch_size(trial, start=4, max=64, margin=0) == 16
    assert [ref() for ref in held] == [None] * len(held)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": 0, "max": 8}, "start must be a whole number >= 1; got 0"),
        ({"start": 16, "max": 8}, "max (8) is below start (16); raise max"),
        ({"start": 1, "max": 8, "margin": 1.0}, "margin must be in [0, 1); got 1.0"),
        (
            {"start": 1, "max": 8, "multiple_of": 0},
            "multiple_of must be a whole number >= 1; got 0",
        ),
    ],
)
def test_bad_search_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(f"find_batch_size: {message}")):
        find_batch_size(FakeTrial(lambda n: True), **kwargs)


def test_scale_lr_rules():
    assert scale_lr(0.1, 256, 1024) == pytest.approx(0.4)
    assert scale_lr(1e-3, 32, 128, rule="sqrt") == pytest.approx(2e-3)
    assert scale_lr(1e-3, 64, 64, rule="sqrt") == 1e-3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0.0, 32, 64), "scale_lr: lr must be a finite number > 0; got 0.0"),
        ((math.nan, 32, 64), "scale_lr: lr must be a finite number > 0; got nan"),
        ((0.1, 0, 64), "scale_lr: old_batch must be a whole number >= 1; got 0"),
        ((0.1, 32, 6.5), "scale_lr: new_batch must be a whole number >= 1; got 6.5"),
        ((0.1, 32, 64, "cubic"), "scale_lr: rule must be 'linear' or 'sqrt'; got 'cubic'"),
    ],
)
def test_scale_lr_bad_input(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        scale_lr(*args)


@pytest.mark.cuda
def test_real_gpu_out_of_memory_is_caught_and_released():
    # Other cuda tests of the same process hold memory (69,206,016 bytes on the H200 run): what
    # the search leaves is compared with what was allocated before it.
    allocated = torch.cuda.memory_allocated()
    free, _ = torch.cuda.mem_get_info()
    row_bytes = 64 * 1024 * 1024  # one batch row: 16M fp32 activations

    def trial(size: int) -> None:
        x = torch.empty(size, row_bytes // 4, device="cuda")
        y = x * 2  # a second copy: the step needs two rows per sample
        del x, y

    result = find_batch_size(trial, start=1, max=1 << 20, margin=0, multiple_of=1)
    assert 0 < result * 2 * row_bytes <= free
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated
