"""Slow-step captures under --follow read on real captures: a recompile (with the guard torch
gives) and a rank slow only sometimes (the others wait in their collectives)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch._dynamo
from torch import nn

from torchpace.runner import capture_reading, slow_steps
from torchpace.runner.capture_reading import read_captures
from torchpace.runner.launch import run_distributed
from torchpace.runner.run import DoctorOptions, Target
from torchpace.runner.sensors.compile import recompile_guards
from torchpace.runner.sensors.whole_run import SlowStep
from torchpace.runner.slow_steps import UNEXPLAINED, SlowSteps

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture
def dynamo() -> Iterator[None]:
    """Dynamo with dynamic shapes off (every new batch size compiles again), reset after."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False, recompile_limit=64):
        yield
    torch._dynamo.reset()


def test_a_captured_recompile_is_read_with_the_guard_torch_gives(
    tmp_path: Path, dynamo: None
) -> None:
    # 24 layers: dynamo traces each one, so compiling takes far longer than a step
    model = nn.Sequential(*(nn.Linear(32, 32) for _ in range(24)))
    compiled = torch.compile(model, backend="eager")

    def step(batch: int) -> None:
        compiled(torch.randn(batch, 32)).sum().backward()

    step(8)  # the first compile, before the capture
    slow = SlowSteps(tmp_path, contextlib.nullcontext)
    slow.next_step = 3  # predicted: the capture holds steps 2-4, step 3 the slow one
    slow.boundary(1, may_start=True)
    assert slow.capturing
    for n, batch in ((2, 8), (3, 9), (4, 9)):  # step 3: a new batch size, compiled again
        step(batch)
        slow.boundary(n, may_start=False)
    assert not slow.capturing
    ((first, last, path),) = slow.captures
    assert (first, last) == (2, 4) and Path(path).exists()
    kept = [SlowStep(step=3, at_s=1.0, ms=500.0, median_ms=5.0, cause=UNEXPLAINED)]
    (read,), notes = read_captures(kept, slow.captures, recompile_guards())
    assert notes == []
    assert read.cause.startswith(capture_reading.RECOMPILE), read
    assert "size mismatch at index 0. expected 8, actual 9" in read.cause, read
    assert "compiling" in read.evidence and read.trace == path


@pytest.mark.distributed
def test_a_rank_slow_only_sometimes_is_read_as_a_straggler_on_the_other(tmp_path: Path) -> None:
    # Rank 1 stalls 2 s every 10th step: both ranks' steps then are slow. Rank 1's capture shows
    # its own Python; rank 0's shows it waiting in the all-reduce.
    options = DoctorOptions(out_dir=tmp_path / "out", warmup=2, steps=3, follow=True)
    outcomes = run_distributed(Target(str(SCRIPTS / "ddp_sometimes_slow.py")), options, 2)
    assert [o.rank for o in outcomes] == [0, 1]
    read: dict[int, set[str]] = {}
    for o in outcomes:
        assert o.result.exit_code == 0, o.result.error
        whole = o.result.inspection.whole_run
        assert whole is not None
        stalls = [s for s in whole.account.slow_steps if s.ms >= 1500]
        assert len(stalls) >= 3, whole.account.slow_steps  # 6 stalls, the first before a median
        captured = [s for s in stalls if s.trace]
        assert captured, whole.account
        assert all(s.trace.endswith(f"-rank{o.rank}.pt.trace.json.gz") for s in captured)
        read[o.rank] = {s.cause for s in captured}
    assert read[0] == {capture_reading.STRAGGLER}, read
    assert read[1] == {capture_reading.PHASE_CAUSE["other"]}, read


CAPTURE = Path(__file__).parents[1] / "fixtures/traces/slow_step_capture"


def test_a_step_slower_in_every_phase_is_read_as_such_not_by_its_largest_phase() -> None:
    """ignite's CIFAR-10 example, an epoch's first step captured while its workers started: 649
    ms against ~132, its extra spread over every phase (optimizer +194 ms the most): it was read
    as 'a slower optimizer step'."""
    path = str(CAPTURE / "ignite_cifar10_epoch_start.pt.trace.json.gz")
    kept = [SlowStep(step=63, at_s=13.9, ms=655.0, median_ms=114.0, cause=UNEXPLAINED)]
    (read,), notes = read_captures(kept, [(63, 65, path)], {})
    assert notes == [] and read.cause == capture_reading.SPREAD, read
    assert "optimizer +194 ms, forward +" in read.evidence and read.trace == path
    # A slow step its activities explained keeps its cause, inside a capture too.
    evaluation = replace(kept[0], cause=slow_steps.ACTIVITY["evaluation"], evidence="inside")
    (same,), _ = read_captures([evaluation], [(63, 65, path)], {})
    assert same == evaluation
