"""Each pair's rule estimate beside the measured difference: the table of docs/rules-calibration.md.

    python benchmarks/gpu/pairs/calibrate.py DIR     # DIR/<pair>/{pair.json, before-report.json,
                                                     #   after-report.json} -> DIR/calibration.json,
                                                     #   DIR/calibration.md (also printed)

The reports are `torchpace analyze <pair>/{before,after}.json.gz --format json`. A rule's saving is
judged by the kind of figure it states (its `saving_method`):
- an estimate: within +-25% of the measured saving (before - after, unprofiled, interleaved);
- an upper bound ("upper bound: ..."): at least the low end of the measured saving's interval;
- none (saving_ms null): only "fires before, silent after" is checked; the difference is shown.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

TOLERANCE = 0.25


def _finding(report: dict[str, Any], rule: str) -> dict[str, Any] | None:
    return next((f for f in report.get("findings", []) if f["rule"] == rule), None)


def _skipped(report: dict[str, Any], rule: str) -> str | None:
    found = next((s for s in report.get("skipped", []) if s["rule"] == rule), None)
    return found["reason"] if found else None


def _trace_saving(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    b, a = before["header"].get("median_step_ms"), after["header"].get("median_step_ms")
    return round(b - a, 4) if b is not None and a is not None else None


def _kind(finding: dict[str, Any]) -> str:
    if finding.get("saving_ms") is None:
        return "none"
    return (
        "upper bound" if finding.get("saving_method", "").startswith("upper bound") else "estimate"
    )


def judge(estimate: float | None, kind: str, measured: float, interval: list[float]) -> str:
    """The verdict on one estimate against the measured saving (ms per step)."""
    if kind == "none" or estimate is None:
        return "no estimate stated"
    if kind == "upper bound":
        return "bound holds" if estimate >= interval[0] else "bound broken"
    if measured <= 0:
        return "nothing measured to compare"
    error = (estimate - measured) / measured
    verdict = "within" if abs(error) <= TOLERANCE else "outside"
    return f"{verdict} +-{TOLERANCE:.0%} ({error:+.0%})"


def row(folder: Path) -> dict[str, Any]:
    """One pair's calibration row from its folder."""
    pair = json.loads((folder / "pair.json").read_text())
    rule = pair["rule"]
    before = json.loads((folder / "before-report.json").read_text())
    after = json.loads((folder / "after-report.json").read_text())
    fired, skipped = _finding(before, rule), _skipped(before, rule)
    # A rule that could not run judged nothing: neither "fires" nor "silent" is true of it.
    judged = skipped is None
    out: dict[str, Any] = {
        "pair": pair["pair"],
        "rule": rule,
        "device_name": pair["environment"]["device_name"],
        "torch": pair["environment"]["torch"],
        "cuda": pair["environment"]["cuda"],
        "fires_before": fired is not None if judged else None,
        "silent_after": _finding(after, rule) is None if judged else None,
        "not_applicable": skipped,
        "measured_saving_ms": pair["measured_saving_ms"],
        "measured_saving_interval_ms": pair["measured_saving_interval_ms"],
        "speedup": pair["speedup"],
        # The same difference read off the two profiled traces: what a fixture test can pin.
        "trace_saving_ms": _trace_saving(before, after),
        "estimated_saving_ms": fired.get("saving_ms") if fired else None,
        "saving_kind": _kind(fired) if fired else None,
    }
    if fired is not None:
        out["verdict"] = judge(
            out["estimated_saving_ms"],
            out["saving_kind"],
            pair["measured_saving_ms"],
            pair["measured_saving_interval_ms"],
        )
    else:
        out["verdict"] = (
            f"not applicable: {out['not_applicable']}" if out["not_applicable"] else "did not fire"
        )
    return out


def _yes(value: bool | None) -> str:
    return "n/a" if value is None else "yes" if value else "no"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table, one row per pair, with the device each figure came from."""
    lines = [
        "| pair | rule | fires before | silent after | estimated saving (ms/step) | kind | "
        "measured saving (ms/step, 95% interval) | traces' difference | speedup | verdict | "
        "device, torch, CUDA |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        low, high = r["measured_saving_interval_ms"]
        lines.append(
            f"| {r['pair']} | `{r['rule']}` | {_yes(r['fires_before'])} | "
            f"{_yes(r['silent_after'])} | {_ms(r['estimated_saving_ms'])} | "
            f"{r['saving_kind'] or '-'} | {_ms(r['measured_saving_ms'])} ({low:.3f} to {high:.3f}) | "
            f"{_ms(r['trace_saving_ms'])} | "
            f"{r['speedup']:.2f}x | {r['verdict']} | {r['device_name']}, torch {r['torch']}, "
            f"CUDA {r['cuda'] or '-'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the folder holding one sub-folder per pair")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    rows, missing = [], []
    for sub in sorted(p for p in folder.iterdir() if (p / "pair.json").exists()):
        try:
            rows.append(row(sub))
        except (OSError, KeyError, ValueError) as exc:
            missing.append(f"{sub.name}: {type(exc).__name__}: {exc}")
    if not rows:
        parser.error(f"no pair with pair.json and both reports under {folder}; run the pairs first")
    (folder / "calibration.json").write_text(json.dumps(rows, indent=2) + "\n")
    table = markdown(rows)
    (folder / "calibration.md").write_text(table)
    print(table, end="")
    for line in missing:
        print(f"left out: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
