"""The memory sensor: what the training state holds at the end of the profiled window, and what was
held when the script ran out of memory.

At the window's end (a step boundary, the profiler still recording) it takes a census
(memory_census.py), so the memory view can name each block of the step's peak. When the script
dies of out-of-memory (CUDA's OutOfMemoryError, the host's MemoryError or a failed CPU allocation,
e.g. under `ulimit -v`), it records the moment: the census, the allocator's counters and (on CUDA)
its snapshot of segments and blocks with the Python frames that made each, the failed request,
the line and the modules running. `MemoryRecord` is its record (plain data).
"""

from __future__ import annotations

import contextlib
import re
import resource
import sys
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from torchpace.environment.process import proc_kib
from torchpace.runner.patching import display_path
from torchpace.runner.sensors.memory_census import Census, live_objects, take_census
from torchpace.runner.sensors.memory_snapshot import SnapshotSummary, summarize_snapshot
from torchpace.trace.stacks import SourceLocation, is_user_file

# CUDA: "Tried to allocate 2.00 GiB"; CPU: "you tried to allocate 8589934592 bytes".
_REQUEST = re.compile(r"tried to allocate ([\d.]+)\s*(bytes|[KMGT]iB)?", re.IGNORECASE)
_UNITS = {None: 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
SEQUENTIAL = "the model (an nn.Sequential, in segments)"
_HOST_OOM = ("DefaultCPUAllocator: can't allocate memory", "Cannot allocate memory")
# A DataLoader worker's error, re-raised in the training process ("Caught MemoryError in DataLoader
# worker process 0.\nOriginal Traceback ..."), or a worker killed outright, most often by the
# kernel's out-of-memory killer (its SIGCHLD handler's error, the cause of "exited unexpectedly").
_WORKER = re.compile(r"Caught \w+ in (DataLoader worker process \d+)")
_KILLED = re.compile(r"DataLoader worker \(pid (\d+)\) is killed by signal: Killed")
# torch's check after a worker vanished mid-batch (its tensors' file descriptors refused): which
# signal ended it is in what torch's SIGCHLD check said, if the doctor held that check meanwhile.
_EXITED = re.compile(r"DataLoader worker \(pid\(s\) ([\d, ]+)\) exited unexpectedly")
_TB_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


@dataclass(frozen=True)
class OomRecord:
    """The moment the script ran out of memory."""

    kind: str  # "cuda" or "host"
    message: str  # the error's first line
    requested_bytes: int | None  # the allocation that failed
    where: SourceLocation | None  # the innermost line of the user's code
    modules: tuple[str, ...]  # modules whose forward was running, outermost first
    held: Census  # what was alive then, on the device that ran out
    batch_size: int | None  # the first dimension of the outermost module's input
    repeated: tuple[str, int] | None  # ("h", 12): the model's repeated blocks (checkpoint targets)
    allocated_bytes: int | None = None  # CUDA allocator: in tensors
    reserved_bytes: int | None = None  # CUDA allocator: held from the driver
    capacity_bytes: int | None = None  # the device's memory, or the host's limit (RLIMIT_AS)
    in_use_bytes: int | None = None  # host: the address space in use (VmSize) when it failed
    snapshot: SnapshotSummary | None = None  # CUDA allocator snapshot (history recorded)
    # The process that ran out: "" the script's own; "DataLoader worker process 0" (its error
    # re-raised here: `held` and the rest are then empty, the training process's are not its);
    # "rank 1" (torchrun: set when the ranks' records are gathered).
    process: str = ""
    killed: bool = False  # the process was killed (SIGKILL), not told: no error was raised in it
    # `repeated` is a plain nn.Sequential's children (no repeated blocks): checkpoint it in segments
    checkpoint_segments: bool = False


@dataclass(frozen=True)
class Growth:
    """Tensors outside the model and optimizer that the profiled steps added and kept (a list that
    collects outputs, a running total that keeps its graph): memory that grows until it runs out."""

    bytes: int  # other tensors and activations alive at the window's end, less at its start
    steps: int  # the steps between the two censuses
    largest: tuple[str, ...]  # the largest new ones: "tensor (64, 1024) float32, 256.0 KiB"


@dataclass(frozen=True)
class MemoryRecord:
    """The memory sensor's record: the census at the window's end, and the OOM if one ended it."""

    census: Census | None = None
    oom: OomRecord | None = None
    history: bool = False  # the CUDA allocator recorded where each block was made
    growth: Growth | None = None  # None: nothing kept grew over the window (or no window)
    # CUDA: the allocator's own peaks since the start (torch.cuda.memory_stats) and its retries
    # (cudaFree + cudaMalloc when a request did not fit the cache).
    cuda_peak_allocated_bytes: int | None = None
    cuda_peak_reserved_bytes: int | None = None
    cuda_alloc_retries: int | None = None


def oom_kind(exc: BaseException) -> str | None:
    """ "cuda", "host" or None: whether an exception is an out-of-memory, and whose."""
    torch = sys.modules.get("torch")
    cuda_oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if cuda_oom is not None and isinstance(exc, cuda_oom):
        return "cuda"
    if isinstance(exc, MemoryError):
        return "host"
    text = str(exc)
    if isinstance(exc, RuntimeError) and any(_KILLED.search(t) for t in _chain(exc)):
        return "host"
    if isinstance(exc, RuntimeError) and any(s in text for s in _HOST_OOM):
        return "host"
    if isinstance(exc, RuntimeError) and "CUDA out of memory" in text:
        return "cuda"
    return None


def requested_bytes(message: str) -> int | None:
    """The failed request's size, read from the error message."""
    found = _REQUEST.search(message)
    if found is None:
        return None
    return int(float(found[1]) * _UNITS[(found[2] or "bytes").lower()])


class MemorySensor:
    """Census at the window's end; the out-of-memory moment, when one ends the script."""

    def __init__(self) -> None:
        self.census: Census | None = None
        self.start: Census | None = None
        self.growth: Growth | None = None
        self.cuda_stats: tuple[int | None, int | None, int | None] = (None, None, None)
        self.oom: OomRecord | None = None
        self.history = False

    def install(self, *, enabled: bool) -> None:
        """On CUDA, have the allocator keep where each live block was made (its state only, not
        a history of events: a Python stack per live block)."""
        torch = sys.modules.get("torch")
        if not enabled or torch is None or not torch.cuda.is_available():
            return
        with contextlib.suppress(Exception):
            torch.cuda.memory._record_memory_history(
                enabled="state", context="alloc", stacks="python"
            )
            self.history = True

    def restore(self) -> None:
        if self.history:
            with contextlib.suppress(Exception):
                sys.modules["torch"].cuda.memory._record_memory_history(enabled=None)

    def window_start(self, *, cuda: bool) -> None:
        """The profiled window starts at a step boundary: what is alive, to compare at its end."""
        with contextlib.suppress(Exception):
            self.start = take_census("cuda" if cuda else "cpu")

    def window_end(self, *, cuda: bool, steps: int) -> None:
        """The profiled window ends: name what is alive (never raises). `steps`: the steps it
        profiled, ending at a step boundary; 0 when cut mid-step (nothing is judged kept then)."""
        with contextlib.suppress(Exception):
            self.census = take_census("cuda" if cuda else "cpu", step_boundary=steps > 0)
            if self.start is not None:
                self.growth = growth(self.start, self.census, steps)
            if cuda:
                self.cuda_stats = _cuda_stats(sys.modules["torch"])

    def on_error(self, exc: BaseException) -> None:
        """The script raised `exc`: record the moment when it is an out-of-memory."""
        kind = oom_kind(exc)
        if kind is None:
            return
        with contextlib.suppress(Exception):
            self.oom = _oom_record(kind, exc, self.history)

    def record(self) -> MemoryRecord:
        return MemoryRecord(self.census, self.oom, self.history, self.growth, *self.cuda_stats)


KEPT = ("other", "activations")
MIN_GROWTH_BYTES = 1 << 20  # less is a batch of another size, not a tensor kept step after step


def growth(start: Census, end: Census, steps: int) -> Growth | None:
    """What the window added to the tensors outside the model and optimizer, when it grew."""
    before = sum(b.bytes for b in start.blocks if b.category in KEPT)
    after = [b for b in end.blocks if b.category in KEPT]
    added = sum(b.bytes for b in after) - before
    if added < MIN_GROWTH_BYTES or steps < 1:
        return None
    known = {b.addr for b in start.blocks}
    new = [b for b in after if b.addr not in known][:3]
    names = tuple(f"{b.name} {list(b.shape)} {b.dtype}, {b.bytes / 2**20:.1f} MiB" for b in new)
    return Growth(added, steps, names)


def _cuda_stats(torch: Any) -> tuple[int | None, int | None, int | None]:
    stats = torch.cuda.memory_stats()
    return (
        stats.get("allocated_bytes.all.peak"),
        stats.get("reserved_bytes.all.peak"),
        stats.get("num_alloc_retries"),
    )


def _chain(exc: BaseException) -> list[str]:
    """The texts of an exception and of those it was raised from or during."""
    texts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(texts) < 5:
        texts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return texts


def worker_oom(exc: BaseException) -> OomRecord | None:
    """The record of a DataLoader worker that ran out of memory, read from the error the
    training process got; None when no worker did."""
    for text in (*_chain(exc), *_held_deaths(exc)):
        if (killed := _KILLED.search(text)) is not None:
            process, message, where = f"DataLoader worker (pid {killed[1]})", killed[0], None
            break
        if (caught := _WORKER.search(text)) is not None:
            process, message = caught[1], text.strip().splitlines()[-1]  # the worker's error
            frames = _TB_FRAME.findall(text[caught.end() :])  # its traceback, innermost last
            user = [(f, int(n), fn) for f, n, fn in frames if is_user_file(f)]
            where = SourceLocation(display_path(user[-1][0]), *user[-1][1:]) if user else None
            break
    else:
        return None
    return OomRecord(
        kind="host", message=message[:300], requested_bytes=requested_bytes(message), where=where,
        modules=(), held=Census("cpu", ()), batch_size=None, repeated=None, process=process,
        killed=killed is not None,
    )  # fmt: skip


def _held_deaths(exc: BaseException) -> list[str]:
    """What torch's held SIGCHLD check said of the workers an "exited unexpectedly" names."""
    from torchpace.runner.watchdog import dead_workers

    pids = [p for text in _chain(exc) if (m := _EXITED.search(text)) for p in m[1].split(", ")]
    return [said for said in dead_workers() if any(f"(pid {p})" in said for p in pids)]


def _oom_record(kind: str, exc: BaseException, history: bool) -> OomRecord:
    import torch

    worker = worker_oom(exc)
    if worker is not None:  # the training process's memory is not what ran out
        return worker
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    frames = _frames(exc.__traceback__)
    modules, batch = _modules_running(frames, torch.nn.Module)
    held = take_census("cuda" if kind == "cuda" else "cpu")
    repeated = _repeated_blocks(torch.nn.Module)
    record = OomRecord(
        kind=kind,
        message=message[:300],
        requested_bytes=requested_bytes(str(exc)),
        where=_user_line(frames),
        modules=modules,
        held=held,
        batch_size=batch,
        repeated=repeated,
        checkpoint_segments=repeated is not None and repeated[0] == SEQUENTIAL,
    )
    if kind == "cuda":
        return _with_cuda(record, torch, history)
    return _with_host(record)


def _frames(tb: TracebackType | None) -> list[Any]:
    out = []
    while tb is not None:
        out.append(tb.tb_frame)
        tb = tb.tb_next
    return out


def _user_line(frames: list[Any]) -> SourceLocation | None:
    for frame in reversed(frames):
        file = frame.f_code.co_filename
        if is_user_file(file):
            return SourceLocation(display_path(file), frame.f_lineno, frame.f_code.co_name)
    return None


# complex: the modules on the stack and the batch size from the outermost one's arguments, read from
# the same frames.
def _modules_running(frames: list[Any], module_type: type) -> tuple[tuple[str, ...], int | None]:
    """The modules whose forward was on the stack (outermost first) and the batch size: the first
    dimension of the outermost one's first tensor argument."""
    modules: list[Any] = []
    for frame in frames:
        owner = frame.f_locals.get("self")
        forward = isinstance(owner, module_type) and frame.f_code.co_name == "forward"
        if forward and (not modules or modules[-1] is not owner):
            modules.append(owner)
    batch = None
    if modules:
        outer = next(
            f
            for f in frames
            if f.f_locals.get("self") is modules[0] and f.f_code.co_name == "forward"
        )
        for value in outer.f_locals.values():
            if hasattr(value, "shape") and len(value.shape) > 0 and value is not modules[0]:
                batch = int(value.shape[0])
                break
    names = _module_names(modules[0]) if modules else {}
    return tuple(names.get(id(m), type(m).__name__) for m in modules), batch


def _module_names(root: Any) -> dict[int, str]:
    return {id(m): f"{name or 'model'} ({type(m).__name__})" for name, m in root.named_modules()}


def _repeated_blocks(module_type: type) -> tuple[str, int] | None:
    """The largest run of same-class children in the largest model (ModuleList / Sequential of
    transformer blocks, ResNet stages): where activation checkpointing goes."""
    models = live_objects((module_type,))
    if not models:
        return None
    root = max(models, key=lambda m: sum(p.numel() for p in m.parameters()))
    best: tuple[str, int] | None = None
    for name, m in root.named_modules():
        kids = list(m.children())
        same = len(kids) >= 2 and len({type(k) for k in kids}) == 1
        if same and (best is None or len(kids) > best[1]):
            best = (f"{name or 'model'} ({type(kids[0]).__name__})", len(kids))
    count = len(list(root.children()))
    if best is None and type(root).__name__ == "Sequential" and count >= 3:
        best = (SEQUENTIAL, count)  # no repeated blocks: checkpoint the Sequential in segments
    return best


def _with_cuda(record: OomRecord, torch: Any, history: bool) -> OomRecord:
    from dataclasses import replace

    stats = torch.cuda.memory_stats()
    snapshot = None
    if history:
        with contextlib.suppress(Exception):
            snapshot = summarize_snapshot(torch.cuda.memory._snapshot())
    _, total = torch.cuda.mem_get_info()
    with contextlib.suppress(Exception):  # set_per_process_memory_fraction caps the allocator
        total = int(total * min(1.0, torch.cuda.get_per_process_memory_fraction()))
    return replace(
        record,
        allocated_bytes=int(stats.get("allocated_bytes.all.current", 0)),
        reserved_bytes=int(stats.get("reserved_bytes.all.current", 0)),
        capacity_bytes=int(total),
        snapshot=snapshot,
    )


def _with_host(record: OomRecord) -> OomRecord:
    from dataclasses import replace

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    limit = None if soft == resource.RLIM_INFINITY else int(soft)
    return replace(
        record, capacity_bytes=limit, in_use_bytes=proc_kib("/proc/self/status", "VmSize")
    )


def address_limit() -> int:
    """The soft address-space limit (RLIMIT_AS) now."""
    return int(resource.getrlimit(resource.RLIMIT_AS)[0])


def lift_address_limit(saved: int) -> str:
    """Put back the soft RLIMIT_AS the process had before the script lowered it (the script's cap
    is for the script: the doctor still has its trace to analyse); the note saying so, or ""."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == saved or (soft != resource.RLIM_INFINITY and saved != resource.RLIM_INFINITY
                         and soft > saved):  # fmt: skip
        return ""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (saved, hard))
        return (
            f"the script capped its address space (RLIMIT_AS) at {soft / 2**20:.0f} MiB; the "
            "doctor lifted the cap after the script ended, to analyse its trace"
        )
    return ""


__all__ = ["MemoryRecord", "MemorySensor", "OomRecord", "oom_kind", "requested_bytes"]
