"""Reversible monkey-patches and "where in the user's code" lookups for the doctor's hooks."""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
from collections.abc import Callable
from functools import lru_cache
from types import FrameType
from typing import Any

from torchpace.trace.stacks import DEMO_SCRIPTS, SourceLocation


class Patcher:
    """Replace attributes and put every original back on `restore()`, newest first."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def wrap(self, owner: Any, name: str, make: Callable[[Any], Any]) -> bool:
        """Set `owner.name = make(original)`; False (nothing patched) when the attribute is absent."""
        present = name in vars(owner) if isinstance(owner, type) else hasattr(owner, name)
        original = getattr(owner, name, None)
        if original is None:
            return False
        self._saved.append((owner, name, vars(owner).get(name) if present else None, present))
        setattr(owner, name, make(original))
        return True

    def restore(self) -> None:
        """Undo every patch."""
        while self._saved:
            owner, name, original, present = self._saved.pop()
            if present and original is not None:
                setattr(owner, name, original)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)


@lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    import torch

    paths = sysconfig.get_paths()
    dirs = {
        os.path.dirname(torch.__file__),
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # torchpace itself
        paths["stdlib"],
        paths["purelib"],
        paths["platlib"],
    }
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


def is_library(filename: str) -> bool:
    """Whether a frame's file belongs to torch, torchpace, the stdlib or site-packages."""
    if filename.startswith("<"):
        return True  # <frozen runpy>, <string>
    if DEMO_SCRIPTS in filename.replace(os.sep, "/"):
        return False  # torchpace's bundled demos stand for the user's script
    return filename.startswith(_library_dirs()) or "site-packages" in filename


def display_path(filename: str) -> str:
    """A path relative to the working directory when it lies below it."""
    try:
        rel = os.path.relpath(filename)
    except (ValueError, OSError):  # another drive; or the script deleted its working directory
        return filename
    return filename if rel.startswith("..") else rel


def user_frame(start: FrameType | None = None) -> FrameType | None:
    """The innermost frame of the user's code, walking outwards from `start` (default: caller)."""
    frame: FrameType | None = start if start is not None else sys._getframe(1)
    while frame is not None and is_library(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_location(start: FrameType | None = None) -> SourceLocation | None:
    """The user's file:line that led to the current call, or None outside user code."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    if frame is None:
        return None
    return SourceLocation(
        display_path(frame.f_code.co_filename), frame.f_lineno, frame.f_code.co_name
    )
