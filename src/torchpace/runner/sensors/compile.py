"""The compile sensor: what torch.compile (dynamo) did during the run.

Graph breaks with their reason and the user's line, recompiles with the guard that failed, compile
time, and the frames that hit the recompile limit (and so run uncompiled). `CompileRecord` is its
record (plain data, read by the graph-break and recompile rules).

It reads dynamo's own bookkeeping (`torch._dynamo.utils`: one compilation-metrics entry per frame
compiled, and the graph-break reasons with their user stacks) and installs nothing into torch: a
hook or a logging switch would change what dynamo traces and guards (see Inspector.compiled). At
each step boundary it looks at the newest metrics entry (a list copy of at most 64 entries, only
while torch._dynamo is imported), so it costs nothing measurable. Each piece it reads is looked up
with getattr: a torch that lacks one (torch >= 2.4 is supported) leaves it "not measured".
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchpace.runner.patching import display_path
from torchpace.trace.stacks import SourceLocation, is_user_file

_COMPILE_ID = re.compile(r"(\d+)/(\d+)")
# Steps between two readings of dynamo's records after warm-up (a copy of up to 64 entries: a
# few us at every step of a script whose optimizer imported dynamo, that is, almost any). They
# keep its last 64 compiles, far more than a frame may recompile in NOTE_EVERY steps.
NOTE_EVERY = 16
_LIMIT = re.compile(r"recompile.limit|cache.size.limit", re.IGNORECASE)


@dataclass(frozen=True)
class GraphBreak:
    """One place where dynamo split the compiled graph, as often as it met it while compiling."""

    reason: str  # dynamo's reason, first line: e.g. "Failed to trace builtin operator"
    detail: str = ""  # its explanation, e.g. "Dynamo does not know how to trace builtin `print`"
    hint: str = ""  # dynamo's own hint, when it gave one
    location: SourceLocation | None = None  # the innermost line of the user's code
    count: int = 1


@dataclass(frozen=True)
class Recompile:
    """A compiled function compiled again because a guard failed."""

    function: str  # the code object dynamo compiled (a resume function after a break included)
    guard: str  # the guard that failed, first line ("" where this torch does not record it)
    location: SourceLocation | None = None  # the function's first line, in the user's code
    count: int = 1
    after_warmup: int = 0  # how many of them came after the warm-up steps


@dataclass(frozen=True)
class CompileRecord:
    """What dynamo compiled during the run; empty (compiles == 0) when nothing was compiled."""

    compiles: int = 0  # frames compiled, first compiles and recompiles
    compile_s: float | None = None  # seconds spent compiling them (dynamo and its backend)
    run_s: float | None = None  # seconds the script ran under the doctor, to weigh compile_s
    recompiles: tuple[Recompile, ...] = ()
    recompile_s_after_warmup: float = 0.0  # compile seconds of the recompiles after warm-up
    steps_after_warmup: int = 0  # the steps those recompiles are spread over
    limit_hit: tuple[str, ...] = ()  # functions past the recompile limit: they now run eagerly
    breaks: tuple[GraphBreak, ...] = ()
    note: str = ""  # what could not be read from this torch

    def recompiles_after_warmup(self) -> int:
        return sum(r.after_warmup for r in self.recompiles)

    def sentence(self) -> str:
        """What torch.compile did and what it cost, for the report's notes (the rules judge
        breaks and late recompiles; this says so when they found none); "" when nothing was."""
        if not self.compiles:
            return f"torch.compile: {self.note}" if self.note else ""
        cost = ""
        if self.compile_s is not None and self.run_s:
            cost = (
                f" in {self.compile_s:.1f} s, {self.compile_s / self.run_s:.0%} of the "
                f"{self.run_s:.0f} s the script ran"
            )
        text = f"torch.compile compiled {self.compiles} frame(s){cost}; "
        if self.recompiles:
            top, late = self.recompiles[0], self.recompiles_after_warmup()
            guard = f" (guard `{top.guard}`)" if top.guard else ""
            text += f"{sum(r.count for r in self.recompiles)} recompile(s), most of {top.function}"
            text += f"{guard}, {late or 'none'} after warm-up; "
        else:
            text += "no recompiles; "
        return text + (f"{len(self.breaks)} graph break(s)" if self.breaks else "no graph breaks")


class CompileSensor:
    """Notes dynamo's compiles as the steps go by; `record()` sums them up."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.after_warmup_steps = 0  # steps after warm-up, as `boundary` counts them
        # A settled run's steps (--full, --follow after the window), counted by the session's
        # clock rather than by a call here at each step (runner/session.py: `settled_step`).
        self.settled: Callable[[], int] = lambda: 0
        self._seen: list[Any] = []  # metrics entries of this run: (entry, after warm-up)
        self._before: list[Any] = []  # metrics entries from before the run
        self._known: set[int] = set()  # ids of the entries already there or noted
        self._breaks_before = 0  # graph-break reasons recorded before the run

    def install(self) -> None:
        """Remember what dynamo recorded before the run (another run in this process)."""
        self.started = time.monotonic()
        self._before = _metrics()  # held, so that no later entry can reuse their ids
        self._known = {id(m) for m in self._before}
        self._breaks_before = len(_break_reasons())

    def boundary(self, *, after_warmup: bool) -> None:
        """A step ended: note the frames compiled during it."""
        self.after_warmup_steps += after_warmup
        if after_warmup and self.after_warmup_steps % NOTE_EVERY:
            return  # all later compiles are after warm-up: noted in batches, record() notes the rest
        if "torch._dynamo" in sys.modules:  # nothing compiles without it (and importing it is slow)
            self._note_new(after_warmup=after_warmup)

    def note(self) -> None:
        """Every NOTE_EVERY steps of a settled run (counted by `settled`): its compiles."""
        if "torch._dynamo" in sys.modules:
            self._note_new(after_warmup=True)

    def compiled_any(self) -> bool:
        """Whether dynamo compiled a frame in this run (torch.compile, or a library's): its
        guards hold torch's thread count, so changing it compiles again (PyG's compiled GIN:
        `GLOBAL_STATE changed: grad_mode num_threads`, 17.7 s)."""
        return "torch._dynamo" in sys.modules and len(_metrics()) > len(self._before)

    def _note_new(self, *, after_warmup: bool) -> None:
        for entry in _metrics():
            if id(entry) not in self._known:
                self._known.add(id(entry))
                self._seen.append((entry, after_warmup))

    # complex: the CompileRecord's fields, each a filter over the same compiled frames.
    def record(self) -> CompileRecord:
        """Everything noted so far (the compiles since the last boundary count as after it)."""
        if "torch._dynamo" not in sys.modules:
            return CompileRecord()
        self._note_new(after_warmup=True)
        if not hasattr(sys.modules.get("torch._dynamo.utils"), "get_compilation_metrics"):
            return CompileRecord(note="this torch keeps no compilation metrics: not measured")
        frames = [(m, late) for m, late in self._seen if getattr(m, "co_name", None)]
        seconds = [getattr(m, "entire_frame_compile_time_s", None) for m, _ in frames]
        redone = [(m, late) for m, late in frames if _is_recompile(m)]
        return CompileRecord(
            compiles=len(frames),
            compile_s=sum(s for s in seconds if s) if any(s is not None for s in seconds) else None,
            run_s=time.monotonic() - self.started,
            recompiles=_recompiles(redone),
            recompile_s_after_warmup=sum(
                getattr(m, "entire_frame_compile_time_s", None) or 0.0 for m, late in redone if late
            ),
            steps_after_warmup=self.after_warmup_steps + self.settled(),
            limit_hit=tuple(sorted({m.co_name for m, _ in frames if _hit_limit(m)})),
            breaks=self._breaks(),
        )

    def _breaks(self) -> tuple[GraphBreak, ...]:
        reasons = _break_reasons()
        new = reasons[self._breaks_before :] if len(reasons) >= self._breaks_before else reasons
        seen: Counter[GraphBreak] = Counter(_graph_break(r) for r in new)
        return tuple(
            GraphBreak(b.reason, b.detail, b.hint, b.location, n) for b, n in seen.most_common()
        )


def recompile_guards() -> dict[str, str]:
    """The guard that failed for each recompile dynamo recorded in this process, by its compile
    id ("0/4", as the profiler's compile ranges name it); empty without torch._dynamo."""
    return {
        str(getattr(m, "compile_id", "")): _guard(reason)
        for m in _metrics()
        if (reason := getattr(m, "recompile_reason", None))
    }


def _metrics() -> list[Any]:
    utils = sys.modules.get("torch._dynamo.utils")
    get = getattr(utils, "get_compilation_metrics", None)
    return list(get()) if get is not None else []


def _break_reasons() -> list[Any]:
    utils = sys.modules.get("torch._dynamo.utils")
    return list(getattr(utils, "graph_break_reasons", ()))


def _is_recompile(entry: Any) -> bool:
    """A compile of a frame compiled before: its cache already held code (or its id says so)."""
    cache = getattr(entry, "cache_size", None)
    if isinstance(cache, int):
        return cache > 0
    found = _COMPILE_ID.search(str(getattr(entry, "compile_id", "")))
    return found is not None and int(found[2]) > 0


def _hit_limit(entry: Any) -> bool:
    return bool(_LIMIT.search(str(getattr(entry, "fail_reason", None) or "")))


def _recompiles(redone: list[tuple[Any, bool]]) -> tuple[Recompile, ...]:
    """Recompiles grouped by function and kind of failed guard, most frequent first."""
    groups: dict[tuple[str, str], list[tuple[Any, bool]]] = {}
    for entry, late in redone:
        guard = _guard(getattr(entry, "recompile_reason", None) or "")
        groups.setdefault((entry.co_name, _guard_kind(guard)), []).append((entry, late))
    found = []
    for (function, _), entries in groups.items():
        first = entries[0][0]
        found.append(
            Recompile(
                function=function,
                guard=_guard(getattr(first, "recompile_reason", None) or ""),
                location=_code_location(first),
                count=len(entries),
                after_warmup=sum(late for _, late in entries),
            )
        )
    return tuple(sorted(found, key=lambda r: -r.count))


def _guard(reason: str) -> str:
    """`0/3: tensor 'x' size mismatch at index 1. expected 10, actual 11` -> the guard, trimmed."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    first = re.sub(r"^\s*\d+/\d+:\s*", "", first)
    return re.sub(r"\s{2,}#.*$", "", first).strip()  # dynamo pads the guard to a source comment


def _guard_kind(guard: str) -> str:
    """The guard without the values that change from one recompile to the next."""
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", guard)


def _code_location(entry: Any) -> SourceLocation | None:
    file, line = getattr(entry, "co_filename", None), getattr(entry, "co_firstlineno", None)
    if not file or not isinstance(line, int) or not is_user_file(file):
        return None
    return SourceLocation(display_path(file), line, entry.co_name)


def _graph_break(reason: Any) -> GraphBreak:
    lines = [s.strip() for s in str(getattr(reason, "reason", "")).splitlines() if s.strip()]

    def part(label: str) -> str:
        return next((s.removeprefix(label).strip() for s in lines if s.startswith(label)), "")

    return GraphBreak(
        reason=lines[0] if lines else "unknown",
        detail=part("Explanation:"),
        hint=part("Hint:"),
        location=_user_frame(getattr(reason, "user_stack", None) or ()),
    )


def _user_frame(stack: Any) -> SourceLocation | None:
    """The innermost frame of the user's code in a break's stack (given outermost first)."""
    for frame in reversed(list(stack)):
        file = getattr(frame, "filename", "")
        if file and is_user_file(file):
            return SourceLocation(display_path(file), frame.lineno or 0, frame.name)
    return None
