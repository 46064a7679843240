"""The session's recording: the doctor's torch.profiler window, from its start to a trace on disk.

The session (runner/session.py) decides when; this decides how: what to record (profiling.py's
policy), where the trace goes (a name TensorBoard's profiler plugin lists, in --out, or the temp
folder when the script deleted or filled that), and what to say when something goes wrong.
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path
from typing import Any

from torchpace.policy.threads import local_ranks
from torchpace.runner.load import release_freed_memory
from torchpace.runner.options import DoctorOptions
from torchpace.runner.profiling import Bound, ProfilerWindow, StepFootprint, recording_for

# Set in the script's process when processes it started run under the doctor (runner/spawned.py).
RANKS_STARTED = False


class Recorder:
    """At most one recording at a time; notes say what happened to it."""

    def __init__(
        self, options: DoctorOptions, out_dir: Path, notes: list[str], trace_files: list[str]
    ) -> None:
        self.options = options
        self.out_dir = out_dir  # absolute: the script may chdir
        self.window: ProfilerWindow | None = None
        self.notes = notes  # the session's: appended to in order
        self.trace_files = trace_files
        self.writing = False  # a trace is being written now
        self._starting = False
        self._kept: list[ProfilerWindow] = []  # never stopped here (another thread's, a parent's)

    @property
    def recording(self) -> bool:
        """Whether a recording is running."""
        return self.window is not None

    def owns(self, prof: Any) -> bool:
        """Whether a profiler object is (part of) this recording."""
        own = self.window.prof if self.window is not None else None
        return self._starting or (own is not None and (prof is own or prof is own.profiler))

    def start(self, *, cuda: bool, script: StepFootprint | None = None) -> None:
        """Start recording (what: profiling.recording_for); each step() marks a ProfilerStep#.
        `script`: the script's own memory in its warm-up steps (profiling.StepFootprint)."""
        opts = self.options
        rec = recording_for(cuda=cuda, world_size=opts.world_size, memory=opts.profile_memory)
        window = ProfilerWindow(
            rec, opts.bounds, script=script, local_ranks=local_ranks(), hold=opts.steps
        )
        self._starting = True  # the profiler's own start must not look like the script's
        try:
            window.start()
        finally:
            self._starting = False
        self.window = window
        self.notes.append(rec.describe())

    def step(self) -> None:
        """A profiled step ended."""
        if self.window is not None:
            self.window.step()

    def over_bound(self) -> Bound | None:
        """Which bound the recording reached, if any (any thread)."""
        window = self.window
        return window.over_bound() if window is not None else None

    def next_step_over_bound(self) -> Bound | None:
        """At a step boundary: whether one more step would pass a bound (see ProfilerWindow)."""
        window = self.window
        return window.next_step_over_bound() if window is not None else None

    def describe_bound(self, bound: Bound) -> str:
        """Why the recording was cut, in words."""
        assert self.window is not None
        return self.window.describe_bound(bound)

    def stop(self) -> ProfilerWindow | None:
        """Stop recording; the stopped window, or None when none ran or it could not stop."""
        window, self.window = self.window, None
        if window is None:
            return None
        try:
            window.stop()
        except Exception as exc:  # e.g. a worker's death raised mid-stop: keep the run alive
            self.notes.append(f"the profiler could not stop cleanly ({type(exc).__name__}: {exc})")
            return None
        return window

    def write(self, window: ProfilerWindow, finished: int) -> Path | None:
        """Write a stopped window's trace with `finished` whole steps; the path, or None."""
        path = self.trace_path()
        self.writing = True
        try:
            for folder in (path.parent, Path(tempfile.gettempdir()) / "torchpace-out"):
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                    written = window.export(folder / path.name, finished)
                except Exception as exc:  # the script deleted or filled its folder
                    self.notes.append(f"could not write the trace to {folder}/ ({exc})")
                    if window.prof is None:
                        return None
                    continue
                self.trace_files.append(str(written))
                return written
            return None
        finally:
            self.writing = False
            if window.prof is None:
                release_freed_memory()  # the recording's events, freed by the export

    def discard(self) -> None:
        """Stop and drop the recording (a stronger step signal, or another profiler, took over)."""
        window, self.window = self.window, None
        if window is not None:
            window.discard()
            release_freed_memory()

    def abandon(self) -> None:
        """Let go of the recording without stopping it: it belongs to another thread (torch
        aborts when one thread stops another's profiler) or, after a fork, to the parent
        (freeing it in the child spins in torch 2.13's clean-up)."""
        if self.window is not None:
            self._kept.append(self.window)
            self.window = None

    def trace_path(self) -> Path:
        """Where this process's trace goes: a name TensorBoard's profiler plugin lists."""
        rank = self.options.rank
        # The script's own process, once processes it started run under the doctor as ranks
        # 0, 1, ... in the same folder (runner/spawned.py): its trace never takes rank 0's name.
        name = f"rank{rank}" if rank is not None else "main" if RANKS_STARTED else "rank0"
        return self.out_dir / f"{socket.gethostname()}_{name}.pt.trace.json.gz"
