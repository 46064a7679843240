"""The doctor's progress line on a terminal: what it is doing, drawn with rich, one line."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.spinner import SPINNERS
from rich.text import Text

_DOTS: dict[str, Any] = SPINNERS["dots"]
_FRAMES: str = _DOTS["frames"]
INTERVAL_S = float(_DOTS["interval"]) / 1000.0


def render(message: str, elapsed_s: float, tick: int, width: int) -> bytes:
    """The line for `message` (no newline), cut to fit `width` columns so it never wraps: a
    wrapped line could not be erased with a carriage return."""
    text = Text.assemble(
        (_FRAMES[tick % len(_FRAMES)], "cyan"),
        " ",
        ("torchpace", "bold"),
        f": {message}",
        (f"  {elapsed_s:.0f} s", "dim"),
    )
    text.truncate(max(1, width - 1), overflow="ellipsis")
    console = Console(file=io.StringIO(), force_terminal=True, width=width, soft_wrap=True)
    with console.capture() as captured:
        console.print(text, end="")
    return captured.get().encode("utf-8", "replace")


ERASE = b"\r\x1b[2K"  # back to the line's start, and clear it
