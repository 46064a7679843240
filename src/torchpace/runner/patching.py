"""Reversible monkey-patches and "where in the user's code" lookups for the doctor's hooks.

A patch is transparent: the wrapper carries the original's name, docstring and signature
(`functools.update_wrapper`, so `inspect.signature` reads the original's: Lightning's DataLoader
patch reads parameter names from it to save `dataset`), and `restore()` only puts back what is
still the doctor's own (another library's patch installed on top is left in place).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import sysconfig
from collections.abc import Callable
from functools import lru_cache
from types import FrameType
from typing import Any

from torchpace.trace.stacks import DEMO_SCRIPTS, SourceLocation

# The code of every wrapper the doctor installed: frames a warning's `stacklevel` does not count
# (runner/sensors/flags.py), so a warning names the user's line as under plain python.
WRAPPER_CODES: set[Any] = set()


def skip_wrappers(frame: FrameType, stacklevel: int) -> int:
    """`stacklevel` counted from `frame` (level 1) with the doctor's wrapper frames left out:
    nanoGPT's `torch.cuda.amp.GradScaler(...)` warned from the doctor's `__init__` wrapper, not
    train.py:196."""
    level, seen = stacklevel, 1
    walk: FrameType | None = frame
    while walk is not None and seen < level:
        walk = walk.f_back
        if walk is not None and walk.f_code in WRAPPER_CODES:
            level += 1
        seen += 1
    return level


class Patcher:
    """Replace attributes and put every original back on `restore()`, newest first."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool, Any]] = []

    def wrap(self, owner: Any, name: str, make: Callable[[Any], Any]) -> bool:
        """Set `owner.name = make(original)`; False (nothing patched) when the attribute is absent."""
        present = name in vars(owner) if isinstance(owner, type) else hasattr(owner, name)
        original = getattr(owner, name, None)
        if original is None:
            return False
        wrapper = make(original)
        if callable(original) and not hasattr(wrapper, "__wrapped__"):
            with contextlib.suppress(AttributeError, TypeError):
                functools.update_wrapper(wrapper, original)
        saved = vars(owner).get(name) if present else None
        self._saved.append((owner, name, saved, present, wrapper))
        with contextlib.suppress(AttributeError):
            WRAPPER_CODES.add(wrapper.__code__)
        _script_as(wrapper, original)
        setattr(owner, name, wrapper)
        return True

    def restore(self) -> None:
        """Undo every patch that is still the doctor's own, newest first."""
        while self._saved:
            owner, name, original, present, wrapper = self._saved.pop()
            if vars(owner).get(name) is not wrapper:
                continue  # another library patched it since: taking ours out would drop theirs
            _script_as(wrapper, None)
            if present and original is not None:
                setattr(owner, name, original)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)


def _script_as(wrapper: Any, original: Any) -> None:
    """TorchScript compiles a call to a function it knows as an op (`warnings.warn` is
    aten::warn) by the function's identity: the wrapper of one must be that op too, or scripting
    code that calls it fails (pyg-team/pytorch_geometric's examples/jit/gin.py died under the
    doctor in `torch.jit.script(model)`: it tried to compile the wrapper). `original` None: the
    wrapper is gone, and its id with it."""
    builtins = sys.modules.get("torch.jit._builtins")
    if builtins is None:
        return  # torch not imported: nothing scripts
    table = builtins._get_builtin_table()
    op = table.get(id(original)) if original is not None else None
    if op is not None:
        table[id(wrapper)] = op
    elif original is None:
        table.pop(id(wrapper), None)


# Files that are the user's code wherever they lie: the module `torchpace doctor -m` runs (an
# installed package's training script, e.g. `-m trl.scripts.sft`, lives in site-packages).
_USER_FILES: set[str] = set()


def mark_user_file(filename: str) -> None:
    """Count `filename` as the user's code even inside site-packages (the `-m` target)."""
    _USER_FILES.add(filename)


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
        # Console scripts (the `torchpace` launcher itself is the outermost frame of every run).
        paths["scripts"],
        os.path.dirname(os.path.abspath(sys.executable)),
    }
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


def is_library(filename: str) -> bool:
    """Whether a frame's file belongs to torch, torchpace, the stdlib or site-packages."""
    if filename in _USER_FILES:
        return False
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


def caller_location(frame: FrameType | None) -> SourceLocation | None:
    """`frame`'s place when it is the user's code, else None: an API call counts as the user's
    only when the user's code made it, not when torch, a library or an import made it for them
    (a user line that imports PyG, which TorchScripts its own classes, did not call jit.script)."""
    if frame is None or is_library(frame.f_code.co_filename):
        return None
    return _location(frame)


def _location(frame: FrameType) -> SourceLocation:
    return SourceLocation(
        display_path(frame.f_code.co_filename), frame.f_lineno, frame.f_code.co_name
    )


def user_location(start: FrameType | None = None) -> SourceLocation | None:
    """The user's file:line that led to the current call, or None outside user code."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    return None if frame is None else _location(frame)
