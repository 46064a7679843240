"""Interval arithmetic and nesting: properties checked against a brute-force timeline."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from torchpace.trace import intervals as iv
from torchpace.trace.events import Step
from torchpace.trace.nesting import Containing, Nesting

ranges = st.lists(
    st.tuples(st.integers(0, 200), st.integers(1, 50)).map(
        lambda t: (float(t[0]), float(t[0] + t[1]))
    ),
    max_size=25,
)


def _cells(intervals: list[iv.Interval]) -> set[int]:
    return {t for s, e in intervals for t in range(int(s), int(e))}


@settings(max_examples=60, deadline=None)  # a shared, loaded machine: no deadlines
@given(ranges)
def test_union_covers_exactly_the_same_time(a: list[iv.Interval]) -> None:
    merged = iv.union(a)
    assert _cells(merged) == _cells(a)
    assert all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(merged))


@settings(max_examples=60, deadline=None)  # a shared, loaded machine: no deadlines
@given(ranges, ranges)
def test_subtract_is_set_difference(a: list[iv.Interval], b: list[iv.Interval]) -> None:
    assert _cells(iv.subtract(iv.union(a), iv.union(b))) == _cells(a) - _cells(b)


@settings(max_examples=60, deadline=None)  # a shared, loaded machine: no deadlines
@given(ranges, st.integers(0, 250), st.integers(0, 250), ranges)
def test_coverage_queries(
    a: list[iv.Interval], lo: int, span: int, probes: list[iv.Interval]
) -> None:
    cov = iv.Coverage.of(a)
    assert list(zip(cov.starts, cov.ends, strict=True)) == iv.union(a)
    window = set(range(lo, lo + span))
    assert cov.covered(lo, lo + span) == len(_cells(a) & window)
    assert _cells(cov.gaps(lo, lo + span)) == window - _cells(a)
    assert cov.overlap(probes) == sum(len(_cells(a) & _cells([p])) for p in probes)


def test_nesting_finds_the_innermost_enclosing_range() -> None:
    items = [Step(0, 0, 100), Step(1, 10, 30), Step(2, 15, 5), Step(3, 50, 40), Step(4, 60, 10)]
    nest = Nesting(items)
    assert nest.parent == [-1, 0, 1, 0, 3]
    assert nest.chain(16, 18) == [2, 1, 0]
    assert nest.chain(45, 46) == [0]
    assert nest.innermost(61, 65) == 4
    assert nest.innermost(101, 102) == -1


@settings(max_examples=80, deadline=None)  # a shared, loaded machine: no deadlines
@given(
    st.lists(st.tuples(st.integers(0, 300), st.integers(0, 400)), max_size=120),
    st.lists(st.tuples(st.integers(-5, 700), st.integers(0, 60)), min_size=1, max_size=10),
)
def test_containing_is_a_scan_of_every_earlier_range(
    spans: list[tuple[int, int]], queries: list[tuple[int, int]]
) -> None:
    # Many short ranges and a few long ones, as a thread's ops are; half-microsecond starts.
    items = sorted((Step(i, s / 2, d / 2) for i, (s, d) in enumerate(spans)), key=lambda x: x.ts_us)
    found = Containing(items)
    for ts, length in queries:
        start, end = ts / 2, ts / 2 + length / 2
        scan = [
            k
            for k in reversed(range(len(items)))
            if items[k].ts_us <= start + 0.5 and items[k].end_us + 0.5 >= end
        ]
        assert found.containing(start, end) == scan


@settings(max_examples=80, deadline=None)  # a shared, loaded machine: no deadlines
@given(ranges, ranges)
def test_overlap_with_is_the_time_both_cover(a: list[iv.Interval], b: list[iv.Interval]) -> None:
    both = len(_cells(a) & _cells(b))
    assert iv.Coverage.of(a).overlap_with(iv.Coverage.of(b)) == both
    assert iv.Coverage.of(b).overlap_with(iv.Coverage.of(a)) == both


@given(ranges)
def test_of_sorted_is_of_for_columns_sorted_by_start(a: list[iv.Interval]) -> None:
    ordered = sorted(a, key=lambda r: r[0])
    fast = iv.Coverage.of_sorted([s for s, _ in ordered], [e for _, e in ordered])
    assert fast == iv.Coverage.of(a)
