"""The median the rules share agrees with the standard library's."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpace.trace.stats import median

numbers = st.one_of(
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1),
    st.lists(st.integers(-(10**6), 10**6), min_size=1),
)


@given(numbers)
def test_median_is_statistics_median(values: list[float]) -> None:
    assert median(values) == statistics.median(values)
    assert median(iter(values)) == statistics.median(values)  # any iterable, consumed once


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="median of no values"):
        median([])


def test_bytes_read_alike_everywhere() -> None:
    # One formatter for the rules' summaries and every report (three once answered apart).
    from torchpace.trace.stats import fmt_bytes

    shown = [fmt_bytes(n) for n in (12, 1536, 128 * 2**20, 3 * 2**30, -2048, 5 * 2**40)]
    assert shown == ["12 B", "1.5 KiB", "128.0 MiB", "3.0 GiB", "-2.0 KiB", "5.0 TiB"]
    assert [fmt_bytes(n, decimal=True) for n in (512e3, 19.3e6)] == ["512.0 kB", "19.3 MB"]
