"""The facts layer: one Facts per trace, each fact computed once and shared by the rules."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.kernels import kernel_columns
from torchpace.doctor.registry import NotApplicable
from torchpace.trace.model import Trace

Fixture = Callable[[str], Trace]


def test_one_facts_per_trace_and_each_fact_computed_once(trace_fixture: Fixture) -> None:
    trace = trace_fixture("host_sync/event_sync_item")
    facts = facts_of(trace)
    assert facts_of(trace) is facts
    assert facts.kernels is facts.kernels  # kept, not recomputed
    assert facts.sync_points is facts.sync_points
    assert facts.idle_split() is facts.idle_split()
    # What the rules read through Facts is what the facts module computes.
    assert facts.kernels == kernel_columns(trace)


def test_a_trace_without_kernels_is_not_applicable_each_time(trace_fixture: Fixture) -> None:
    facts = facts_of(trace_fixture("cpu_only/gloo_rank34_of300"))
    for _ in range(2):
        with pytest.raises(NotApplicable, match="no GPU kernels"):
            _ = facts.kernels
    assert facts.idle_split() is None  # GPU busy time unknown on a CPU trace


def test_work_is_split_into_compute_and_collective_wait(trace_fixture: Fixture) -> None:
    facts = facts_of(trace_fixture("cpu_only/gloo_rank34_of300"))
    work = facts.work
    assert work.rank == 34
    assert facts.comm is not None and work.wait_ms == facts.comm.exposed_ms
    assert 0 <= work.work_ms <= work.step_ms
