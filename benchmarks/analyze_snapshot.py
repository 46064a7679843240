"""Dump `torchpace analyze --format json` of every fixture, corpus and holdout trace, to diff.

    python benchmarks/analyze_snapshot.py OUT_DIR [--jobs 1] [--top]
    diff -r BEFORE_DIR AFTER_DIR

A change to how traces are loaded or judged must leave every report byte-identical (or say which
figure was wrong). Each trace file is analysed alone, and each folder holding trace files as one
multi-rank run, through the library path the command calls (`torchpace.analyze`, then the JSON
renderer); a trace that cannot be analysed writes its error instead.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = [
    ROOT / "tests/fixtures/traces",
    ROOT / "tests/fixtures/corpus",
    ROOT / "tests/fixtures/holdout",
]
_SUFFIXES = (".json", ".json.gz")


def cases() -> list[Path]:
    """Every trace file, and every folder that holds trace files, under the fixture roots."""
    found: set[Path] = set()
    for root in FIXTURES:
        for path in root.rglob("*"):
            if (
                path.is_file()
                and path.name.endswith(_SUFFIXES)
                and path.name != "kernel_names.json"
            ):
                found.add(path)
                found.add(path.parent)
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--top", action="store_true", help="also compute the HTML report's tables")
    args = parser.parse_args()
    from torchpace import analyze
    from torchpace.report import render

    args.out.mkdir(parents=True, exist_ok=True)
    for path in cases():
        name = str(path.relative_to(ROOT)).replace("/", "__")
        try:
            diagnosis = analyze(path, jobs=args.jobs, top=args.top)
            text = render(diagnosis, "json")
            if args.top:  # the HTML report's tables and pictures, from the headline's events
                text += f"{diagnosis.top!r}\n{diagnosis.pictures!r}\n"
        except Exception as exc:  # the error is the output to compare
            text = f"ERROR {type(exc).__name__}: {exc}\n"
        (args.out / f"{name}.json").write_text(text)
        print(hashlib.sha1(text.encode()).hexdigest()[:10], name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
