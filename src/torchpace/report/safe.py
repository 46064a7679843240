"""Strings from a trace made safe to print: a device or op name is data, never terminal control.

A trace is input from anywhere (a colleague's run, a CI artefact): its device name can hold an escape
sequence that sets the window title or clears the screen, or a bidirectional override that makes
the report read differently than it is. Terminal reports pass the whole Diagnosis through
`printable` first; Markdown additionally escapes HTML (report/markdown.py) and the HTML page
escapes everything (report/html.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")

# C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI), and the invisible
# characters that reorder or break lines: bidi marks/overrides/isolates, line/paragraph separators.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with control characters shown as `\\x1b`-style escapes (tab and newline kept)."""
    return _CONTROL.sub(_visible, text) if _CONTROL.search(text) else text


def printable_data(value: T) -> T:
    """Every string inside `value` (dataclasses, tuples, lists, dicts) made printable.

    Returns `value` itself when nothing needed a change: a report of a clean trace copies nothing.
    """
    return _clean(value)  # type: ignore[no-any-return]


def _clean(value: Any) -> Any:
    if type(value) is str:  # not str enums (Phase): their identity is their value
        return printable(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _clean_fields(value)
    if type(value) in (tuple, list):
        items = [_clean(v) for v in value]
        same = all(new is old for new, old in zip(items, value, strict=True))
        return value if same else type(value)(items)
    if isinstance(value, Mapping):
        pairs = [(_clean(k), _clean(v)) for k, v in value.items()]
        same = all(
            k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)
        )
        return value if same else dict(pairs)
    return value


def _clean_fields(value: Any) -> Any:
    """A dataclass with its fields made printable; itself when none changed."""
    changes = {}
    for f in dataclasses.fields(value):
        if f.init:
            old = getattr(value, f.name)
            new = _clean(old)
            if new is not old:
                changes[f.name] = new
    return dataclasses.replace(value, **changes) if changes else value
