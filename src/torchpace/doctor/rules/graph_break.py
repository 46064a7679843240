"""Graph breaks: torch.compile splits the model where dynamo cannot trace, at the user's lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.compile import GraphBreak
    from torchpace.runner.sensors.inspection import Inspection

FULLGRAPH = "torch.compile(model, fullgraph=True)  # raises at the first break, naming its line"
# Fixes for the breaks met most, by a word of dynamo's reason (its own hint follows otherwise).
_FIXES = (
    (
        "item()",
        "# keep the value a tensor inside forward; read it (.item()) outside, when you log:\n"
        "return logits, h.detach().norm()",
    ),
    (
        "print",
        "# move print/logging out of forward, or skip it while compiling:\n"
        "if not torch.compiler.is_compiling():\n    print(...)",
    ),
)


@rule("graph-break", input="live")
def graph_break(live: Inspection) -> list[Finding]:
    """One finding for the run's graph breaks, pointing at each break's line."""
    breaks = live.compiles.breaks
    if not breaks:
        return []
    first = breaks[0]
    where = f" at {first.location}" if first.location is not None else ""
    more = f" (and {len(breaks) - 1} more)" if len(breaks) > 1 else ""
    return [
        Finding(
            rule="graph-break",
            severity=Severity.MEDIUM,
            summary=f"torch.compile splits the model at {len(breaks)} graph break(s): "
            f"{first.reason}{where}{more}",
            evidence={
                "graph_breaks": len(breaks),
                "reasons": [_described(b) for b in breaks],
                "frames_compiled": live.compiles.compiles,
                "compile_s": live.compiles.compile_s,
                "run_s": live.compiles.run_s,
            },
            fix=_fix(first),
            saving_method="not estimated: the time between graphs and the fusion lost across a "
            "break are not measured",
            locations=tuple(b.location for b in breaks if b.location is not None),
            caveat="Each break ends one graph and starts the next at every call: the Python at "
            "the break runs eagerly, nothing fuses across it, and a host read such as .item() "
            "waits for the device. Measure the fixed script side by side (torchpace compare).",
        )
    ]


def _described(b: GraphBreak) -> str:
    where = f" at {b.location}" if b.location is not None else ""
    return f"{b.reason}{where}" + (f": {b.detail}" if b.detail else "")


def _fix(b: GraphBreak) -> str:
    text = f"{b.reason} {b.detail}"
    fix = next((code for word, code in _FIXES if word in text), "")
    if not fix and b.hint:
        fix = f"# dynamo's hint: {b.hint}"
    return f"{fix}\n{FULLGRAPH}" if fix else FULLGRAPH
