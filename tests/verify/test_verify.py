"""--verify's logic on scripted arms and a fake clock: which fixes it keeps, which it calls no gain,
inconclusive or failed, what the budget leaves out, and how every report words it. Nothing here
times a real run (benchmarks/bench_verify_signs.py does, and checks the signs against plain runs);
the child test at the end runs a real script for what it does, not how fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding, Severity
from torchpace.measure import Arm, NoProbe, Timed, Window
from torchpace.measure.process import ENV_OUT, ENV_STEPS, ENV_WARMUP, ChildFailed, read_steps
from torchpace.report import render
from torchpace.trace.summary import Breakdown, TraceInfo
from torchpace.verify import Context, VerifyOptions, verify
from torchpace.verify.appliers import ENV_FIXES, Fix
from torchpace.verify.appliers.base import NOT_APPLICABLE
from torchpace.verify.run import Harness

SCRIPTS = Path(__file__).parent / "scripts"
CPU = Context(device="cpu", cores=2, cpu_bf16="none")
V100 = Context(device="cuda", cores=2, compute_capability=(7, 0))
OPTIONS = VerifyOptions(budget_s=180, warmup=2, steps=8, rounds=2, max_rounds=6)
PLAIN = "plain script"


def _diagnosis(*findings: Finding) -> Diagnosis:
    info = TraceInfo(path="t.json", device_kind="cpu")
    return Diagnosis(info, Breakdown(steps=(), median_step_ms=30.0, median_phase_ms={}), findings)


def _stall(current: int, suggested: int) -> Finding:
    evidence = {"current_workers_count": current, "suggested_workers_count": suggested}
    return Finding("dataloader-stall", Severity.HIGH, "waits", evidence, "workers", saving_ms=40.0)


ANOMALY = Finding(
    "debug-api-enabled",
    Severity.HIGH,
    "anomaly",
    {"debug_apis": ["torch.autograd.set_detect_anomaly(True): every backward op is checked"]},
    "torch.autograd.set_detect_anomaly(False)",
)
GRAD_IN_EVAL = Finding("grad-in-eval", Severity.MEDIUM, "eval", {"eval_mode": True}, "no_grad")


class FakeClock:
    """Time that moves only when a scripted run says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


Script = Callable[[str, int], float]  # (arm name, run number) -> ms per step of that run


def scripted(
    step_ms: Script, *, run_s: float = 5.0, crash: str = "", crash_with: str = ""
) -> Harness:
    """Arms whose runs take `run_s` seconds of fake time and measure `step_ms(arm, n)` per step
    (a little step-to-step jitter); the arm whose name holds `crash` fails as a crashed child
    does, its last stderr line `crash_with`."""
    clock = FakeClock()
    counts: dict[str, int] = {}

    def arm(name: str, fixes: list[Fix], argv: list[str], timeout: float) -> Arm:
        def run(window: Window) -> Timed:
            n = counts[name] = counts.get(name, -1) + 1
            clock.advance(run_s)
            if crash and crash in name:
                tail = crash_with or "RuntimeError: element 0 of tensors does not require grad"
                raise ChildFailed(f"{argv[0]} exited with status 1: {tail}")
            ms = step_ms(name, n)
            return Timed(tuple(ms * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(window.steps)))

        return Arm(name, run)

    return Harness(arm, clock, NoProbe())


def _workers(name: str) -> int:
    return int(name.split(",")[0].split("=")[1]) if name.startswith("num_workers=") else 0


def test_workers_that_hide_a_slow_dataset_are_kept_best_first() -> None:
    """Plain 100 ms a step; 2 workers 45 ms, 4 workers 30 ms."""
    times = {0: 100.0, 2: 45.0, 4: 30.0}
    harness = scripted(lambda name, n: times[_workers(name)])
    got = verify(_diagnosis(_stall(0, 4)), ["train.py"], CPU, OPTIONS, harness=harness)
    m = got.findings[0].measured
    assert m is not None and m.status == "measured" and m.best is not None, m
    assert m.best.label.startswith("num_workers=4") and m.best.speedup == pytest.approx(3.33, 0.02)
    assert [t.label.split(",")[0] for t in m.tried] == ["num_workers=4", "num_workers=2"]
    assert m.saving_ms == pytest.approx(70.0, rel=0.02)
    v = got.verification
    assert v is not None and v.rounds == 2  # settled at the minimum: no round added
    assert "Measured saving" in render(got, "text")


def test_workers_that_slow_cheap_samples_are_no_gain_and_not_prescribed() -> None:
    times = {0: 100.0, 1: 130.0, 2: 150.0}
    harness = scripted(lambda name, n: times[_workers(name)])
    got = verify(_diagnosis(_stall(0, 1)), ["train.py"], CPU, OPTIONS, harness=harness)
    m = got.findings[0].measured
    assert m is not None and m.status == "no-gain" and m.best is not None, m
    assert m.best.verdict == "slower"
    assert "no gain here" in render(got, "text")


def test_fixes_that_help_alone_are_measured_together_in_phase_two() -> None:
    times = {PLAIN: 100.0, "anomaly detection off": 60.0, "all safe fixes together": 40.0}
    harness = scripted(lambda name, n: times.get(name, 70.0))  # no_grad in eval: 70 ms
    got = verify(_diagnosis(ANOMALY, GRAD_IN_EVAL), ["train.py"], CPU, OPTIONS, harness=harness)
    for f in got.findings:
        assert f.measured is not None and f.measured.status == "measured", (f.rule, f.measured)
    v = got.verification
    assert v is not None and v.combined is not None and len(v.combined_fixes) == 2
    assert v.combined.verdict == "faster" and v.combined.speedup == pytest.approx(2.5, 0.02)


def test_a_crashing_arm_is_reported_in_every_format_and_the_rest_kept() -> None:
    harness = scripted(
        lambda name, n: 100.0 if name == PLAIN else 60.0, crash="anomaly detection off"
    )
    got = verify(_diagnosis(ANOMALY, GRAD_IN_EVAL), ["train.py"], CPU, OPTIONS, harness=harness)
    by_rule = {f.rule: f.measured for f in got.findings}
    crashed, kept = by_rule["debug-api-enabled"], by_rule["grad-in-eval"]
    assert (
        crashed is not None and crashed.status == "failed" and "exited with status" in crashed.note
    )
    assert kept is not None and kept.status == "measured"
    for fmt in ("text", "md", "html", "json"):
        assert "exited with status" in render(got, fmt)


def test_a_noisy_gain_gets_more_rounds_until_it_settles() -> None:
    """Fresh runs of a script drift: the fixed arm's runs alternate 50 and 75 ms (plain 100).
    Two rounds leave the interval wide; the core adds rounds while the budget lasts."""
    harness = scripted(lambda name, n: 100.0 if name == PLAIN else (50.0, 75.0)[n % 2])
    got = verify(_diagnosis(ANOMALY), ["train.py"], CPU, OPTIONS, harness=harness)
    m = got.findings[0].measured
    assert m is not None and m.status == "measured" and m.best is not None, m
    assert m.best.runs > OPTIONS.rounds and m.best.speedup_low > 1.0


def test_a_budget_too_small_to_settle_says_inconclusive_and_what_would_settle_it() -> None:
    """The same drifting arm with room for 2 rounds only: no verdict, no ratio, the advice."""
    harness = scripted(lambda name, n: 100.0 if name == PLAIN else (50.0, 75.0)[n % 2])
    options = VerifyOptions(budget_s=40, warmup=2, steps=8, rounds=2, max_rounds=6)
    got = verify(_diagnosis(ANOMALY), ["train.py"], CPU, options, harness=harness)
    m = got.findings[0].measured
    assert m is not None and m.status == "inconclusive", m
    assert m.note.startswith("inconclusive: run-to-run spread")
    assert "more rounds (~" in m.note and "s) would settle it" in m.note
    text = render(got, "text")
    assert "inconclusive: run-to-run spread" in text
    assert f"{m.best.speedup:.2f}x" not in text if m.best else True  # no ratio for it


def test_the_budget_leaves_the_lowest_saving_fixes_out_and_says_so() -> None:
    """Runs of 20 s in a 60 s budget: the plain script and one fix fit, the second does not."""
    harness = scripted(lambda name, n: 100.0 if name == PLAIN else 60.0, run_s=20.0)
    options = VerifyOptions(budget_s=60, warmup=2, steps=8, rounds=2, max_rounds=2)
    ordered = [
        Finding("debug-api-enabled", Severity.HIGH, "a", ANOMALY.evidence, "f", saving_ms=30.0),
        Finding("grad-in-eval", Severity.MEDIUM, "e", {"eval_mode": True}, "f", saving_ms=5.0),
    ]
    got = verify(_diagnosis(*ordered), ["train.py"], CPU, options, harness=harness)
    by_rule = {f.rule: f.measured for f in got.findings}
    left = by_rule["grad-in-eval"]
    assert left is not None and left.status == "no-time" and "--verify-budget ran out" in left.note
    v = got.verification
    assert v is not None and v.not_measured
    assert by_rule["debug-api-enabled"] is not None
    (need,) = [n for n in v.notes if n.startswith("--verify-budget 60 s ran out")]
    # 20 s runs; a priming and a closing run, 2 rounds of 3 arms, in phase 1's share (3/4).
    assert "a run of this script took 20 s here" in need and "about 213 s" in need
    assert need.endswith("(--verify-budget 240)")


def test_a_baseline_that_fails_fails_every_planned_finding_and_keeps_the_rest() -> None:
    harness = scripted(lambda name, n: 100.0, crash=PLAIN)
    got = verify(_diagnosis(ANOMALY), ["train.py"], CPU, OPTIONS, harness=harness)
    m = got.findings[0].measured
    assert m is not None and m.status == "failed" and "the baseline" in m.note


# --- the child: real runs of a script, for what they do (no time is judged) ----------------------


def _child(script: list[str], fixes: list[dict[str, str]], out: Path) -> tuple[int, str]:
    """One run of the child as --verify starts it: its status and last stderr line."""
    env = {**os.environ, ENV_FIXES: json.dumps(fixes), ENV_WARMUP: "2", ENV_STEPS: "4"}
    env[ENV_OUT] = str(out)
    argv = [sys.executable, "-m", "torchpace.verify.child", *script]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    return done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


@pytest.mark.slow
def test_the_fp16_arm_runs_under_the_doctor_and_refuses_a_closure_step(tmp_path: Path) -> None:
    """On CPU, as on CUDA: the scaler's patches under the doctor runner's own patches."""
    fp16 = [{"applier": "autocast", "device": "cpu", "dtype": "float16"}]
    script = str(SCRIPTS / "closure_step.py")
    status, last = _child([script, "--sgd"], fp16, tmp_path / "sgd.json")
    assert status == 0, last
    assert len(read_steps(tmp_path / "sgd.json").costs()) == 1  # 4 steps: one block
    status, last = _child([script], fp16, tmp_path / "lbfgs.json")
    assert status == 3 and "not applicable here" in last and "LBFGS.step(closure)" in last


def test_a_refused_fp16_arm_needs_code_and_is_no_failure() -> None:
    """--verify planned for a V100 on a script stepping LBFGS with a closure: the child refuses
    the fp16 arm (as the child test above shows it does) and the finding keeps its estimate."""
    amp = Finding("no-mixed-precision", Severity.HIGH, "fp32", {}, "autocast", saving_ms=10.0)
    refusal = f"torchpace: {NOT_APPLICABLE}a GradScaler cannot drive LBFGS.step(closure)"
    harness = scripted(lambda name, n: 100.0, crash="float16", crash_with=refusal)
    got = verify(_diagnosis(amp), ["train.py"], V100, OPTIONS, harness=harness)
    m = got.findings[0].measured
    assert m is not None and m.status == "needs-code", m
    assert "closure" in m.note and m.numerics
    v = got.verification
    assert v is not None and v.failed == () and any("not applicable" in n for n in v.notes)
    assert "not applicable here" in render(got, "text")
