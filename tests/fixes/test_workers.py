"""The one worker policy: counts fitted to cores, ranks and device; whether workers pay."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpace.fixes.workers import (
    MAX_WORKERS,
    Host,
    Stall,
    advise,
    default_workers,
    oversubscribed,
)

devices = st.sampled_from(["cpu", "cuda", "rocm", "unknown"])


@given(st.integers(1, 256), st.integers(1, 16), devices)
def test_default_workers_never_exceed_the_share_of_a_rank(cores: int, ranks: int, device) -> None:  # type: ignore[no-untyped-def]
    host = Host(cores, ranks, device)
    n = default_workers(host)
    assert 0 <= n <= min(MAX_WORKERS, host.share or 0)
    if device == "cpu":
        assert n <= (host.share or 0) // 2  # the math keeps at least half the cores


@given(
    st.integers(1, 64), devices, st.floats(0.5, 500), st.floats(0.5, 500), st.integers(0, 8),
    st.one_of(st.none(), st.floats(0, 1)),
)  # fmt: skip
def test_advice_adds_workers_within_the_cap_or_says_they_will_not_help(  # type: ignore[no-untyped-def]
    cores, device, wait, rest, workers, cpu
) -> None:
    advice = advise(Host(cores, 1, device), Stall(wait, wait + rest, workers, None, cpu))
    assert advice.workers >= workers
    if advice.workers == workers:
        assert advice.pays == "unlikely"
    assert advice.workers <= max(workers, MAX_WORKERS)


def test_cpu_loading_that_computes_on_two_cores_is_unlikely_to_pay() -> None:
    # The VAE on MNIST: cheap samples, 2 cores, one worker made the step 54% slower.
    advice = advise(Host(2, 1, "cpu"), Stall(12.0, 30.0, 0, None, cpu_fraction=0.9))
    assert advice.pays == "unlikely" and "takes its core from the math" in advice.reason


def test_cpu_loading_that_waits_gets_workers_beyond_the_cores() -> None:
    advice = advise(Host(2, 1, "cpu"), Stall(80.0, 86.0, 0, None, cpu_fraction=0.05))
    assert advice.pays == "likely" and advice.workers == 4  # 2 x 2 cores: waiting needs none


def test_accelerator_runs_get_enough_workers_to_hide_the_load() -> None:
    # 70 ms per batch behind 106 ms of compute: one worker keeps up, plus one spare.
    assert advise(Host(16, 1, "cuda"), Stall(70.0, 176.0)).workers == 2
    # 300 ms per batch behind 20 ms: the cap (8) binds.
    assert advise(Host(16, 1, "cuda"), Stall(300.0, 320.0)).workers == 8
    assert advise(Host(1, 1, "cuda"), Stall(70.0, 176.0)).pays == "uncertain"


def test_unknown_cores_assume_a_typical_share() -> None:
    advice = advise(Host(None, 1, "cpu"), Stall(80.0, 86.0))
    assert advice.workers == 4 and advice.pays == "uncertain"


@pytest.mark.parametrize(
    ("host", "workers", "expected"),
    [
        (Host(8, 1, "cpu"), 12, 4),
        (Host(8, 1, "cuda"), 12, 8),
        (Host(8, 4, "cuda"), 4, 2),
        (Host(8, 1, "cuda"), 8, None),
        (Host(None, 1, "cuda"), 64, None),
    ],
)
def test_oversubscription_is_judged_against_the_share(host: Host, workers: int, expected) -> None:  # type: ignore[no-untyped-def]
    assert oversubscribed(host, workers) == expected
