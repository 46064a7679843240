"""The script died of out-of-memory: what was held, by category and by block, and the fixes that fit."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import msgspec

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import rule
from torchpace.trace.stats import fmt_bytes

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.loader import LoaderFacts
    from torchpace.runner.sensors.memory import MemoryRecord, OomRecord


NO_FRAME = "(no user frame)"
# Cached but unallocated below this share of reserved is the allocator's block rounding: a
# real OOM snapshot (tests/fixtures/snapshots/flexgen_opt_oom) failed with 0.04% cached.
MIN_CACHED_SHARE = 0.02
MAX_ACCUMULATION = 64  # micro-batches: beyond this, a smaller model or sharding is the fix


class MemoryFix(msgspec.Struct, frozen=True):
    """One fix that fits, with its estimated saving."""

    name: (
        str  # kebab-case: "accumulate", "checkpoint", "bf16", "expandable-segments", "kept-tensors"
    )
    what: str  # one line: what to change
    saving_bytes: int
    method: str  # how the saving was estimated
    code: str


def shortfall(oom: OomRecord) -> int | None:
    """How many bytes the failed request lacked; None when the limit is unknown."""
    need = oom.requested_bytes
    if need is None or oom.capacity_bytes is None:
        return None
    if oom.kind == "cuda":
        free_driver = oom.capacity_bytes - (oom.reserved_bytes or 0)
        cached = oom.snapshot.largest_free_bytes if oom.snapshot is not None else 0
        return max(need - max(free_driver, 0) - cached, 0)
    if oom.in_use_bytes is None:
        return None
    return max(need - (oom.capacity_bytes - oom.in_use_bytes), 0)


def _activations(oom: OomRecord) -> int:
    """Activation bytes held, plus the failed request when a forward was running (it would have
    been one)."""
    held = oom.held.bytes_of("activations")
    return held + (oom.requested_bytes or 0) if oom.modules else held


def _accumulate(oom: OomRecord, target: int) -> MemoryFix | None:
    acts = _activations(oom)
    if acts <= 0:
        return None
    k = 2
    while k < MAX_ACCUMULATION and acts * (1 - 1 / k) < target:
        k *= 2
    batch = f"batch {oom.batch_size} -> {oom.batch_size // k}" if oom.batch_size else f"batch / {k}"
    return MemoryFix(
        "accumulate",
        f"a smaller micro-batch ({batch}) with gradient accumulation over {k} micro-batches",
        int(acts * (1 - 1 / k)),
        f"activations scale with the micro-batch: {fmt_bytes(acts)} of activations (with the failed "
        f"request) x (1 - 1/{k})",
        "for micro_x, micro_y in zip(x.chunk(K), y.chunk(K)):   # K = "
        f"{k}\n    loss = loss_fn(model(micro_x), micro_y) / K\n    loss.backward()\n"
        "optimizer.step(); optimizer.zero_grad(set_to_none=True)",
    )


def _checkpoint(oom: OomRecord) -> MemoryFix | None:
    acts = _activations(oom)
    if oom.repeated is None or acts <= 0:
        return None
    name, n = oom.repeated
    if oom.checkpoint_segments:
        n = 2 if n < 6 else 3  # segments: each one's activations are recomputed in backward
        what = f"activation checkpointing of the Sequential model in {n} segments"
        code = (
            "from torch.utils.checkpoint import checkpoint_sequential\n"
            f"out = checkpoint_sequential(model, {n}, x, use_reentrant=False)"
        )
    else:
        what = f"activation checkpointing on each of the {n} blocks of {name}"
        code = (
            "from torch.utils.checkpoint import checkpoint\n"
            "for block in model.blocks:   # the repeated blocks named above\n"
            "    x = checkpoint(block, x, use_reentrant=False)"
        )
    return MemoryFix(
        "checkpoint",
        what,
        int(acts * (1 - 1 / n)),
        f"only one segment's activations live at a time, the {n} segment inputs kept: "
        f"{fmt_bytes(acts)} x (1 - 1/{n}), less the inputs (an upper estimate; costs ~1 extra "
        "forward)",
        code,
    )


def _bf16(oom: OomRecord) -> MemoryFix | None:
    fp32 = sum(
        b.bytes for b in oom.held.blocks if b.category == "activations" and b.dtype == "float32"
    )
    if fp32 <= 0:
        return None
    device = "cuda" if oom.kind == "cuda" else "cpu"
    return MemoryFix(
        "bf16",
        "bf16 activations under autocast",
        fp32 // 2,
        f"the {fmt_bytes(fp32)} of float32 activations held, at 2 bytes a value instead of 4",
        f"with torch.autocast(device_type={device!r}, dtype=torch.bfloat16):\n"
        "    loss = loss_fn(model(x), y)",
    )


def _expandable(oom: OomRecord) -> MemoryFix | None:
    if oom.kind != "cuda" or oom.reserved_bytes is None or oom.allocated_bytes is None:
        return None
    cached = oom.reserved_bytes - oom.allocated_bytes
    if cached < MIN_CACHED_SHARE * oom.reserved_bytes:  # the allocator's rounding, not a fix
        return None
    return MemoryFix(
        "expandable-segments",
        "let the allocator grow segments instead of caching fixed ones",
        cached,
        f"reserved - allocated when it failed: {fmt_bytes(cached)} cached in pieces the request did "
        "not fit (an upper estimate: what expandable segments can reuse)",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py",
    )


def _kept(record: MemoryRecord) -> MemoryFix | None:
    """Tensors the profiled steps kept (census growth), or a graph alive at a step boundary."""
    census, grew = record.census, record.growth
    graphs = [(n, b) for n, b in census.kept_graphs if b > 0] if census is not None else []
    if grew is None and not graphs:
        return None
    if grew is not None:
        what = (
            f"free the tensors kept across steps ({'; '.join(grew.largest) or 'outside the model'})"
        )
        saved = grew.bytes
        method = (
            f"tensors outside the model and optimizer grew {fmt_bytes(grew.bytes)} over "
            f"{grew.steps} profiled steps: that much and more by the time it failed"
        )
    else:
        what = f"free the autograd graph kept across steps ({graphs[0][0]})"
        saved = sum(b for _, b in graphs)
        method = f"the activations a graph alive at a step boundary still saved: {fmt_bytes(saved)}"
    return MemoryFix(
        "kept-tensors",
        what,
        saved,
        method,
        "running_loss += loss.item()   # not `+= loss`: a tensor keeps its whole graph alive\n"
        "outputs.append(out.detach().cpu())  # keep values, not graphs or device memory",
    )


def fixes(oom: OomRecord, record: MemoryRecord | None = None) -> list[MemoryFix]:
    """The fixes that fit what was held, largest saving first."""
    target = shortfall(oom) or oom.requested_bytes or 0
    found = [
        _accumulate(oom, target),
        _checkpoint(oom),
        _bf16(oom),
        _expandable(oom),
        _kept(record) if record is not None else None,
    ]
    return sorted((f for f in found if f is not None), key=lambda f: -f.saving_bytes)


def largest_live(oom: OomRecord, count: int = 5) -> list[dict[str, str | int]]:
    """The largest live allocations and where they were made (CUDA snapshot frames) or what holds
    them (the census: a parameter's name, the autograd node that saved an activation)."""
    if oom.snapshot is not None and oom.snapshot.largest:
        return [
            {"bytes": b.bytes, "where": str(b.where) if b.where else NO_FRAME}
            for b in oom.snapshot.largest[:count]
        ]
    return [
        {"bytes": b.bytes, "category": b.category, "what": f"{b.name} {b.dtype} {list(b.shape)}"}
        for b in oom.held.blocks[:count]
    ]


SAVING_METHOD = (
    "memory, not time: each fix's estimated saving in bytes is in the evidence (fixes), with "
    "how it was estimated"
)


@rule("out-of-memory", input="live")
def out_of_memory(live: Inspection) -> list[Finding]:
    """Explain an out-of-memory that ended the script (CUDA's, or the host's)."""
    record = live.memory
    oom = record.oom if record is not None else None
    if oom is None or record is None:
        return []
    if "DataLoader worker" in oom.process:
        return [_worker_finding(oom, live.loaders)]
    found = fixes(oom, record)
    held: dict[str, int] = {str(c): n for c, n in oom.held.by_category().items()}
    evidence: dict[str, EvidenceValue] = {
        "device": "GPU" if oom.kind == "cuda" else "host",
        "process": oom.process or "the script's",
        "error": oom.message,
        "requested_bytes": oom.requested_bytes,
        "shortfall_bytes": shortfall(oom),
        "capacity_bytes": oom.capacity_bytes,
        "held_bytes": {f"{c.replace(' ', '_')}_bytes": n for c, n in held.items() if n},
        "largest_live": largest_live(oom),  # type: ignore[dict-item]
        "running_modules": list(oom.modules),
        "batch_size": oom.batch_size,
        "fixes": [
            {"fix": f.what, "saving_bytes": f.saving_bytes, "method": f.method} for f in found
        ],
    }
    evidence.update(_allocator(oom))
    return [
        Finding(
            rule="out-of-memory",
            severity=Severity.HIGH,
            summary=_summary(oom, held),
            evidence=evidence,
            fix="\n\n".join(
                f"# {f.what} (saves ~{fmt_bytes(f.saving_bytes)})\n{f.code}" for f in found
            )
            or "# nothing the doctor could size: reduce the batch or the model",
            saving_method=SAVING_METHOD,
            locations=(oom.where,) if oom.where is not None else (),
        )
    ]


def _allocator(oom: OomRecord) -> dict[str, EvidenceValue]:
    """The CUDA allocator's view: reserved vs allocated (fragmentation), the largest free piece;
    the host's: the address space in use against its limit."""
    if oom.kind != "cuda":
        return {"in_use_bytes": oom.in_use_bytes}
    out: dict[str, EvidenceValue] = {
        "reserved_bytes": oom.reserved_bytes,
        "allocated_bytes": oom.allocated_bytes,
        "fragmentation_bytes": (oom.reserved_bytes or 0) - (oom.allocated_bytes or 0),
    }
    if oom.snapshot is not None:
        out["largest_free_block_bytes"] = oom.snapshot.largest_free_bytes
        out["segments"] = oom.snapshot.segments
        out["allocation_sites"] = [  # type: ignore[assignment]
            {"bytes": n, "blocks": count, "where": " < ".join(frames) or NO_FRAME}
            for frames, n, count in oom.snapshot.sites
        ]
    return out


def _summary(oom: OomRecord, held: dict[str, int]) -> str:
    where = f" at {oom.where}" if oom.where is not None else ""
    inside = f" (in {oom.modules[-1]})" if oom.modules else ""
    asked = f" asking for {fmt_bytes(oom.requested_bytes)}" if oom.requested_bytes else ""
    parts = ", ".join(f"{c} {fmt_bytes(n)}" for c, n in held.items() if n)
    device = "GPU" if oom.kind == "cuda" else "host"
    on = f" on {oom.process}" if oom.process else ""
    total = sum(held.values()) or oom.allocated_bytes or 0  # no census: the allocator's count
    text = f"The script ran out of {device} memory{on}{where}{inside}{asked}; {fmt_bytes(total)} "
    text += f"of tensors were held: {parts}" if parts else "of tensors were held"
    if oom.kind == "cuda" and oom.reserved_bytes is not None and oom.allocated_bytes is not None:
        text += f"; {fmt_bytes(oom.reserved_bytes - oom.allocated_bytes)} reserved but unallocated"
    return text + _top_site(oom)


def _top_site(oom: OomRecord) -> str:
    """Where the allocator's snapshot says most live bytes were made, or ""."""
    if oom.snapshot is None or not oom.snapshot.sites or not oom.snapshot.sites[0][0]:
        return ""
    frames, n, _ = oom.snapshot.sites[0]
    share = n / max(oom.snapshot.allocated_bytes, 1)
    chain = " < ".join(re.split(r"[\\/]", f)[-1] for f in frames[:2])
    return f"; {share:.0%} of the allocator's live bytes were made at {chain}"


FEWER_WORKERS = (
    "# each worker holds prefetch_factor batches in flight and its own copy of what the dataset "
    "touches:\nDataLoader(dataset, num_workers={workers}, prefetch_factor=2, "
    "persistent_workers=True)\n"
)
WORKER_FIX = (
    "# keep samples in numpy arrays or a memory-mapped file, not Python lists or dicts (a worker "
    "that reads\n# a Python object copies its page: pytorch/pytorch#13246); read each sample in "
    "__getitem__, not a whole file"
)


def _worker_finding(oom: OomRecord, loaders: tuple[LoaderFacts, ...]) -> Finding:
    """A DataLoader worker ran out of memory (or was killed, most often by the kernel's
    out-of-memory killer): the training process did not, so its memory is not what to cut."""
    workers = max((lo.num_workers for lo in loaders), default=0)
    if oom.killed:
        what = (
            f"{oom.process} was killed by SIGKILL, which on Linux is most often the kernel's "
            f"out-of-memory killer (dmesg says 'Out of memory: Killed process')"
        )
    else:
        at = f" at {oom.where}" if oom.where is not None else ""
        asked = f" asking for {fmt_bytes(oom.requested_bytes)}" if oom.requested_bytes else ""
        what = f"{oom.process} ran out of host memory{at}{asked}"
    return Finding(
        rule="out-of-memory",
        severity=Severity.HIGH,
        summary=f"A DataLoader worker died: {what}; the training process did not run out",
        evidence={
            "device": "host",
            "process": oom.process,
            "killed": oom.killed,
            "error": oom.message,
            "requested_bytes": oom.requested_bytes,
            "num_workers": workers or None,
        },
        fix=(FEWER_WORKERS.format(workers=workers // 2) if workers > 1 else "") + WORKER_FIX,
        saving_method="memory, not time: a worker's memory is not seen from the training process",
        locations=(oom.where,) if oom.where is not None else (),
    )
