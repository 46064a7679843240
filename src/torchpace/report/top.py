"""The HTML report's top kernels/operators tables: computed in `torchpace.trace.top` (re-exported).

The library fills `Diagnosis.top` from the already-loaded trace (`diagnose(..., top=True)`), so
no reporter reads a trace file again.
"""

from __future__ import annotations

from torchpace.trace.top import TopRow, TopTables, self_times_us, top_tables

__all__ = ["TopRow", "TopTables", "self_times_us", "top_tables"]
