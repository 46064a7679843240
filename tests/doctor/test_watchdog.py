"""The watchdog's escalation stops the script, never the doctor's own work (trace export)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from torchpace.runner.watchdog import Escalation, Watchdog


class _Stop(BaseException):
    pass


@pytest.fixture
def dog() -> Iterator[Watchdog]:
    """A watchdog past its deadline that raises `_Stop` in the main thread at every tick."""
    w = Watchdog(due=lambda: False, on_poke=lambda: None, tick_s=0.01)
    w.escalation = Escalation(async_after_s=0.0, give_up_after_s=1e9)
    w.stop_exception = _Stop
    w.deadline = time.monotonic() - 1.0
    w.in_script = True
    w.start()
    yield w
    w.leave_script()
    w.stop()


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass  # bytecodes: where an asynchronous exception would land


def test_no_stop_lands_inside_the_doctors_work_and_one_follows_it(dog: Watchdog) -> None:
    with dog.busy():
        _spin(0.3)  # the watchdog ticks ~30 times meanwhile
    with pytest.raises(_Stop):
        _spin(30.0)  # the escalation resumes once the work is over


def test_no_stop_after_the_script_ended(dog: Watchdog) -> None:
    with pytest.raises(_Stop):
        _spin(30.0)
    dog.leave_script()
    _spin(0.3)  # would raise if the watchdog still escalated
