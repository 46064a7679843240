"""Which fixes --verify applies for which findings, and how it turns measurements into verdicts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.verification import ArmFigures
from torchpace.fixes.policy import autocast_code
from torchpace.fixes.policy import target as policy_target
from torchpace.fixes.workers import Host, candidates
from torchpace.trace.stacks import SourceLocation
from torchpace.verify.appliers import Context, plan
from torchpace.verify.appliers.loader import _settle
from torchpace.verify.child import blocks
from torchpace.verify.figures import outcome
from torchpace.verify.run import _one_per_setting, _refused

CPU = Context(device="cpu", cores=2, cpu_bf16="none")


def _finding(rule: str, **evidence: object) -> Finding:
    return Finding(rule, Severity.MEDIUM, "s", evidence, "fix")  # type: ignore[arg-type]


def test_each_applicable_finding_gets_its_fix_and_the_rest_need_code() -> None:
    anomaly = _finding(
        "debug-api-enabled", debug_apis=["torch.autograd.set_detect_anomaly(True): x"]
    )
    (fix,) = plan(anomaly, CPU)
    assert fix.applier == "debug-off" and fix.params["anomaly"] and not fix.numerics
    where = Finding(
        "grad-in-eval", Severity.MEDIUM, "s", {}, "f", locations=(SourceLocation("t.py", 9),)
    )
    assert plan(where, CPU)[0].params == {"locations": [["t.py", 9]]}
    assert plan(_finding("data-parallel", device_count=1), CPU)[0].applier == "data-parallel"
    assert plan(_finding("data-parallel", device_count=4), CPU) == []  # DDP: a code change
    assert plan(_finding("cpu-threads", cores=8, world_size=2), CPU)[0].params == {"threads": 4}
    assert plan(_finding("loader-config", pin_memory=False, device="cuda"), CPU)[0].params == {
        "pin_memory": True
    }
    for rule in ("conv-bias-before-bn", "deprecated-api", "sync-point", "gpu-idle"):
        assert plan(_finding(rule), CPU) == [], rule


def test_precision_fixes_say_they_change_the_math_and_fp16_gets_a_scaler() -> None:
    amp = _finding("no-mixed-precision")
    (fp16,) = plan(amp, Context("cuda", 8, (7, 0)))  # V100: no fast bf16
    assert fp16.applier == "autocast" and fp16.params == {"device": "cuda", "dtype": "float16"}
    assert "GradScaler" in fp16.label and "inf/NaN" in fp16.numerics
    assert "10-bit mantissa" in fp16.numerics
    (bf16,) = plan(amp, Context("cuda", 8, (8, 0)))
    assert bf16.numerics and bf16.params == {"device": "cuda"}
    assert plan(amp, Context("cuda", 8, None)) == []  # capability unknown: neither is safe
    assert plan(amp, Context("rocm", 8, None))[0].params == {"device": "cuda"}  # bf16
    assert plan(amp, Context("cpu", 2, None, "none")) == []  # emulated bf16 is slower
    assert plan(amp, Context("cpu", 2, None, "amx"))[0].params == {"device": "cpu"}
    assert plan(_finding("tf32-disabled"), Context("cuda", 8, (8, 0)))[0].numerics


@pytest.mark.parametrize("cc", [(7, 0), (7, 5), (8, 0), (9, 0)])
def test_what_verify_measures_is_the_code_the_finding_prints(cc: tuple[int, int]) -> None:
    """Same dtype, and a GradScaler in both or in neither (fixes.policy prints the code)."""
    (fix,) = plan(_finding("no-mixed-precision"), Context("cuda", 8, cc))
    code = autocast_code(policy_target("cuda", None, cc)) or ""
    fp16 = fix.params.get("dtype") == "float16"
    assert ("torch.float16" in code) == fp16 and ("torch.bfloat16" in code) == (not fp16)
    assert ('torch.amp.GradScaler("cuda")' in code) == fp16 == ("GradScaler" in fix.label)
    if fp16:
        assert 'torch.amp.autocast("cuda", dtype=torch.float16)' in code
        assert 'torch.amp.autocast("cuda", dtype=torch.float16)' in fix.label
        assert "scaler.unscale_(optimizer)" in code  # before clipping, as the arm does


def test_worker_counts_are_tried_around_the_suggestion_within_the_host() -> None:
    assert candidates(4, 0, Host(2, 1, "cpu")) == [2, 4]  # 8 is past twice the cores
    assert candidates(1, 0, Host(2, 1, "cpu")) == [1, 2]
    assert candidates(2, 0, Host(None)) == [1, 2, 4]
    assert candidates(4, 4, Host(2, 1, "cpu")) == []  # nothing above the current count fits
    stall = _finding("dataloader-stall", current_workers_count=0, suggested_workers_count=4)
    labels = [f.label for f in plan(stall, CPU)]
    assert labels == [
        "num_workers=2, persistent_workers=True",
        "num_workers=4, persistent_workers=True",
    ]


def test_loader_settings_keep_a_combination_dataloader_accepts() -> None:
    args: dict[str, object] = {"dataset": [], "num_workers": 2, "prefetch_factor": 4}
    _settle(args, {"num_workers": 0})
    assert args == {
        "dataset": [],
        "num_workers": 0,
        "persistent_workers": False,
        "prefetch_factor": None,
    }
    args = {"dataset": []}
    _settle(args, {"num_workers": 3, "pin_memory": False})
    assert args["persistent_workers"] is True and args["pin_memory"] is False


def test_bursty_steps_are_averaged_over_whole_worker_cycles() -> None:
    assert blocks([0.0, 80.0] * 6) == [40.0, 40.0, 40.0]
    assert blocks([3.0, 5.0]) == [4.0]


def _arm(label: str, speedup: float, verdict: str) -> ArmFigures:
    return ArmFigures(label, 100, 95, 105, 100 / speedup, 90 / speedup, 110 / speedup, speedup,
                      speedup * 0.9, speedup * 1.1, verdict, 3)  # type: ignore[arg-type]  # fmt: skip


def test_the_best_candidate_that_helps_is_kept_and_one_that_does_not_is_no_gain() -> None:
    stall = plan(
        _finding("dataloader-stall", current_workers_count=0, suggested_workers_count=2), CPU
    )
    one, two = (f.label for f in stall[:2])
    got = outcome(stall, {one: _arm(one, 1.5, "faster"), two: _arm(two, 1.9, "faster")}, {}, set())
    assert got.status == "measured" and got.best is not None and got.best.label == two
    assert got.saving_ms is not None and 47 < got.saving_ms < 48  # 100 - 100 / 1.9
    slower = outcome(stall, {one: _arm(one, 0.8, "slower")}, {}, set())
    assert slower.status == "no-gain" and slower.saving_ms is None
    crashed = outcome(stall, {}, {one: "exited with status 1: boom"}, set())
    assert crashed.status == "failed" and "boom" in crashed.note
    assert outcome(stall, {}, {}, {one, two}).status == "no-time"


def test_all_safe_fixes_set_each_setting_once() -> None:
    stall = plan(
        _finding("dataloader-stall", current_workers_count=0, suggested_workers_count=2), CPU
    )
    pin = plan(_finding("loader-config", pin_memory=False, device="cuda"), CPU)
    anomaly = plan(_finding("debug-api-enabled", debug_apis=["set_detect_anomaly"]), CPU)
    kept = _one_per_setting([stall[0], stall[1], *pin, *anomaly])
    assert kept == [stall[0], pin[0], anomaly[0]]


def test_one_run_each_side_gives_no_verdict_either_way() -> None:
    """Steps within one run agree while fresh runs drift: one run can neither prescribe a fix
    nor call it useless (bench_verify under load: 0.66x 'slower' from one run each)."""
    stall = plan(
        _finding("dataloader-stall", current_workers_count=0, suggested_workers_count=2), CPU
    )
    one = stall[0].label
    for speedup, verdict in ((0.66, "slower"), (1.9, "faster")):
        arm = replace(_arm(one, speedup, verdict), runs=1)
        got = outcome(stall, {one: arm}, {}, set())
        assert got.status == "inconclusive" and "1 run each side" in got.note
        assert got.best is arm and got.saving_ms is None


def test_a_fix_refused_by_the_script_needs_code_and_is_no_failure() -> None:
    """The fp16 arm on a script that steps with a closure: the child says not applicable."""
    (fp16,) = plan(_finding("no-mixed-precision"), Context("cuda", 8, (7, 0)))
    why = (
        "/usr/bin/python exited with status 3: torchpace: not applicable here: the script calls "
        "LBFGS.step(closure), which a GradScaler cannot drive"
    )
    got = outcome([fp16], {}, {fp16.label: why}, set())
    assert got.status == "needs-code" and got.saving_ms is None
    assert got.note.startswith("not measured: not applicable here: ") and "closure" in got.note
    crashed = outcome([fp16], {}, {fp16.label: "exited with status 1: boom"}, set())
    assert crashed.status == "failed"
    failed = ((fp16.label, why), ("other", "exited with status 1: boom"))
    assert _refused(failed) == [f"{fp16.label}: {why[why.index('not applicable') :]}"]
