"""The watchdog's escalation stops the script, never the doctor's own work (trace export).

Its ticks are driven by the test, one at a time in the main thread (no ticking thread): a tick
that finds the deadline past raises the stop at once, so what each tick does is certain on a busy
machine too (a ticking thread once raised a stop into pytest itself there, after the test ended).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from torchpace.runner.watchdog import Escalation, Watchdog


class _Stop(BaseException):
    pass


@pytest.fixture
def dog() -> Iterator[Watchdog]:
    """A watchdog past its deadline whose every tick would raise `_Stop` in the main thread."""
    w = Watchdog(due=lambda: False, on_poke=lambda: None)
    w.escalation = Escalation(async_after_s=0.0, give_up_after_s=1e9)
    w.stop_exception = _Stop
    w.deadline = time.monotonic() - 1.0
    w.in_script = True
    yield w
    w.leave_script()


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass  # bytecodes: where an asynchronous exception would land


def _tick(dog: Watchdog) -> None:
    dog._tick()
    _spin(0.01)  # a raised stop lands here, at the next bytecodes


def test_no_stop_lands_inside_the_doctors_work_and_one_follows_it(dog: Watchdog) -> None:
    with dog.busy():
        for _ in range(30):
            _tick(dog)  # the doctor's work: no tick raises
    with pytest.raises(_Stop):
        _tick(dog)  # the escalation resumes once the work is over
        _spin(30.0)


def test_no_stop_after_the_script_ended(dog: Watchdog) -> None:
    with pytest.raises(_Stop):
        _tick(dog)
        _spin(30.0)
    dog.leave_script()
    for _ in range(30):
        _tick(dog)  # would raise if the watchdog still escalated
