"""Skip the tear-down of a short command: the start-up and exit shortcuts in one context manager.

`torchpace analyze` builds hundreds of thousands of small acyclic objects and then ends. Inside
`no_teardown()` (which the command line's entry point enters for such a command):
- the cyclic GC is off: its passes over the trace model find nothing (~30 ms);
- what the trace loader decodes is kept alive (it calls `keep`) rather than freed as soon as each
  step is done with it: freeing 200k decoded events and their typed events costs ~45 ms that the
  OS does for free at exit;
- `finish(code)` flushes stdout and stderr and ends the process with os._exit: no freeing at
  exit (a tenth of a second on a large trace).
Outside it nothing changes: a library caller, or a test calling `main([...])`, gets its memory back
and its return value. Standard library only: it is entered before the trace is read.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import os
import sys
from collections.abc import Callable, Iterator

# What the loader handed over to be kept until exit; None: not inside no_teardown().
_KEPT: contextvars.ContextVar[list[object] | None] = contextvars.ContextVar(
    "torchpace_kept", default=None
)


def keep(obj: object) -> None:
    """Keep `obj` alive until the process ends, inside no_teardown(); elsewhere do nothing."""
    kept = _KEPT.get()
    if kept is not None:
        kept.append(obj)


@contextlib.contextmanager
def no_teardown(enabled: bool = True) -> Iterator[Callable[[int], int]]:
    """Yield `finish(code)`: with `enabled`, GC off and decoded data kept meanwhile, and finish
    ends the process with `code`; without, finish returns `code` and nothing else changes."""
    if not enabled:
        yield _same
        return
    gc_was_on = gc.isenabled()
    gc.disable()
    token = _KEPT.set([])
    try:
        yield _exit_now
    finally:  # an error on the way: the caller returns normally, with its memory back
        _KEPT.reset(token)
        if gc_was_on:
            gc.enable()


@contextlib.contextmanager
def freed() -> Iterator[None]:
    """Inside no_teardown too, let what is decoded meanwhile be freed once done with (a folder's
    ranks, each summarised and dropped: trace.load.load_rank)."""
    token = _KEPT.set(None)
    try:
        yield
    finally:
        _KEPT.reset(token)


def _same(code: int) -> int:
    return code


def _exit_now(code: int) -> int:
    """Flush and end the process without tearing down what the command built."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe: nothing to save
            stream.flush()
    os._exit(code)
