"""Small edits to a trace file the doctor wrote (msgspec reads and writes it quickly)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def drop_unfinished_step(path: Path, finished: int) -> bool:
    """Remove ProfilerStep# markers past the first `finished` steps (cut short by a stop).

    The ops inside stay in the file (Perfetto shows them) but belong to no step, so no analysis
    counts a partial step as a whole one. Returns whether anything was removed.
    """
    import msgspec

    doc: dict[str, Any] = msgspec.json.decode(path.read_bytes())
    events = doc.get("traceEvents", [])
    steps = sorted(
        (e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")),
        key=lambda e: float(e.get("ts", 0.0)),
    )
    extra = {id(e) for e in steps[finished:]}
    if not extra:
        return False
    doc["traceEvents"] = [e for e in events if id(e) not in extra]
    path.write_bytes(msgspec.json.encode(doc))
    return True
