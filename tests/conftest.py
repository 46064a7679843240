"""Shared pytest set-up: GPU-only tests skip cleanly on machines without CUDA; the one loader of
recorded trace fixtures."""

from __future__ import annotations

import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from trace_fixtures import recorded

if TYPE_CHECKING:
    from torchpace.trace import Trace


@pytest.fixture(scope="session")
def trace_fixture() -> Callable[[str], Trace]:
    """Load tests/fixtures/traces/`<scenario>/<name>`.json.gz once per session."""
    return recorded


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """Each test leaves SIGINT and SIGTERM as it found them. Tests run scripts and libraries
    in-process, and one of them left SIGINT changed: the Ctrl-C test, which passes alone, saw its
    script run to the end in two full-suite runs (exit 0, not 130). Not SIGCHLD: torch sets its
    DataLoader handler once per process, and putting the old one back hid dead workers from every
    later loader (a SIGKILLed worker was found only by the 20 s timeout)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in kept.items():
        if handler is not None and signal.getsignal(number) is not handler:
            signal.signal(number, handler)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU; run on the GPU machine")
    skip_browser = pytest.mark.skip(
        reason="headless Chromium is not installed (apt-get install chromium)"
    )
    cuda = _has_cuda()
    browser = shutil.which("chromium") is not None or shutil.which("chromium-browser") is not None
    for item in items:
        if "cuda" in item.keywords and not cuda:
            item.add_marker(skip_cuda)
        if "browser" in item.keywords and not browser:
            item.add_marker(skip_browser)
