"""Properties of the helpers the GPU rules share (window membership, self times)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from torchpace.doctor.facts.kernels import in_ranges, short_name
from torchpace.trace.events import HostOp
from torchpace.trace.top import self_times_us

times = st.floats(min_value=0, max_value=1000, allow_nan=False)


@given(st.lists(st.tuples(times, times), max_size=8), st.lists(times, max_size=30))
def test_in_ranges_matches_brute_force(raw: list[tuple[float, float]], ts: list[float]) -> None:
    # disjoint sorted ranges, as typical steps are
    ranges, last = [], -1.0
    for a, b in sorted((min(p), max(p)) for p in raw):
        if a > last:
            ranges.append((a, b))
            last = b
    got = in_ranges(ts, ranges)
    want = [any(lo <= t <= hi for lo, hi in ranges) for t in ts] if ranges else [True] * len(ts)
    assert got == want


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 50), st.integers(1, 2)), max_size=12))
def test_self_times_never_exceed_durations_and_nest(spec: list[tuple[int, int, int]]) -> None:
    ops = sorted(
        (
            HostOp(f"op{i}", "op", float(ts), float(dur), 1, tid, None)
            for i, (ts, dur, tid) in enumerate(spec)
        ),
        key=lambda o: o.ts_us,
    )
    own = self_times_us(ops)
    assert all(0 <= s <= o.dur_us for s, o in zip(own, ops, strict=True))


def test_short_name_drops_arguments() -> None:
    assert short_name("void foo::bar<float>(int, float*)") == "foo::bar<float>"
    assert short_name("volta_sgemm_128x64_nn") == "volta_sgemm_128x64_nn"
    assert len(short_name("x" * 200)) == 90
