"""The script's traceback as the doctor shows it, when a signal handler raises while it is formatted."""

from __future__ import annotations

import signal
import traceback
from pathlib import Path

import pytest

import torchpace
from torchpace.runner import run
from torchpace.runner.watchdog import drop_loader_sigchld, restore_loader_sigchld


def test_an_exception_raised_while_formatting_is_shown_chained_not_ours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch's SIGCHLD handler raised 'DataLoader worker ... is killed' inside the formatting of
    the script's first error; the user saw a torchpace traceback (1 run in ~10 of test_robust)."""
    real = traceback.TracebackException
    calls = []

    def once(*args: object, **kwargs: object) -> traceback.TracebackException:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("DataLoader worker (pid 1) is killed by signal: Killed.")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(traceback, "TracebackException", once)
    try:
        raise ConnectionResetError("Connection reset by peer")
    except ConnectionResetError as exc:
        shown = run._user_traceback(exc)
    assert "DataLoader worker (pid 1) is killed" in shown
    assert "Connection reset by peer" in shown  # the first error, chained
    assert str(Path(torchpace.__file__).parent) not in shown  # no frame of torchpace's package


def test_torchs_loader_signal_handler_is_dropped_once_the_script_failed() -> None:
    from torch.utils.data._utils import signal_handling

    before = signal.getsignal(signal.SIGCHLD)
    was_set = signal_handling._SIGCHLD_handler_set
    signal_handling._SIGCHLD_handler_set = False
    try:
        signal_handling._set_SIGCHLD_handler()
        torchs = drop_loader_sigchld()
        assert torchs is not None and torchs.__module__.startswith("torch.")
        # A Python no-op, not SIG_DFL: a SIGCHLD pending meanwhile would raise "Signal 17
        # ignored due to race condition" in the script.
        handler = signal.getsignal(signal.SIGCHLD)
        assert callable(handler) and handler.__module__ == "torchpace.runner.watchdog"
        handler(signal.SIGCHLD, None)  # raises nothing
        # The doctor's teardown over, torch's handler is back: torch installs it once per
        # process, and a process that goes on would not watch its workers again.
        restore_loader_sigchld(torchs)
        assert signal.getsignal(signal.SIGCHLD) is torchs
    finally:
        signal.signal(signal.SIGCHLD, before)
        signal_handling._SIGCHLD_handler_set = was_set
