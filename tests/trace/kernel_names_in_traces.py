"""The distinct kernel names of every recorded trace in tests/fixtures (corpus and shared traces).

    python -m tests.trace.kernel_names_in_traces        # name, calls, ms, classification

Reads the raw JSON (not the loader), so traces the loader refuses still give their names. Used to
draw the kernel-name table test (tests/fixtures/kernel_names.json) and by the coverage test.
"""

from __future__ import annotations

import gzip
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import msgspec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


class _Event(msgspec.Struct):
    name: str = ""
    cat: str = ""
    dur: float | int | str | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Event] = []


def trace_files() -> list[Path]:
    """Every recorded trace file under tests/fixtures (corpus folders included)."""
    return sorted(p for p in FIXTURES.rglob("*.json*") if p.name != "kernel_names.json")


@cache
def kernel_names() -> dict[str, tuple[int, float, str]]:
    """name -> (calls, total us, first file) over every fixture trace."""
    out: dict[str, list] = defaultdict(lambda: [0, 0.0, ""])
    decoder = msgspec.json.Decoder(_Doc | list[_Event])  # a bare list: a pre-Kineto trace
    for path in trace_files():
        data = path.read_bytes()
        doc = decoder.decode(gzip.decompress(data) if path.suffix == ".gz" else data)
        for e in doc.traceEvents if isinstance(doc, _Doc) else doc:
            if e.cat in ("kernel", "Kernel"):
                row = out[e.name]
                row[0] += 1
                row[1] += e.dur if isinstance(e.dur, int | float) else 0.0
                row[2] = row[2] or str(path.relative_to(FIXTURES))
    return {name: (n, us, where) for name, (n, us, where) in out.items()}


def main() -> int:
    from torchpace.trace.kernels import kernel_info

    rows = sorted(kernel_names().items(), key=lambda kv: -kv[1][1])
    for name, (calls, us, where) in rows:
        info = kernel_info(name)
        print(
            f"{us / 1e3:9.1f} ms {calls:6d}  {info.op:<11} {info.library:<15} {info.dtype or '-':<5} "
            f"tc={info.tensor_cores!s:<5} {where}  {name[:100]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
