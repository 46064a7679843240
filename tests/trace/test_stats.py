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
