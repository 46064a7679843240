"""--verify on small scripts of our own, each run a fresh process: it keeps the fixes that help,
reports those that do not as "no gain here", and agrees in sign with plain back-to-back runs.

Effects are made large (a Dataset sleeping 20 ms per sample, anomaly detection on many small
ops) so that their sign survives a shared machine; no absolute time is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding, Severity
from torchpace.measure import Settings, measure
from torchpace.measure.process import ENV_OUT, ENV_STEPS, ENV_WARMUP, command_arm, read_steps
from torchpace.report import render
from torchpace.trace.summary import Breakdown, TraceInfo
from torchpace.verify import Context, VerifyOptions, verify
from torchpace.verify.appliers import ENV_FIXES

pytestmark = pytest.mark.slow
SCRIPTS = Path(__file__).parent / "scripts"
CPU = Context(device="cpu", cores=2, cpu_bf16="none")
V100 = Context(device="cuda", cores=2, compute_capability=(7, 0))
QUICK = VerifyOptions(budget_s=70, warmup=2, steps=8, rounds=2)


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


def _back_to_back(script: str, plain: list[str], fixed: list[str]) -> float:
    """Speedup of the fix applied in the script's own code, plain then fixed, one round."""
    argv = [sys.executable, "-m", "torchpace.verify.child", str(SCRIPTS / script)]
    arms = [command_arm("plain", argv + plain), command_arm("fixed", argv + fixed)]
    result = measure(arms, Settings(warmup=2, steps=8, repeats=1, prime=False))
    ratio = result.arm("fixed").ratio
    assert ratio is not None
    return ratio.speedup


def test_workers_that_hide_a_sleeping_dataset_are_kept_and_agree_with_back_to_back() -> None:
    got = verify(_diagnosis(_stall(0, 4)), [str(SCRIPTS / "sleepy_loader.py")], CPU, QUICK)
    (stall,) = got.findings
    m = stall.measured
    assert m is not None and m.status == "measured" and m.best is not None, m
    assert m.best.speedup > 1 and len(m.tried) == 2
    workers = m.best.label.split(",")[0].split("=")[1]
    assert _back_to_back("sleepy_loader.py", [], ["--workers", workers]) > 1  # the same sign
    assert "Measured saving" in render(got, "text")


def test_workers_on_cheap_samples_are_no_gain_here_and_not_prescribed() -> None:
    got = verify(_diagnosis(_stall(0, 1)), [str(SCRIPTS / "cheap_loader.py")], CPU, QUICK)
    m = got.findings[0].measured
    assert m is not None and m.status == "no-gain" and m.best is not None, m
    workers = m.best.label.split(",")[0].split("=")[1]
    # Plain back-to-back runs do not find a gain either (their sign is not "faster").
    assert _back_to_back("cheap_loader.py", [], ["--workers", workers]) < 1 / 0.9
    assert "no gain here" in render(got, "text")


def test_debug_and_eval_fixes_help_alone_and_together() -> None:
    script = [str(SCRIPTS / "debug_eval.py")]
    # Two phases (each fix, then both together): room for both on a busy machine. Three rounds:
    # with two, the interval of a 3.6x gain spanned 0.007-1950x once while other tests ran (the
    # 95% t quantile for one degree of freedom is 12.7), and the gain read as "no gain here".
    options = VerifyOptions(budget_s=150, warmup=2, steps=8, rounds=3)
    got = verify(_diagnosis(ANOMALY, GRAD_IN_EVAL), script, CPU, options)
    by_rule = {f.rule: f.measured for f in got.findings}
    for rule, m in by_rule.items():
        assert m is not None and m.status == "measured" and m.best is not None, (rule, m)
    assert got.verification is not None and got.verification.combined is not None
    assert got.verification.combined.speedup > 1
    assert _back_to_back("debug_eval.py", [], ["--no-anomaly"]) > 1


def test_a_crashing_arm_is_reported_and_never_breaks_the_report() -> None:
    # no_grad around a forward the script backpropagates through: that run must fail.
    command = [str(SCRIPTS / "debug_eval.py"), "--no-anomaly", "--backward-through-eval"]
    options = VerifyOptions(budget_s=30, warmup=1, steps=4, rounds=1)
    got = verify(_diagnosis(GRAD_IN_EVAL), command, CPU, options)
    m = got.findings[0].measured
    assert m is not None and m.status == "failed" and "exited with status" in m.note, m
    for fmt in ("text", "md", "html", "json"):
        assert "exited with status" in render(got, fmt)


def _child(script: list[str], fixes: list[dict[str, str]], out: Path) -> tuple[int, str]:
    """One run of the child as --verify starts it: its status and last stderr line."""
    env = {**os.environ, ENV_FIXES: json.dumps(fixes), ENV_WARMUP: "2", ENV_STEPS: "4"}
    env[ENV_OUT] = str(out)
    argv = [sys.executable, "-m", "torchpace.verify.child", *script]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


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
    """--verify planned for a V100 on a script stepping LBFGS with a closure."""
    amp = Finding("no-mixed-precision", Severity.HIGH, "fp32", {}, "autocast", saving_ms=10.0)
    options = VerifyOptions(budget_s=40, warmup=1, steps=4, rounds=1)
    got = verify(_diagnosis(amp), [str(SCRIPTS / "closure_step.py")], V100, options)
    m = got.findings[0].measured
    assert m is not None and m.status == "needs-code", m
    assert "closure" in m.note and m.numerics
    v = got.verification
    assert v is not None and v.failed == () and any("not applicable" in n for n in v.notes)
    assert "not applicable here" in render(got, "text")
