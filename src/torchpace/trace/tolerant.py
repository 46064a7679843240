"""The tolerant decoder: a trace the strict schema refuses, read event by event, field by field.

The fast decoder (torchpace.trace._raw) refuses a whole document for one surprise: a field of
another type (`"bytes": "1"`, `"device": [0]`), a negative duration, a phase outside the format,
invalid UTF-8. Such a document comes here, and the report keeps what can be read:
- each event is tried with the fast schema first, so a well-formed event decodes exactly as the
  fast decoder would have decoded it;
- the others are decoded field by field against the same structs: a value of another type is
  coerced where its meaning is clear (a numeric string to a number, `"0x1f"` to 31, a number to a
  name), otherwise it is dropped and counted;
- an event without a usable `ts` (or, for a range, a `dur` neither negative nor longer than a
  day) is dropped and counted: it cannot be placed or measured;
- invalid UTF-8, and `\\ud800`-style escapes of lone UTF-16 surrogates (no character: msgspec
  refuses them), become U+FFFD (counted); entries of `traceEvents` that are not events of a known
  phase are skipped (counted).
Every count becomes a note in the report. Only a document that is not valid JSON, not an object
with a `traceEvents` list (nor a list of events), or nested deeper than Python can follow, is
refused, with one line.

A bare list of events is the Chrome trace format's other form, the one torch.autograd.profiler wrote
before Kineto (torch < 1.8, and its legacy mode since): ranges of host ops with no category, on the
process "CPU functions", and no device activity. Its events are read as they are, those ranges as
host ops (category LEGACY_HOST_CAT), with a note that says what such a trace cannot show.
Fields are found from the structs' declarations: a field added to the schema is read the same way.

A key written twice (two `traceEvents` lists) reads as JSON parsers read it: the last one wins.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import msgspec
from msgspec import inspect as mi

from torchpace.errors import TraceError
from torchpace.trace._raw import (
    EVENT,
    LEGACY_HOST_CAT,
    MAX_DURATION_US,
    PHASES,
    Complete,
    RawEvent,
    RawHeader,
)

_Fields = dict[str, msgspec.Raw]
_FIELDS = msgspec.json.Decoder(_Fields)
_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_ANY = msgspec.json.Decoder()
_EVENT = msgspec.json.Decoder(EVENT)
_DROP = object()  # a value that could not be read: the field keeps its default
_HINT = "export it with prof.export_chrome_trace(path) or tensorboard_trace_handler(dir)"
# The process the pre-Kineto profiler put every host range on.
_LEGACY_PID = "CPU functions"
LEGACY_NOTE = (
    "a pre-Kineto trace (a bare list of events, as torch.autograd.profiler wrote before torch 1.8):"
    " it holds host ops only; to see the device, record with torch.profiler.profile(activities="
    "[ProfilerActivity.CPU, ProfilerActivity.CUDA]) and export with prof.export_chrome_trace(path)"
)


@dataclass
class Repairs:
    """What the tolerant decoder had to change, counted for the report's notes."""

    fields: Counter[tuple[str, str]] = field(default_factory=Counter)  # (field, found) -> events
    events: Counter[tuple[str, str]] = field(default_factory=Counter)  # events dropped, by cause
    header: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Entries that are no events, by (noun, qualifier): ("event", "of unknown phase 'Q'").
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)
    utf8: int = 0  # invalid UTF-8 sequences replaced
    surrogates: int = 0  # \uXXXX escapes of lone UTF-16 surrogates replaced
    legacy: bool = False  # a bare list of events (pre-Kineto), not an object

    def notes(self) -> list[str]:
        """One line per kind of repair, naming the fields and how many events had them."""
        notes = [LEGACY_NOTE] if self.legacy else []
        if self.utf8:
            notes.append(f"{_count(self.utf8, 'invalid UTF-8 sequence')} in strings read as U+FFFD")
        if self.surrogates:
            lone = _count(self.surrogates, "lone UTF-16 surrogate escape")
            notes.append(f"{lone} (\\ud800-\\udfff) in strings read as U+FFFD")
        if self.events:
            notes.append(
                f"dropped {_count(sum(self.events.values()), 'event')} that cannot be placed or "
                f"measured: {_listing(self.events, 'event')}"
            )
        if self.fields:
            notes.append(f"ignored unreadable event fields: {_listing(self.fields, 'event')}")
        if self.header:
            notes.append(f"ignored unreadable header fields: {_listing(self.header, '')}")
        if self.skipped:
            what = ", ".join(
                f"{_count(n, noun)}{' ' if more else ''}{more}"
                for (noun, more), n in self.skipped.most_common()
            )
            notes.append(f"skipped entries of traceEvents that are not events: {what}")
        return notes


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def _listing(counts: Counter[tuple[str, str]], unit: str) -> str:
    """`args.bytes is a list (3 events), dur is missing (1 event)`, most frequent first."""
    return ", ".join(
        f"{name} is {found}" + (f" ({_count(n, unit)})" if unit else "")
        for (name, found), n in counts.most_common()
    )


def decode(name: str, data: bytes) -> tuple[RawHeader, list[RawEvent] | None, list[str]]:
    """The document's header, events (None without a `traceEvents` list) and repair notes.

    Raises TraceError only for a document that is not a JSON object or cannot be parsed.
    """
    data, surrogates = _repair_surrogates(data)
    repairs = Repairs(surrogates=surrogates)
    try:
        header, events = _document(name, data, repairs)
    except UnicodeDecodeError:
        data, utf8 = _repair_utf8(data)
        repairs = Repairs(utf8=utf8, surrogates=surrogates)
        header, events = _document(name, data, repairs)
    return header, events, repairs.notes()


def _document(name: str, data: bytes, repairs: Repairs) -> tuple[RawHeader, list[Any] | None]:
    top = _top(name, data)
    if isinstance(top, list):
        repairs.legacy = True
        return RawHeader(), _legacy(name, [e for raw in top if (e := _event(raw, repairs))])
    listed = top.pop("traceEvents", None)
    header: RawHeader = _struct(RawHeader, top, "", repairs.header)  # no field is required
    if listed is None or bytes(listed) == b"null":
        return header, None
    try:
        raws = _LIST.decode(listed)
    except msgspec.ValidationError:
        found = _found(_any(listed))
        raise TraceError(
            f"{name} is not a torch.profiler trace: its 'traceEvents' is {found}, not a list; "
            f"{_HINT}"
        ) from None
    return header, [e for raw in raws if (e := _event(raw, repairs)) is not None]


def _top(name: str, data: bytes) -> _Fields | list[msgspec.Raw]:
    """The document's top-level keys (or, for a bare list, its entries), undecoded; TraceError
    when it is neither a JSON object nor a list."""
    try:
        try:
            return _FIELDS.decode(data)
        except msgspec.ValidationError:
            return _LIST.decode(data)  # the pre-Kineto form: a bare list of events
    except msgspec.ValidationError:
        raise TraceError(
            f"{name} is not a torch.profiler trace: expected a JSON object with a "
            f"'traceEvents' list; {_HINT}"
        ) from None
    except msgspec.DecodeError as exc:
        raise TraceError(
            f"{name} is not valid JSON ({exc}): truncated or corrupt? re-copy or re-export it"
        ) from None
    except RecursionError:
        raise TraceError(
            f"{name} nests JSON arrays or objects too deep to read (Python's recursion limit is "
            f"{sys.getrecursionlimit()}), which no profiler does: corrupt? re-copy or re-export it"
        ) from None


def _legacy(name: str, events: list[RawEvent]) -> list[RawEvent]:
    """A bare list's events, its uncategorised host ranges marked as host ops; TraceError when
    it holds no range or instant at all (a list of something else)."""
    if not events:
        raise TraceError(
            f"{name} is not a torch.profiler trace: a JSON list with no profiler events; record "
            "with torch.profiler.profile(...) and export with prof.export_chrome_trace(path)"
        )
    for e in events:
        if e.__class__ is Complete and not e.cat and e.pid == _LEGACY_PID:
            e.cat = LEGACY_HOST_CAT
    return events


def _repair_utf8(data: bytes) -> tuple[bytes, int]:
    """The document with invalid UTF-8 replaced by U+FFFD, and how many sequences were."""
    text = data.decode("utf-8", "replace")
    replaced = text.count("\ufffd") - data.count("\ufffd".encode())
    return text.encode(), replaced


# A JSON escape: `\\` (taken whole, so what follows it is no escape), a UTF-16 surrogate pair
# (one character beyond the BMP), or a lone surrogate (group 1), which is no character: msgspec
# refuses the whole document for one, as "malformed".
_ESCAPE = re.compile(
    rb"\\(?:\\|u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|(u[dD][89a-fA-F][0-9a-fA-F]{2}))"
)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _repair_surrogates(data: bytes) -> tuple[bytes, int]:
    """The document with each lone surrogate escape replaced by `\\ufffd`, and how many were."""
    if _SURROGATE.search(data) is None:
        return data, 0
    count = 0

    def lone(found: re.Match[bytes]) -> bytes:
        nonlocal count
        if found[1] is None:
            return found[0]
        count += 1
        return rb"\ufffd"

    return _ESCAPE.sub(lone, data), count


def _event(raw: msgspec.Raw, repairs: Repairs) -> RawEvent | None:
    """One entry of traceEvents as the fast path's struct; None when it is no usable event."""
    try:
        return _EVENT.decode(raw)  # type: ignore[no-any-return]
    except msgspec.ValidationError:
        pass
    try:
        fields = _FIELDS.decode(raw)
    except msgspec.ValidationError:
        noun = _found(_any(raw)).split(" ", 1)[-1]  # "a number" -> "number"
        repairs.skipped[(noun, "")] += 1
        return None
    phase = fields.pop("ph", None)
    ph = _any(phase) if phase is not None else None
    cls = PHASES.get(ph) if isinstance(ph, str) else None
    if cls is None:
        kind = "without a phase ('ph')" if phase is None else f"of unknown phase {ph!r}"[:60]
        repairs.skipped[("event", kind)] += 1
        return None
    event = _struct(cls, fields, "", repairs.fields, repairs.events)
    return event  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Field:
    name: str
    key: str  # its name in the JSON
    info: mi.Type
    required: bool
    decode: Callable[[msgspec.Raw], Any]  # the strict decoder of its declared type


@cache
def _schema(cls: type) -> tuple[_Field, ...]:
    """The fields of struct `cls`, each with the strict decoder of its declared type."""
    declared = msgspec.structs.fields(cls)
    inspected = mi.type_info(cls).fields  # type: ignore[attr-defined]
    return tuple(
        _Field(d.name, d.encode_name, i.type, i.required, msgspec.json.Decoder(d.type).decode)
        for d, i in zip(declared, inspected, strict=True)
    )


def _struct(
    cls: type,
    fields: _Fields,
    prefix: str,
    dropped: Counter[tuple[str, str]],
    lost: Counter[tuple[str, str]] | None = None,
) -> Any:
    """An instance of struct `cls` from its undecoded fields, each read as well as it can be.

    A field that cannot be read keeps its default (counted in `dropped`); a required one makes
    the whole struct None (counted in `lost`, else in `dropped`).
    """
    values: dict[str, Any] = {}
    for f in _schema(cls):
        raw = fields.get(f.key)
        path = prefix + f.key
        value = _DROP if raw is None else _value(raw, f, path, dropped)
        if value is not _DROP:
            values[f.name] = value
        elif f.required:
            found = "missing" if raw is None else _found(_any(raw), f.info)
            (dropped if lost is None else lost)[(path, found)] += 1
            return None
        elif raw is not None:
            dropped[(path, _found(_any(raw)))] += 1
    return cls(**values)


def _value(raw: msgspec.Raw, f: _Field, path: str, dropped: Counter[tuple[str, str]]) -> Any:
    """One field's value, coerced where the meaning is clear; _DROP otherwise."""
    try:
        return f.decode(raw)
    except (msgspec.ValidationError, RecursionError):
        pass
    nested = _nested(f.info)
    if isinstance(nested, mi.StructType):
        return _nested_struct(raw, nested.cls, path, dropped)
    if isinstance(nested, mi.ListType) and isinstance(nested.item_type, mi.StructType):
        try:
            items = _LIST.decode(raw)
        except msgspec.ValidationError:
            return _DROP
        cls, where = nested.item_type.cls, f"{path}[]"
        out = [_nested_struct(item, cls, where, dropped) for item in items]
        return [x for x in out if x is not _DROP]
    return _coerce(_any(raw), f.info)


def _nested_struct(
    raw: msgspec.Raw, cls: type, path: str, dropped: Counter[tuple[str, str]]
) -> Any:
    try:
        fields = _FIELDS.decode(raw)
    except msgspec.ValidationError:
        if path.endswith("[]"):  # an item of a list: counted here, the list is kept
            dropped[(path, _found(_any(raw)))] += 1
        return _DROP
    value = _struct(cls, fields, f"{path}.", dropped)
    return _DROP if value is None else value


def _nested(info: mi.Type) -> mi.Type:
    """The struct or list type inside `T | None`, else `info` itself."""
    if isinstance(info, mi.UnionType):
        kinds = [t for t in info.types if not isinstance(t, mi.NoneType)]
        if len(kinds) == 1:
            return kinds[0]
    return info


# complex: one case per coercion (numeric string, number to int or float, number to str), in the
# order they take precedence.
def _coerce(value: Any, info: mi.Type) -> Any:
    """`value` as type `info` where its meaning is clear: "12" -> 12, "0x1f" -> 31, 7 -> "7"."""
    kinds = info.types if isinstance(info, mi.UnionType) else (info,)
    numeric = [k for k in kinds if isinstance(k, mi.IntType | mi.FloatType)]
    if isinstance(value, str) and numeric:
        number = _number(value)
        if number is not None:
            for kind in numeric:
                if _fits(number, kind):
                    return int(number) if isinstance(kind, mi.IntType) else float(number)
    if isinstance(value, int | float) and not isinstance(value, bool):
        for kind in numeric:
            if _fits(value, kind):
                return int(value) if isinstance(kind, mi.IntType) else float(value)
        if not numeric and any(isinstance(k, mi.StrType) for k in kinds):
            return str(value)  # a name written as a number
    return _DROP


def _number(text: str) -> int | float | None:
    """A numeric string's value ("12", "1.5e3", "0x1f"); None when it is not a finite number."""
    text = text.strip()
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _fits(number: float, kind: mi.Type) -> bool:
    if not math.isfinite(number):
        return False
    if isinstance(kind, mi.IntType) and number != int(number):
        return False
    ge, le = getattr(kind, "ge", None), getattr(kind, "le", None)
    return (ge is None or number >= ge) and (le is None or number <= le)


def _any(raw: msgspec.Raw) -> Any:
    """A JSON value as Python objects; a marker string for a number out of range or deep nesting."""
    try:
        return _ANY.decode(raw)
    except msgspec.ValidationError:
        return _OUT_OF_RANGE
    except RecursionError:
        return _TOO_DEEP


_OUT_OF_RANGE, _TOO_DEEP = object(), object()


# How a value above a bound of the schema reads in a note.
_ABOVE = {MAX_DURATION_US: "longer than a day"}


def _found(value: Any, info: mi.Type | None = None) -> str:
    """What a value is, in words, for a note: "a string", "a negative number", "null"..."""
    le = getattr(info, "le", None)
    if le is not None and isinstance(value, int | float) and value > le:
        return _ABOVE.get(le, f"a number above {le:g}")
    if value is _OUT_OF_RANGE:
        return "a number out of range"
    if value is _TOO_DEEP:
        return "a value nested too deep"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a negative number" if value < 0 else "a number"
    if isinstance(value, str):
        return "an empty string" if not value.strip() else "a string"
    return "a list" if isinstance(value, list) else "an object"
