"""The profiled window's bounds: events estimated from private memory, never from shared memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from torchpace.runner.profiling import ProfileBounds, ProfilerWindow, Recording

_CPU = Recording(cuda=False, shapes=False, stacks=False, memory=False)
_MiB = 1 << 20


@pytest.fixture
def window() -> Iterator[ProfilerWindow]:
    """A recording whose memory may grow by 100 MiB."""
    w = ProfilerWindow(_CPU, ProfileBounds(max_bytes=100 * _MiB, max_seconds=600))
    w.start()
    yield w
    w.discard()


def test_shared_memory_the_script_fills_is_not_profiler_events(window: ProfilerWindow) -> None:
    import torch

    shared = torch.empty(160 * _MiB // 4).share_memory_()  # as a hogwild model's parameters
    shared.fill_(1.0)  # resident now, in shared memory
    assert window.over_bound() is None
    del shared


def test_private_growth_reaches_the_memory_bound_and_says_how_it_was_read(
    window: ProfilerWindow,
) -> None:
    import torch

    grown = torch.ones(160 * _MiB // 4)  # private heap memory, as the profiler's events are
    bound = window.over_bound()
    assert bound == "memory"
    said = window.describe_bound(bound)
    assert "private memory grew" in said and "whatever the script allocated meanwhile" in said
    del grown
