"""The census's pick of live objects from gc, beside a thread that builds tuples: gc's list of
every object must never be held while that thread runs, or its `tuple(genexpr)` dies with
"SystemError: ... tupleobject.c ... bad argument to internal function" (a DataLoader prefetch
thread did so in a test run). Two such threads beside 40 picks: the former pick failed this test
(or hung it) in 5 of 6 runs."""

from __future__ import annotations

import sys
import threading

import torch

from torchpace.runner.sensors.memory_census import live_objects


def test_a_thread_building_tuples_survives_the_pick() -> None:
    stop = threading.Event()
    built: list[int] = []
    died: list[BaseException] = []

    def build() -> None:
        try:
            while not stop.is_set():
                built.append(len(tuple(x for x in range(20))))
        except BaseException as exc:  # what a user's thread would die of
            died.append(exc)

    threads = [threading.Thread(target=build, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    model = torch.nn.Linear(2, 2)
    try:
        for _ in range(40):
            picked = live_objects((torch.nn.Module, torch.Tensor))
            assert any(o is model for o in picked) and any(o is model.weight for o in picked)
            assert all(isinstance(o, torch.nn.Module | torch.Tensor) for o in picked)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert not died, repr(died[0])
    assert built, "the tuple-building thread never ran beside the pick"


def test_the_pick_keeps_no_reference_behind() -> None:
    """The pick's own buffers must not outlive it (a tee's did, in a cycle with gc's list)."""
    held = [object()]
    before = sys.getrefcount(held)
    live_objects((torch.nn.Module,))
    assert sys.getrefcount(held) == before
