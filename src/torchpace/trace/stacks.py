"""Where in the user's code: SourceLocation, read from Python stack frames of host ops."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class SourceLocation:
    """A place in the user's code that caused what a finding reports."""

    file: str
    line: int
    function: str = ""
    count: int = 0  # how many times the profiled steps hit this place (0: not counted)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where} in {self.function}" if self.function else where


# "path/to/file.py(42): function" - both python_function names and "Call stack" entries.
_FRAME = re.compile(r"^\s*(?P<file>.+?)\((?P<line>\d+)\):\s*(?P<func>.*?)\s*$")
# Frames that are not the user's: the standard library, torch itself, installed packages, and
# torchpace's own package (installed, or a source checkout's src/torchpace/). Not any folder named
# torchpace: a clone of the project is one, and the scripts in it are the user's code.
_LIBRARY = re.compile(
    r"site-packages|dist-packages|/lib/python\d|^<|/torch/|^torch/|^threading\.py|^runpy\.py"
    r"|/src/torchpace/|^src/torchpace/|^torchpace/|^contextlib\.py|^functools\.py"
    rf"|^{re.escape(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}/"
)
# torchpace's bundled demo scripts stand for the user's code, even installed in site-packages.
DEMO_SCRIPTS = "torchpace/examples/"


def most_hit(found: Iterable[SourceLocation | None], top: int = 5) -> tuple[SourceLocation, ...]:
    """The `top` places found most often, each with its count."""
    counts = Counter(x for x in found if x is not None)
    return tuple(replace(x, count=n) for x, n in counts.most_common(top))


def parse_frame(text: str) -> SourceLocation | None:
    """`file.py(42): fn` -> SourceLocation; None for `<built-in ...>` and other non-frames."""
    found = _FRAME.match(text)
    if found is None:
        return None
    return SourceLocation(found["file"], int(found["line"]), found["func"])


def is_user_file(file: str) -> bool:
    """Whether a frame's file is the user's code (not torch, site-packages or the stdlib)."""
    return DEMO_SCRIPTS in file.replace("\\", "/") or _LIBRARY.search(file) is None


def user_location(frames: Iterable[str]) -> SourceLocation | None:
    """The innermost user frame among `frames` (given innermost first)."""
    for text in frames:
        loc = parse_frame(text)
        if loc is not None and is_user_file(loc.file):
            return loc
    return None
