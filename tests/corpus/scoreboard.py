"""Print how many expert readings hold, and what each rule says on each corpus trace.

python -m tests.corpus.scoreboard           # from the repository root
"""

from __future__ import annotations

import sys

from .conftest import report_of
from .readings import TRACES, every_check


def main() -> int:
    checks = list(every_check())
    failed = []
    for check in checks:
        try:
            ok = check.holds(report_of(check.trace))
        except Exception as exc:  # a trace that does not load fails all its checks
            ok = False
            check = type(check)(
                check.trace, check.name, f"{check.says} ({type(exc).__name__})", check.holds
            )
        if not ok:
            failed.append(check)
    print(f"{len(checks) - len(failed)} of {len(checks)} checks hold")
    for check in failed:
        print(f"  FAIL {check.id}: {check.says}")
    print()
    for trace in TRACES:
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
