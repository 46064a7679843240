"""The compare report as JSON: versioned, a unit in every key."""

from __future__ import annotations

import json
from typing import Any

from torchpace import __version__
from torchpace.compare import Comparison, FindingRef, NamedChange, Side
from torchpace.measure import Change
from torchpace.report.jsondoc import _num  # six decimals; null for NaN and infinities

SCHEMA_VERSION = 1
Json = dict[str, Any]


def render_json(c: Comparison) -> str:
    """The comparison as pretty-printed JSON (NaN and infinities become null)."""
    return json.dumps(to_document(c), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def to_document(c: Comparison) -> Json:
    """The comparison as JSON-ready plain data."""
    f = c.findings
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "torchpace compare",
        "version": __version__,
        "before": side(c.before),
        "after": side(c.after),
        "verdict": c.verdict,
        "verdict_reason": c.why or None,
        "headline": c.headline(),
        "step": {
            **change(c.step_change),
            "speedup": _num(c.step.speedup),
            "speedup_low": _num(c.step.speedup_low),
            "speedup_high": _num(c.step.speedup_high),
            "interval_method": c.step.method,
        },
        "phases": [named(p) for p in c.phases],
        "kernels": None if c.kernels is None else [named(k) for k in c.kernels],
        "ops": None if c.ops is None else [named(o) for o in c.ops],
        "findings": {
            "resolved": [finding(x) for x in f.resolved],
            "new": [finding(x) for x in f.new],
            "changed": [
                {"before": finding(x.before), "after": finding(x.after)} for x in f.changed
            ],
            "unchanged": [finding(x) for x in f.unchanged],
        },
        "notes": list(c.notes),
    }


def side(s: Side) -> Json:
    """What one side was."""
    return {
        "path": s.path,
        "kind": s.kind,
        "device_kind": s.device,
        "ranks_count": s.ranks,
        "step_count": len(s.step_ms),
        "step_ms": [_num(x) for x in s.step_ms],
        "set_apart": [{"step": i, "why": why} for i, why in s.set_apart],
    }


def change(ch: Change) -> Json:
    """A change of medians with its 95% interval."""
    return {
        "before_ms": _num(ch.before_ms),
        "after_ms": _num(ch.after_ms),
        "delta_ms": _num(ch.delta_ms),
        "delta_low_ms": _num(ch.delta_low_ms),
        "delta_high_ms": _num(ch.delta_high_ms),
        "verdict": ch.verdict,
        "verdict_reason": ch.reason or None,
    }


def named(item: NamedChange) -> Json:
    """A phase, kernel or operator and its change."""
    return {"name": item.name, **change(item.change)}


def finding(f: FindingRef) -> Json:
    """What a comparison keeps of a finding."""
    return {
        "rule": f.rule,
        "severity": f.severity,
        "summary": f.summary,
        "saving_ms": _num(f.saving_ms),
        "rank": f.rank,
    }
