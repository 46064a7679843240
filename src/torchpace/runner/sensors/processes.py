"""Processes the script starts itself (torch.multiprocessing hogwild, mp.spawn, Pool): a sensor.

The doctor profiles the process it runs in. When the training happens in child processes, the
profile of the parent (blocked in join()) says nothing about it; this sensor records which
processes the script started, from where, with which target, and how much CPU they used, so the
report can say that the training ran elsewhere and what to run instead.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from torchpace.runner.load import process_cpu_s
from torchpace.runner.patching import Patcher, user_location
from torchpace.trace.stacks import SourceLocation

# Process targets that are torch's own machinery, not the script's training.
_LIBRARY_TARGETS = ("torch.utils.data", "multiprocessing.", "concurrent.futures")


@dataclass(frozen=True)
class ChildProcesses:
    """Processes the script started itself (torch.multiprocessing, mp.spawn, a Pool)."""

    count: int
    target: str  # the function they run, "module.function"
    started_at: SourceLocation | None
    cpu_s: float  # CPU seconds they used while the doctor watched
    main_cpu_s: float  # CPU seconds the doctored process used over the same run

    def did_the_work(self) -> bool:
        """Whether they, not the doctored process, did most of the computing."""
        return self.cpu_s > self.main_cpu_s


@dataclass
class ChildRecord:
    """One process the script started."""

    pid: int | None
    target: str  # the function it runs, "module.function"
    started_at: SourceLocation | None
    start_time: float = field(default_factory=time.monotonic)
    cpu_s: float = 0.0  # latest reading of its CPU time (it and its own children)
    end_time: float | None = None


def _target_name(proc: Any) -> str:
    target = getattr(proc, "_target", None)
    args: tuple[Any, ...] = tuple(getattr(proc, "_args", ()))
    if getattr(target, "__qualname__", "") == "_wrap" and args and callable(args[0]):
        target = args[0]  # torch.multiprocessing.spawn(fn, ...) runs _wrap(fn, i, args, ...)
        target = getattr(target, "fn", target)  # the doctor's own wrapper (runner/spawned.py)
    if target is None:
        return type(proc).__name__ + ".run"
    module = getattr(target, "__module__", "") or ""
    return f"{module}.{getattr(target, '__qualname__', repr(target))}".lstrip(".")


class ProcessWatch:
    """Patches Process.start; samples the children's CPU time from the watchdog's thread."""

    def __init__(self) -> None:
        self.patcher = Patcher()
        self.children: list[ChildRecord] = []
        self._lock = threading.Lock()
        self._cpu0 = time.process_time()

    def install(self) -> None:
        """Record every process started through multiprocessing (torch.multiprocessing too)."""
        import multiprocessing.process as mp

        self.patcher.wrap(mp.BaseProcess, "start", self._wrap_start)

    def restore(self) -> None:
        """Undo the patch (what was recorded stays)."""
        self.sample()
        self.patcher.restore()

    def _wrap_start(self, original: Any) -> Any:
        watch = self

        def start(proc: Any, *args: Any, **kwargs: Any) -> Any:
            target = _target_name(proc)  # start() deletes proc._target once the child runs
            out = original(proc, *args, **kwargs)
            if not target.startswith(_LIBRARY_TARGETS):
                with watch._lock:
                    watch.children.append(ChildRecord(proc.pid, target, user_location()))
            return out

        return start

    def sample(self) -> None:
        """Read the children's CPU time (cheap; safe from any thread)."""
        with self._lock:
            children = list(self.children)
        now = time.monotonic()
        for child in children:
            if child.end_time is not None or child.pid is None:
                continue
            cpu = process_cpu_s(child.pid)
            if cpu is None:
                child.end_time = now
            else:
                child.cpu_s = max(child.cpu_s, cpu)

    def facts(self) -> ChildProcesses | None:
        """The script's own processes, grouped by their target; None when it started none."""
        if not self.children:
            return None
        first = self.children[0]
        same = [c for c in self.children if c.target == first.target]
        return ChildProcesses(
            count=len(same),
            target=first.target,
            started_at=first.started_at,
            cpu_s=sum(c.cpu_s for c in self.children),
            main_cpu_s=time.process_time() - self._cpu0,
        )
