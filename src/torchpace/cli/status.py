"""One self-erasing status line on stderr while a command works, shown only on a terminal."""

from __future__ import annotations

import os
from typing import TextIO


class StatusLine:
    """What the command is doing now, on one line of `stream` that the next message replaces.

    Silent when `stream` is not a terminal (logs, CI, pipes) or TERM is dumb; `clear()` erases it
    so that the report or an error starts on a clean line.
    """

    def __init__(self, stream: TextIO, prefix: str = "torchpace: ") -> None:
        self.stream, self.prefix = stream, prefix
        self.enabled = stream.isatty() and os.environ.get("TERM") != "dumb"
        self.shown = False

    def say(self, message: str) -> None:
        """Replace the status line with `message` (cut to 200 characters)."""
        if self.enabled:
            self.stream.write(f"\r\033[K{self.prefix}{message}"[:200])
            self.stream.flush()
            self.shown = True

    def clear(self) -> None:
        """Erase the status line."""
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False
