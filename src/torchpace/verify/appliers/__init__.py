"""Fixes `doctor --verify` can switch on without editing the script: one small module per fix.

Each applier answers some findings (`plan`: the fixes to try for a finding, in the parent) and
switches its fix on in a fresh run of the script (`apply`: in the child, by patching torch before
the script starts). A finding no applier answers needs a code change and keeps its estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchpace.doctor.finding import Finding

# The types live in base.py, which every applier imports: the registry below imports the appliers.
from torchpace.verify.appliers.base import ENV_FIXES, Applier, Context, Fix, Params

__all__ = ["ENV_FIXES", "Applier", "Context", "Fix", "Params", "appliers", "apply", "plan"]


def appliers() -> dict[str, Applier]:
    """Every applier by name (imported on demand: the parent needs them only with --verify)."""
    from torchpace.verify.appliers import (
        channels_last,
        data_parallel,
        debug,
        flags,
        loader,
        no_grad,
        precision,
        threads,
    )

    found = [
        debug.ANOMALY,
        debug.DETERMINISTIC,
        loader.LOADER,
        no_grad.NO_GRAD,
        data_parallel.UNWRAP,
        channels_last.CHANNELS_LAST,
        threads.THREADS,
        precision.AUTOCAST,
        flags.TF32,
        flags.CUDNN_BENCHMARK,
    ]
    return {a.name: a for a in found}


def plan(finding: Finding, context: Context) -> list[Fix]:
    """The fixes to try for `finding` ([] when it needs a code change)."""
    for applier in appliers().values():
        fixes = applier.plan(finding, context)
        if fixes is not None:
            return fixes
    return []


def apply(specs: list[Mapping[str, Any]]) -> None:
    """Switch on every fix in `specs` (in the child); ValueError naming an unknown applier."""
    known = appliers()
    for spec in specs:
        name = spec.get("applier")
        if name not in known:
            raise ValueError(f"unknown fix {name!r}; known: {', '.join(sorted(known))}")
        known[str(name)].apply(spec)
