"""The script died of out-of-memory: what was held, by category and by block, and the fixes that fit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.oom import fixes, largest_live, shortfall
from torchpace.doctor.registry import rule
from torchpace.runner.sensors.memory_census import CATEGORIES
from torchpace.trace.stats import fmt_bytes

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.memory import OomRecord

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
    found = fixes(oom, record.census)
    held: dict[str, int] = {str(c): n for c, n in oom.held.by_category().items()}
    evidence: dict[str, EvidenceValue] = {
        "device": "GPU" if oom.kind == "cuda" else "host",
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
    return out


def _summary(oom: OomRecord, held: dict[str, int]) -> str:
    where = f" at {oom.where}" if oom.where is not None else ""
    inside = f" (in {oom.modules[-1]})" if oom.modules else ""
    asked = f" asking for {fmt_bytes(oom.requested_bytes)}" if oom.requested_bytes else ""
    parts = ", ".join(f"{c} {fmt_bytes(held[c])}" for c in CATEGORIES if held.get(c))
    device = "GPU" if oom.kind == "cuda" else "host"
    total = sum(held.values())
    text = f"The script ran out of {device} memory{where}{inside}{asked}; {fmt_bytes(total)} "
    text += f"of tensors were held: {parts}" if parts else "of tensors were held"
    if oom.kind == "cuda" and oom.reserved_bytes is not None and oom.allocated_bytes is not None:
        text += f"; {fmt_bytes(oom.reserved_bytes - oom.allocated_bytes)} reserved but unallocated"
    return text
