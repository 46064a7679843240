"""`doctor --verify` on small scripts of our own, against plain back-to-back runs of the same fix.

    PYTHONPATH=src python benchmarks/bench_verify_signs.py [--budget 150] [--rounds 3]

The timed half of what tests/verify/test_verify.py checks on scripted arms: each case runs
--verify for real (every run a fresh process, interleaved) and then the fix applied in the
script's own code, plain then fixed, one round; it prints both verdicts and whether their signs
agree, with the machine's load. Effects are made large (a Dataset sleeping 20 ms per sample,
anomaly detection on many small ops) so that their sign survives a shared machine:
    sleepy_loader: workers hide the sleep      (expected: measured, faster; back-to-back > 1)
    cheap_loader:  workers on cheap samples    (expected: no gain here; back-to-back not faster)
    debug_eval:    anomaly detection off, and no_grad in evaluation (expected: both measured)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding, Severity
from torchpace.measure import Settings, measure
from torchpace.measure.process import command_arm
from torchpace.trace.summary import Breakdown, TraceInfo
from torchpace.verify import Context, VerifyOptions, verify

SCRIPTS = Path(__file__).resolve().parents[1] / "tests" / "verify" / "scripts"
CPU = Context(device="cpu", cores=len(os.sched_getaffinity(0)), cpu_bf16="none")


def _diagnosis(*findings: Finding) -> Diagnosis:
    info = TraceInfo(path="t.json", device_kind="cpu")
    return Diagnosis(info, Breakdown(steps=(), median_step_ms=30.0, median_phase_ms={}), findings)


def _stall(suggested: int) -> Finding:
    evidence = {"current_workers_count": 0, "suggested_workers_count": suggested}
    return Finding("dataloader-stall", Severity.HIGH, "waits", evidence, "workers", saving_ms=40.0)


ANOMALY = Finding(
    "debug-api-enabled",
    Severity.HIGH,
    "anomaly",
    {"debug_apis": ["torch.autograd.set_detect_anomaly(True): every backward op is checked"]},
    "torch.autograd.set_detect_anomaly(False)",
)
GRAD_IN_EVAL = Finding("grad-in-eval", Severity.MEDIUM, "eval", {"eval_mode": True}, "no_grad")


def back_to_back(script: str, fixed: list[str], steps: int) -> str:
    """The fix in the script's own code, plain then fixed, one round: speedup and verdict."""
    argv = [sys.executable, "-m", "torchpace.verify.child", str(SCRIPTS / script)]
    arms = [command_arm("plain", argv), command_arm("fixed", argv + fixed)]
    result = measure(arms, Settings(warmup=2, steps=steps, repeats=1, prime=False))
    arm = result.arm("fixed")
    assert arm.ratio is not None
    return arm.why if arm.verdict == "inconclusive" else f"{arm.ratio.speedup:.2f}x ({arm.verdict})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=150.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    cases = [
        ("sleepy_loader.py", [_stall(4)], ["--workers", "2"]),
        ("cheap_loader.py", [_stall(1)], ["--workers", "1"]),
        ("debug_eval.py", [ANOMALY, GRAD_IN_EVAL], ["--no-anomaly"]),
    ]
    if args.smoke:  # numbers from a smoke run mean nothing
        args.budget, args.rounds, args.steps, cases = 1.0, 1, 4, cases[:1]  # the plain runs only
    options = VerifyOptions(args.budget, warmup=2, steps=args.steps, rounds=args.rounds)
    print(
        f"{CPU.cores} usable cores, load average {os.getloadavg()[0]:.1f}; budget {args.budget:g} s"
    )
    for script, findings, fixed in cases:
        got = verify(_diagnosis(*findings), [str(SCRIPTS / script)], CPU, options)
        for f in got.findings:
            m = f.measured
            best = m.best if m is not None else None
            shown = f"{best.label} {best.speedup:.2f}x ({best.verdict})" if best else ""
            shown = m.note if m is not None and m.status == "inconclusive" else shown
            print(f"{script:18s} {f.rule:18s} {m.status if m else '-':12s} {shown}")
        if not args.smoke:  # a smoke run stops at --verify's plain runs
            b2b = back_to_back(script, fixed, args.steps)
            print(f"{script:18s} back to back {' '.join(fixed)}: {b2b}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
