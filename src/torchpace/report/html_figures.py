"""The HTML report's picture sections: the picture that proves the verdict first, then the rest.

Which picture proves a finding is a property of its rule (PROOF): a straggler shows in the ranks'
work, allocator churn in the memory curve, a starved GPU in its idle time by cause; anything else
in the timeline of typical steps. A picture shown as the proof is not shown again below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import figures, memory, units
from torchpace.report.svg import esc
from torchpace.trace.top import TopRow, TopTables

_RANKS = ("rank-imbalance", "comm-bound", "comm-overlap", "independent-ranks")
_MEMORY = ("allocator-churn", "memory-pressure", "out-of-memory")
_IDLE = ("gpu-idle", "sync-point", "dataloader-stall", "launch-bound", "pageable-copy")
_KERNELS = ("no-mixed-precision", "tf32-disabled", "tensor-core-unfriendly-shape",
            "unfused-attention", "low-sm-efficiency", "double-precision")  # fmt: skip
PROOF: dict[str, str] = {
    **dict.fromkeys(_KERNELS, "kernels"),
    **dict.fromkeys(_RANKS, "ranks"),
    **dict.fromkeys(_MEMORY, "memory"),
    **dict.fromkeys((*_IDLE, "host-tensor-creation"), "idle"),
}


def _idle(d: Diagnosis) -> str:
    pics = d.pictures
    if pics is None:
        return ""
    picture = figures.idle_svg(pics.idle_ms_by_cause, d.breakdown.median_step_ms)
    if picture is None:
        return ""
    busy = d.breakdown.gpu_busy_fraction
    idle = units.share(1 - busy) if busy is not None else "n/a"
    return (
        f"<h3>GPU idle by cause: the GPU waited {idle} of the median step, and this is what "
        f"the host was doing meanwhile</h3><figure>{picture}</figure>"
    )


def _timeline(d: Diagnosis) -> str:
    picture = figures.timeline_svg(d.pictures.steps) if d.pictures is not None else None
    if picture is None:
        return ""
    return (
        "<h3>Typical steps as a timeline: host phases above, device streams below "
        "(blank is idle); the strip marks where the host waited</h3>"
        f"<figure>{picture}</figure>"
    )


def _memory(d: Diagnosis) -> str:
    curve = d.pictures.memory if d.pictures is not None else None
    picture = figures.memory_svg(curve)
    split = memory.html_section(d.memory) if d.memory is not None else ""
    if picture is None or curve is None:
        return split
    reserved = "reserved (dashed) against " if curve.reserved_mb is not None else ""
    return (
        f"<h3>{esc(curve.device)} memory: {reserved}allocated (solid) over the profiled "
        f"window</h3><figure>{picture}</figure>{split}"
    )


def _ranks(d: Diagnosis) -> str:
    picture = figures.ranks_svg(d.ranks, d.slowest_rank)
    if picture is None:
        return ""
    return (
        "<h3>Each rank's median step: its own work, then the time it only waited in "
        f"collectives for the others</h3><figure>{picture}</figure>"
    )


def _kernels(d: Diagnosis) -> str:
    rows = d.top.kernels if d.top is not None else ()
    picture = figures.top_svg(rows, "GPU kernels", "proofk")
    if picture is None:
        return ""
    return f"<h3>The longest GPU kernels over the whole trace</h3><figure>{picture}</figure>"


PICTURES: dict[str, Callable[[Diagnosis], str]] = {
    "kernels": _kernels,
    "ranks": _ranks,
    "idle": _idle,
    "timeline": _timeline,
    "memory": _memory,
}


def proof_name(d: Diagnosis) -> str:
    """The picture that proves the headline finding (the timeline when it has none of its own)."""
    wanted = PROOF.get(d.findings[0].rule, "") if d.findings else ""
    if not wanted and d.ranks and d.findings:
        wanted = "ranks"
    if wanted and PICTURES[wanted](d):
        return wanted
    return "idle" if _idle(d) else "timeline"


def proof_section(d: Diagnosis, proof: str) -> str:
    """The picture behind the verdict (`proof`, from proof_name), shown right under it."""
    body = PICTURES[proof](d)
    return (
        f"<section id='proof'><h2>The picture behind the verdict</h2>{body}</section>"
        if body
        else ""
    )


def picture(d: Diagnosis, name: str, proof: str) -> str:
    """A picture, unless it was shown as the proof."""
    return "" if name == proof else PICTURES[name](d)


def _table(title: str, rows: Sequence[TopRow], unit: str) -> str:
    body = "".join(
        f"<tr><td class='name'>{esc(r.name)}</td><td class='num'>{r.calls:,}</td>"
        f"<td class='num'>{units.ms(r.total_ms)}</td><td class='num'>{units.share(r.share)}</td></tr>"
        for r in rows
    )
    return (
        f"<details><summary>{esc(title)} as a table</summary><table><tr><th>Name</th>"
        "<th class='num'>Calls</th><th class='num'>Total</th>"
        f"<th class='num'>{unit}</th></tr>{body}</table></details>"
    )


def _top_part(title: str, rows: Sequence[TopRow], unit: str, prefix: str, shown: bool) -> str:
    """Bars and a table; only the table when the bars were the proof (`shown`)."""
    picture = None if shown else figures.top_svg(rows, title, prefix)
    if shown:
        return f"<div><h3>{esc(title)} (drawn above)</h3>{_table(title, rows, unit)}</div>"
    if picture is None:
        return f"<div><h3>{esc(title)}</h3><p class='empty'>None in this trace.</p></div>"
    return (
        f"<div><h3>{esc(title)} ({unit})</h3><figure>{picture}</figure>"
        f"{_table(title, rows, unit)}</div>"
    )


def top_section(top: TopTables | None, proof: str) -> str:
    """The longest kernels (device time) and host operators (self time) as bars and tables."""
    if top is None:
        return ""
    shown = proof == "kernels"
    kernels = (
        _top_part("GPU kernels", top.kernels, "of GPU time", "topk", shown) if top.kernels else ""
    )
    ops = _top_part("Host operators (self time)", top.ops, "of host op time", "topo", False)
    return f"<section id='top'><h2>Top kernels and operators (whole trace)</h2>{kernels}{ops}</section>"
