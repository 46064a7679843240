"""Header facts (device, rank, vintage) and step detection for a normalised trace."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import msgspec

from torchpace.trace import iterations, warmup
from torchpace.trace._raw import LEGACY_HOST_CAT
from torchpace.trace.events import DeviceProperties, GpuEvent, HostOp, RuntimeCall, Step
from torchpace.trace.kernels import device_from_kernels
from torchpace.trace.names import DATALOADER, OPTIMIZER_STEP, STEP_MARKER, STEP_RANGE
from torchpace.trace.partial import Partial
from torchpace.trace.summary import DeviceKind, StepSource, TraceInfo

_OLD_CATS = frozenset({"Operator", "Kernel", "Runtime", "Memcpy", "Memset"})
_AMD = re.compile(r"AMD|Radeon|Instinct|\bMI\d{3}", re.I)
NO_STEPS_NOTE = (
    "no ProfilerStep# events: the whole trace is analysed as one window; "
    "call prof.step() once per iteration for per-step results"
)
WINDOW_DETAIL = (
    "none found: no ProfilerStep# markers and no repeating DataLoader, optimizer or backward "
    "markers, so the whole trace is analysed as one window"
)


def main_thread(host: Sequence[HostOp]) -> int:
    """The thread running the training loop: the one with ProfilerStep#, else the busiest."""
    for op in host:
        if op.name.startswith((STEP_MARKER, DATALOADER, OPTIMIZER_STEP)):
            return op.tid
    busy: Counter[int] = Counter()
    for op in host:
        busy[op.tid] += 1
    return busy.most_common(1)[0][0] if busy else 0


class StepsFound(msgspec.Struct, frozen=True):
    """The steps of a trace, how they were found (a source and a sentence), and notes."""

    steps: tuple[Step, ...]
    source: StepSource
    detail: str
    notes: list[str]


def _profiler_steps(host: Sequence[HostOp]) -> tuple[Step, ...]:
    seen: dict[int, Step] = {}
    for op in host:
        if op.name.startswith(STEP_MARKER):
            found = STEP_RANGE.match(op.name)
            if found and int(found.group(1)) not in seen:
                seen[int(found.group(1))] = Step(int(found.group(1)), op.ts_us, op.dur_us)
    return tuple(sorted(seen.values(), key=lambda s: s.ts_us))


def _window(host: Sequence[HostOp], gpu: Sequence[Sequence[GpuEvent]]) -> tuple[Step, ...]:
    starts = [o.ts_us for o in host] + [g.ts_us for lane in gpu for g in lane]
    ends = [o.end_us for o in host] + [g.end_us for lane in gpu for g in lane]
    if not starts:
        return ()
    return (Step(0, min(starts), max(ends) - min(starts)),)


def _found(host: Sequence[HostOp], gpu: Sequence[Sequence[GpuEvent]], main_tid: int) -> StepsFound:
    steps = _profiler_steps(host)
    if steps:
        n = len(steps)
        detail = f"{n} ProfilerStep# range{'s' if n != 1 else ''} (prof.step() once per iteration)"
        return StepsFound(steps, "profiler-step", detail, [])
    inferred = iterations.infer(host, main_tid)
    if inferred is not None:
        return StepsFound(inferred.steps, inferred.source, inferred.detail, [])
    return StepsFound(_window(host, gpu), "window", WINDOW_DETAIL, [NO_STEPS_NOTE])


def steps_of(
    host: Sequence[HostOp],
    gpu: Sequence[Sequence[GpuEvent]],
    main_tid: int,
    runtime: Sequence[RuntimeCall] = (),
) -> StepsFound:
    """ProfilerStep#N ranges in time order; without them, iterations inferred from the loop's
    markers (torchpace.trace.iterations); without those, one window over the whole trace.

    The leading steps that are warm-up or one-off phases are labelled (torchpace.trace.warmup).
    """
    found = _found(host, gpu, main_tid)
    first = min((lane[0].ts_us for lane in gpu if lane), default=None)  # lanes sorted by start
    steps = warmup.label_warmup(found.steps, runtime, first)
    return StepsFound(steps, found.source, found.detail, found.notes)


def _device_kind(
    devices: Sequence[DeviceProperties], runtime: Sequence[RuntimeCall], has_gpu: bool
) -> DeviceKind:
    if any(r.name.startswith("hip") for r in runtime[:200]) or any(
        _AMD.search(d.name) for d in devices
    ):
        return "rocm"
    return "cuda" if has_gpu or runtime or devices else "cpu"


def _capability(
    dev: DeviceProperties | None, kernels: Sequence[GpuEvent], notes: list[str]
) -> tuple[tuple[int, int] | None, str | None]:
    """The compute capability and where it comes from; from kernel names when the trace has no
    deviceProperties (torch < 1.13 writers, some ROCm ones)."""
    if dev is not None and dev.compute_capability is not None:
        return dev.compute_capability, "deviceProperties"
    if not kernels:
        return None, None
    found = device_from_kernels(dict.fromkeys(k.name for k in kernels))  # first-seen order
    if found.compute_capability is None:
        return None, None
    major, minor = found.compute_capability
    example = found.evidence.removeprefix("void ").split("(")[0][:60]
    notes.append(
        f"no deviceProperties: compute capability {major}.{minor} or newer, read from kernel "
        f"names (e.g. {example})"
    )
    return found.compute_capability, "kernel names"


def _flag(value: int | bool | None, evidence: bool) -> bool | None:
    if value is not None:
        return bool(value)
    return True if evidence else None


def make_info(
    part: Partial,
    path: str,
    devices: Sequence[DeviceProperties],
    *,
    has_gpu: bool,
) -> TraceInfo:
    """The report header for one trace."""
    raw, host = part.header, part.host
    dist = raw.distributedInfo
    kind = _device_kind(devices, part.runtime, has_gpu)
    dev = devices[0] if devices and kind != "cpu" else None
    notes = []
    if part.unknown:
        listed = ", ".join(f"{c} ({n})" for c, n in Counter(part.unknown).most_common())
        notes.append(f"ignored events of unknown categories: {listed}")
    notes += part.notes  # what the decoder could not read
    if kind == "cpu":
        notes.append("CPU-only trace: no device activity recorded")
    elif not has_gpu:
        notes.append("no device activity recorded (CPU activities only); GPU rules are skipped")
    capability, source = (None, None) if kind == "cpu" else _capability(dev, part.kernels, notes)
    return TraceInfo(
        path=path,
        device_kind=kind,
        device_name=dev.name if dev else None,
        compute_capability=capability,
        compute_capability_source=source,  # type: ignore[arg-type]
        device_memory_bytes=dev.total_memory_bytes if dev else None,
        rank=dist.rank if dist else None,
        world_size=dist.world_size if dist else None,
        backend=dist.backend if dist else None,
        timestamp_unit="ns" if raw.displayTimeUnit == "ns" else "us",
        vintage=_vintage(part.categories),
        event_count=part.events,
        record_shapes=_flag(raw.record_shapes, any(o.input_dims is not None for o in host[:500])),
        profile_memory=_flag(raw.profile_memory, bool(part.memory.ts_us)),
        notes=tuple(notes),
    )


def _vintage(categories: Sequence[str]) -> str:
    """Which profiler wrote the trace, from its event categories."""
    if LEGACY_HOST_CAT in categories:
        return "torch < 1.8 (pre-Kineto autograd profiler: a bare list of host ops)"
    if not _OLD_CATS.isdisjoint(categories):
        return "torch 1.9-1.10 (Operator/Kernel/Runtime categories)"
    return "torch >= 1.11 (cpu_op/kernel/cuda_runtime categories)"
