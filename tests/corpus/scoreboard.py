"""Print how many expert readings hold, and what each rule says on each trace.

python -m tests.corpus.scoreboard             # corpus and held-out set, from the repository root
python -m tests.corpus.scoreboard holdout     # one set: corpus | holdout
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from . import readings, readings_holdout
from .conftest import report_of
from .readings import Check

SETS = {
    "corpus": (readings.TRACES, readings.every_check),
    "holdout": (readings_holdout.TRACES, readings_holdout.every_check),
}


def failures(checks: Iterable[Check]) -> tuple[int, list[Check]]:
    """How many checks ran, and those that do not hold (a trace that does not load fails all)."""
    failed, count = [], 0
    for check in checks:
        count += 1
        try:
            ok = check.holds(report_of(check.trace))
        except Exception as exc:
            ok = False
            check = Check(
                check.trace, check.name, f"{check.says} ({type(exc).__name__})", check.holds
            )
        if not ok:
            failed.append(check)
    return count, failed


def print_findings(traces: Iterable[str]) -> None:
    for trace in traces:
        try:
            doc = report_of(trace)
        except Exception as exc:
            print(f"{trace}: does not load ({type(exc).__name__}: {exc})")
            continue
        head = doc["header"]
        print(
            f"{trace}: {head['step_count']} steps ({head['step_source']}), median {head['median_step_ms']:.1f} ms"
        )
        for f in doc["findings"]:
            rank = f" rank {f['rank']}" if f["rank"] is not None else ""
            saving = f"{f['saving_ms']:.2f} ms" if f["saving_ms"] is not None else "n/a"
            print(f"  {f['severity']:<6} {f['rule']}{rank}: saving {saving}; {f['summary'][:110]}")


def main(argv: list[str]) -> int:
    names = argv or list(SETS)
    bad = 0
    for name in names:
        checks = SETS[name][1]
        count, failed = failures(checks())
        bad += len(failed)
        print(f"{name}: {count - len(failed)} of {count} checks hold")
        for check in failed:
            print(f"  FAIL {check.id}: {check.says}")
    print()
    for name in names:
        print_findings(SETS[name][0])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
