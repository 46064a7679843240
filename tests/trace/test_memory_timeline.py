"""MemoryTimeline's row selections agree with each other, in any order of rows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from torchpace.trace.events import MemoryTimeline

rows = st.lists(
    st.tuples(
        st.floats(0, 1e6),
        st.floats(-1e9, 1e9),
        st.floats(0, 1e9),
        st.floats(0, 1e9),
        st.sampled_from([0, 1, 7]),  # CPU, CUDA, another accelerator
        st.integers(-1, 3),
        st.integers(-1, 1 << 40),  # address
        st.integers(-1, 9),  # thread
    ),
    max_size=40,
)


def _timeline(table: list[tuple[float, float, float, float, int, int, int, int]]) -> MemoryTimeline:
    columns = [list(c) for c in zip(*table, strict=True)] if table else [[]] * 8
    return MemoryTimeline(*columns)


@given(rows, st.data())
def test_where_keeps_the_rows_select_picks(table: list, data: st.DataObject) -> None:  # type: ignore[type-arg]
    timeline = _timeline(table)
    mask = data.draw(st.lists(st.booleans(), min_size=len(table), max_size=len(table)))
    picked = timeline.select([i for i, keep in enumerate(mask) if keep])
    assert timeline.where(mask).columns() == picked.columns()


@given(rows)
def test_on_device_drops_exactly_the_cpu_rows(table: list) -> None:  # type: ignore[type-arg]
    device = _timeline(table).on_device()
    assert device.columns() == _timeline([r for r in table if r[4] != 0]).columns()
