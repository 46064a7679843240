"""Recompiles: a compiled function compiled again and again as its guards fail (shape churn)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.compile import CompileRecord, Recompile
    from torchpace.runner.sensors.inspection import Inspection

_SHAPE = re.compile(r"size mismatch|stride mismatch|\.size\(\)|\.shape", re.IGNORECASE)
_VALUE = re.compile(r"==\s*-?\d")
FIX_SHAPE = (
    "torch._dynamo.mark_dynamic(batch, 1)  # before the call: one graph for every length\n"
    "# or pad the lengths to a few buckets (torchpace.data.BucketBatchSampler + pad_collate)"
)
FIX_VALUE = (
    "# a Python number that changes each call (an argument, or a counter on the module) is\n"
    "# baked into the graph: pass it as a tensor instead\n"
    "out = model(x, scale=torch.tensor(scale))"
)
FIX_OTHER = "TORCH_LOGS=recompiles python train.py  # prints every failed guard"


@rule("recompile", input="live")
def recompile(live: Inspection) -> list[Finding]:
    """One finding per function that kept recompiling after warm-up or hit the recompile limit."""
    record = live.compiles
    return [
        _finding(r, record)
        for r in record.recompiles
        if r.after_warmup or r.function in record.limit_hit
    ]


def _finding(r: Recompile, record: CompileRecord) -> Finding:
    limit = r.function in record.limit_hit
    steps = record.steps_after_warmup
    late = [x for x in record.recompiles if x.after_warmup]
    share = r.after_warmup / max(sum(x.after_warmup for x in late), 1)
    late_s = record.recompile_s_after_warmup * share
    saving = late_s * 1000.0 / steps if steps and r.after_warmup else None
    stop = " and hit the recompile limit: it now runs uncompiled" if limit else ""
    return Finding(
        rule="recompile",
        severity=Severity.HIGH if limit else Severity.MEDIUM,
        summary=f"{r.function} was compiled again {r.count}x ({r.after_warmup} after warm-up), "
        f"each time because the guard `{r.guard or 'unknown'}` failed{stop}",
        evidence={
            "function": r.function,
            "guard": r.guard,
            "cause": _cause(r.guard),
            "recompiles": r.count,
            "recompiles_after_warmup": r.after_warmup,
            "steps_after_warmup": steps,
            "recompile_s_after_warmup": round(late_s, 3),
            "compile_s": record.compile_s,
            "run_s": record.run_s,
            "limit_hit": limit,
        },
        fix=_fix(r.guard),
        saving_ms=saving,
        saving_method=f"dynamo's own compile time of the {r.after_warmup} recompiles after "
        f"warm-up, spread over the {steps} steps after it",
        locations=(r.location,) if r.location is not None else (),
        caveat=_caveat(limit),
    )


def _cause(guard: str) -> str:
    if _SHAPE.search(guard):
        return "shape"
    return "value" if _VALUE.search(guard) else "other"


def _fix(guard: str) -> str:
    return {"shape": FIX_SHAPE, "value": FIX_VALUE}.get(_cause(guard), FIX_OTHER)


def _caveat(limit: bool) -> str:
    text = (
        "Recompiles stop once every shape or value has been seen: over a longer run the same "
        "recompiles weigh less per step, while each new shape or value costs another."
    )
    if limit:
        text += (
            " Past the recompile limit (torch._dynamo.config.recompile_limit) the function runs "
            "eagerly: the speed-up torch.compile gave it is lost, and that loss is not measured."
        )
    return text
