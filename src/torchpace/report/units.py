"""Numbers for people: milliseconds, shares and bytes, and evidence values read by their key's unit."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from torchpace.doctor.finding import EvidenceValue
from torchpace.trace.stats import fmt_bytes

# How many items of a list or mapping evidence value a text report shows before "(+N more)".
MAX_ITEMS = 6


def ms(value: float) -> str:
    """A duration given in ms, with the digits a reader can use: 12.3 s, 1234, 48.1, 2.35, 0.042 ms."""
    if not math.isfinite(value):
        return "n/a"
    magnitude = abs(value)
    if magnitude == 0:
        return "0 ms"
    if magnitude >= 10_000:
        return f"{value / 1000:.1f} s"
    if magnitude >= 100:
        return f"{value:.0f} ms"
    if magnitude >= 10:
        return f"{value:.1f} ms"
    if magnitude >= 1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def us(value: float) -> str:
    """A duration given in microseconds, shown in ms once it reaches a millisecond."""
    if abs(value) >= 1000:
        return ms(value / 1000)
    return f"{value:.1f} us" if abs(value) >= 10 else f"{value:.2f} us"


def seconds(value: float) -> str:
    """A duration given in seconds."""
    return f"{value:.2f} s" if abs(value) >= 1 else ms(value * 1000)


def run_length(s: float) -> str:
    """Seconds as a person reads a run's length: 0.42 s, 12.3 s, 4 min 05 s."""
    if s < 10:
        return f"{s:.2f} s"
    if s < 120:
        return f"{s:.1f} s"
    return f"{int(s // 60)} min {int(s % 60):02d} s"


def share(fraction: float) -> str:
    """A 0..1 fraction as a percentage: 0.347 -> '35%'; small shares keep a decimal."""
    if not math.isfinite(fraction):
        return "n/a"
    pct = fraction * 100
    if pct != 0 and abs(pct) < 10:
        return f"{pct:.1f}%"
    return f"{pct:.0f}%"


def number(value: float) -> str:
    """A plain count or ratio: integers as integers, other floats to 3 significant digits."""
    if isinstance(value, int) or (math.isfinite(value) and value == int(value)):
        return f"{int(value):,}"
    return f"{value:.3g}"


def memory(n: float) -> str:
    """Bytes as a table or chart shows memory: whole MiB below a GiB, else GiB to 2 decimals."""
    return f"{n / 2**20:,.0f} MiB" if n < 2**30 else f"{n / 2**30:.2f} GiB"


def decimal(unit: str) -> Callable[[float], str]:
    """A formatter for a decimal unit shown as given: 9.94 -> '9.94 GB'."""
    return lambda value: f"{value:.3g} {unit}"


# The unit word in an evidence key -> its formatter. Keys carry their unit: `step_ms`,
# `wait_fraction`, `h2d_bytes`; a rate adds `_per_<thing>`: `copy_ms_per_step`, `bandwidth_gb_per_s`.
UNITS: dict[str, Callable[[float], str]] = {
    "ms": ms,
    "us": us,
    "s": seconds,
    "seconds": seconds,
    "fraction": share,
    "share": share,
    "bytes": fmt_bytes,
    "gb": decimal("GB"),
    "mb": decimal("MB"),
    "pct": lambda value: f"{value:.1f}%",
    "percent": lambda value: f"{value:.1f}%",
    "x": lambda value: f"{value:.2f}x",
    "count": number,
}


def unit_of(key: str) -> tuple[Callable[[float], str], str] | None:
    """The formatter a key names and the rate it is per ('' if none); None for a key with no unit.

    `wait_ms` -> (ms, ''); `copy_ms_per_step` -> (ms, 'step'); `bandwidth_gb_per_s` -> (GB, 's');
    `copies_per_step_count` -> (number, 'step').
    """
    words = key.lower().split("_")
    if "per" in words[1:-1]:
        at = words.index("per", 1)
        per = [w for w in words[at + 1 :] if w != "count"]
        fmt = UNITS.get(words[at - 1], number)
        return fmt, "_".join(per)
    if words[-1] in UNITS:
        return UNITS[words[-1]], ""
    return None


def evidence_value(key: str, value: EvidenceValue) -> str:
    """Format one evidence value using the unit its key names."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return _scalar(key, value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return _mapping(key, value)
    return _sequence(key, value)


def _scalar(key: str, value: float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    unit = unit_of(key)
    if unit is None:
        return number(value)
    fmt, per = unit
    return f"{fmt(value)}/{per}" if per else fmt(value)


def _mapping(key: str, value: Mapping[str, EvidenceValue]) -> str:
    # Inner keys may name their own unit; otherwise the outer key's unit applies to each value.
    parts = []
    for inner, item in list(value.items())[:MAX_ITEMS]:
        unit_key = inner if unit_of(inner) is not None else key
        parts.append(f"{inner}={evidence_value(unit_key, item)}")
    return _with_more(parts, len(value))


def _sequence(key: str, value: Sequence[EvidenceValue]) -> str:
    # A list keyed `step_ms` holds milliseconds; one keyed `ops` holds names.
    if not value:
        return "none"  # an empty list printed nothing after its key
    parts = [evidence_value(key, item) for item in value[:MAX_ITEMS]]
    return _with_more(parts, len(value))


def _with_more(parts: list[str], total: int) -> str:
    text = ", ".join(parts)
    if total > len(parts):
        text += f" (+{total - len(parts)} more)"
    return text
