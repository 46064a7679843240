"""Reporter for `torchpace env`: the machine's facts and verdicts -> aligned text or JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

from torchpace.trace.stats import fmt_bytes

_MARK = {"ok": "ok  ", "info": "info", "warn": "WARN", "error": "FAIL"}


def _bytes(n: int | None) -> str:
    return "unknown" if n is None else fmt_bytes(n)


def _or(value: object, default: str = "unknown") -> str:
    return default if value is None else str(value)


def render_text(facts: Any, verdicts: list[Any]) -> str:
    """The facts as aligned `key: value` lines, then one line per verdict."""
    cpu = facts.cpu
    rows = [
        ("python", facts.python),
        ("platform", facts.platform),
        ("torch", _or(facts.torch_version, "not installed")),
    ]
    if facts.torch_version is not None:
        rows.append(("CUDA build", _or(facts.cuda_build, "none (CPU build)")))
        if facts.hip_build:
            rows.append(("ROCm build", facts.hip_build))
        rows.append(("cuDNN", _or(facts.cudnn_version, "none")))
    rows += [
        ("driver", _or(facts.driver_version)),
        ("nvidia-ml-py", facts.nvml),
    ]
    for g in facts.gpus:
        cc = ".".join(map(str, g.compute_capability)) if g.compute_capability else "?"
        rows.append(
            (
                f"GPU {g.index}",
                f"{g.name}, sm {cc}, {_bytes(g.memory_bytes)}, "
                f"bf16 {_or(g.bf16)}, TF32 {_or(g.tf32)}",
            )
        )
    if not facts.gpus:
        rows.append(("GPUs", "none visible"))
    rows += [
        ("CPU", _or(cpu.model)),
        (
            "cores",
            f"{cpu.usable_cores} usable of {cpu.logical_cores} logical "
            f"({_or(cpu.physical_cores)} physical)",
        ),
        ("NUMA nodes", f"{_or(cpu.numa_nodes)} (this process spans {_or(cpu.numa_nodes_usable)})"),
        ("CPU bf16", _or(cpu.bf16_native)),
        ("allocator", cpu.allocator),
    ]
    if facts.torch_threads is not None:
        threads = f"{facts.torch_threads} intra-op, {facts.interop_threads} inter-op"
        rows.append(("torch threads", threads))
    rows += [(f"${k}", v) for k, v in facts.env_vars]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("")
    for v in verdicts:
        lines.append(f"[{_MARK[v.level]}] {v.message}")
        if v.fix:
            lines.append("       fix: " + v.fix.replace("\n", "\n" + " " * 12))
    return "\n".join(lines) + "\n"


def render_json(facts: Any, verdicts: list[Any]) -> str:
    """The facts and verdicts as one JSON object."""
    import msgspec

    doc = {
        "schema_version": 1,
        "facts": dataclasses.asdict(facts),
        "verdicts": [dataclasses.asdict(v) for v in verdicts],
    }
    return msgspec.json.encode(doc).decode() + "\n"
