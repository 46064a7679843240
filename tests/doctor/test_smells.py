"""Each smell script makes its rule fire; its fixed twin does not (live rules, run in-process)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.finding import Finding
from torchpace.doctor.registry import NotApplicable, get_rule
from torchpace.runner.run import RunResult
from torchpace.runner.sensors.inspection import Inspection

DoctorRun = Callable[..., RunResult]


# Rule thresholds for these runs (none needed: loader-config judges configuration only, and the
# machine-dependent stall is dataloader-stall's, a trace rule this test does not run).
THRESHOLDS: dict[str, dict[str, float]] = {}


def findings(rule: str, live: Inspection) -> list[Finding]:
    try:
        return get_rule(rule).func(live, **THRESHOLDS.get(rule, {}))
    except NotApplicable:
        return []


SMELLS = [
    ("conv_bias_bn", "conv-bias-before-bn"),
    ("data_parallel", "data-parallel"),
    ("debug_api", "debug-api-enabled"),
    ("grad_in_eval", "grad-in-eval"),
    ("host_tensor", "host-tensor-creation"),
    ("deprecated_api", "deprecated-api"),
    ("loader_config", "loader-config"),
    ("iterable_duplication", "iterable-duplication"),
    ("cpu_threads", "cpu-threads"),
    ("double_precision", "double-precision"),
    ("padding_waste", "padding-waste"),
    ("repeated_decode", "repeated-decode"),
    ("graph_break", "graph-break"),
    ("recompile", "recompile"),
]


@pytest.mark.parametrize(("script", "rule"), SMELLS, ids=[r for _, r in SMELLS])
def test_smell_found_and_fixed_twin_clean(doctor_run: DoctorRun, script: str, rule: str) -> None:
    smelly = doctor_run(f"{script}.py")
    assert smelly.exit_code == 0, smelly.error
    assert smelly.steps_recorded == 3
    assert findings(rule, smelly.inspection), f"{rule} missed the smell in {script}.py"
    fixed = doctor_run(f"{script}_fixed.py")
    assert fixed.exit_code == 0, fixed.error
    assert findings(rule, fixed.inspection) == []


def test_host_tensor_points_at_the_users_line(doctor_run: DoctorRun) -> None:
    (finding,) = findings("host-tensor-creation", doctor_run("host_tensor.py").inspection)
    (loc,) = finding.locations
    assert loc.file.endswith("host_tensor.py") and loc.line == 16


def test_iterable_duplication_sees_repeated_batches(doctor_run: DoctorRun) -> None:
    live = doctor_run("iterable_duplication.py").inspection
    (loader,) = live.loaders
    assert loader.shards_by_worker is False and (loader.duplicate_batches or 0) > 0
    (finding,) = findings("iterable-duplication", live)
    assert finding.severity.label == "high"


def test_deprecated_api_names_both_apis_with_call_sites(doctor_run: DoctorRun) -> None:
    found = findings("deprecated-api", doctor_run("deprecated_api.py").inspection)
    apis = {f.evidence["api"] for f in found}
    assert apis == {"torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler", "torch.jit.script"}
    assert all(f.locations and f.locations[0].file.endswith("deprecated_api.py") for f in found)


def test_a_deprecation_warning_names_the_users_line_as_under_python(doctor_run: DoctorRun) -> None:
    # torch warns at stacklevel 2 from inside the __init__ the doctor wrapped: nanoGPT's warning
    # for torch.cuda.amp.GradScaler named the doctor's wrapper, not train.py:196
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert doctor_run("deprecated_api.py").exit_code == 0
    (scaler,) = {
        (Path(w.filename).name, w.lineno)
        for w in caught
        if issubclass(w.category, FutureWarning) and "torch.cuda.amp.GradScaler" in str(w.message)
    }
    assert scaler == ("deprecated_api.py", 16), scaler


def test_padding_waste_reads_the_batches_it_judges(doctor_run: DoctorRun) -> None:
    (finding,) = findings("padding-waste", doctor_run("padding_waste.py").inspection)
    ev = finding.evidence
    assert ev["padding_source_name"] == "attention_mask" and ev["batches_count"] == 3
    assert 0.5 < ev["padding_fraction"] < 0.95  # type: ignore[operator]
    assert ev["token_saving_fraction"] < ev["padding_fraction"]  # type: ignore[operator]
    assert "BucketBatchSampler" in finding.fix and finding.saving_ms
    assert finding.load_proof  # a share of tokens: a busy machine does not cap it
    (loader,) = doctor_run("padding_waste_fixed.py").inspection.loaders
    assert {b.source for b in loader.padded_batches} == {"pad id 0"}  # pad_collate's pad id


def test_an_evaluation_loaders_padding_is_not_put_on_the_training_steps(tmp_path: Path) -> None:
    """accelerate's gradient_accumulation.py: the eval loader's padding (47%) was put at 61% of
    the training step, above the training loader's own finding. Run as a user runs it, in a
    process of its own: in-process, twice in `make test`, a long test worker's window held no
    training batch (never when run alone, nor beside two busy loops)."""
    cmd = [sys.executable, "-m", "torchpace", "doctor", "--warmup", "2", "--steps", "3"]
    cmd += [
        "--format",
        "json",
        "--out",
        str(tmp_path / "out"),
        str(Path(__file__).parent / "scripts" / "padding_eval.py"),
    ]
    ran = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    found = [f for f in json.loads(ran.stdout)["findings"] if f["rule"] == "padding-waste"]
    trained, evaluated = sorted(found, key=lambda f: "an evaluation loader" in f["summary"])
    assert trained["saving_ms"] and "evaluation loader" not in trained["summary"], ran.stdout
    assert evaluated["saving_ms"] is None and evaluated["severity"] == "low"
    assert "no backward pass followed its batches" in evaluated["summary"]


def test_only_a_backward_inside_the_window_trains_the_last_profiled_batch() -> None:
    """After the window, the batch before a backward is unseen: the last profiled one may be an
    evaluation loader's (a full test run credited its loader with a trained batch)."""
    import threading
    from types import SimpleNamespace

    from torchpace.runner import hooks

    record = SimpleNamespace(trained=0)
    state = SimpleNamespace(phase="timed")
    session = SimpleNamespace(
        inert=False, follow=None, quiet_thread=None, fed=record, state=state,
        local=threading.local(), inspector=SimpleNamespace(watcher=None),
        signal_seen=lambda: None, on=lambda decide: None,
    )  # fmt: skip
    backward = hooks._backward(session, lambda *a, **k: None)  # type: ignore[arg-type]
    backward()
    assert record.trained == 0
    state.phase = "profile"
    backward()
    assert record.trained == 1 and session.fed is None


def test_repeated_decode_on_the_training_thread_is_judged_by_cpu_time(
    doctor_run: DoctorRun,
) -> None:
    live = doctor_run("repeated_decode.py").inspection
    (loader,) = live.loaders
    (finding,) = findings("repeated-decode", live)
    # Read in the main process of a CPU run: shares of the thread's CPU time, load-proof unless
    # torch's threads outnumbered the cores other processes left free.
    assert loader.num_workers == 0 and live.device.kind == "cpu"
    assert finding.load_proof is (live.contention() is None)


def test_repeated_decode_leaves_random_augmentation_alone(doctor_run: DoctorRun) -> None:
    live = doctor_run("repeated_decode_random.py").inspection
    (loader,) = live.loaders
    assert loader.sample_probe is not None and loader.sample_probe.draws_random
    assert findings("repeated-decode", live) == []


def test_unfused_attention_in_the_doctors_own_trace(doctor_run: DoctorRun) -> None:
    # A trace rule: the doctor's CPU recording has no shapes, so the order of ops decides.
    from torchpace.trace import load_trace

    def found(script: str) -> list[Finding]:
        result = doctor_run(script)
        assert result.exit_code == 0, result.error
        return get_rule("unfused-attention").func(load_trace(result.trace_files[0]))

    (finding,) = found("unfused_attention.py")
    assert finding.evidence["attention_calls_per_step"] == 2.0
    assert finding.evidence["scores_shapes"] == []
    assert found("unfused_attention_fixed.py") == []


def test_two_loaders_made_at_one_line_give_one_finding(doctor_run: DoctorRun) -> None:
    from torchpace.doctor.diagnose import diagnose
    from torchpace.trace import load_trace

    ran = doctor_run("two_loaders_one_line.py")
    assert [f.epochs_started > 0 for f in ran.inspection.loaders] == [True, True]
    found = diagnose(load_trace(ran.trace_files[0]), live=ran.inspection).findings
    (stale,) = [f for f in found if "live buffer" in f.summary]
    assert "(2 DataLoaders at " in stale.summary and stale.summary.count(".py:") == 1
    (where,) = stale.locations
    assert where.file.endswith("two_loaders_one_line.py")


def test_checkpointed_blocks_run_again_in_backward_are_no_evaluation(doctor_run: DoctorRun) -> None:
    ran = doctor_run("checkpointed.py")
    assert ran.exit_code == 0, ran.error
    assert ran.inspection.model.grad_forwards == ()
    assert findings("grad-in-eval", ran.inspection) == []


def test_a_forward_whose_loss_is_one_of_its_outputs_is_used(doctor_run: DoctorRun) -> None:
    """TRL's SFT model output: an entropy logged detached comes before the log-probs the loss
    uses; judged by the first output alone, the training forward read as wasted (MEDIUM
    grad-in-eval, fix: inference_mode, which would stop training)."""
    ran = doctor_run("output_with_metrics.py")
    assert ran.exit_code == 0, ran.error
    assert ran.inspection.model.steps > 0 and ran.inspection.model.grad_forwards == ()


def test_a_metric_module_fed_the_loss_is_no_wasted_model_forward(doctor_run: DoctorRun) -> None:
    """Fabric's PPO example updates 3 torchmetrics MeanMetrics with its losses each step (the
    tensors still record): read as 3 model forwards per step run with autograd, MEDIUM."""
    ran = doctor_run("metric_on_loss.py")
    assert ran.exit_code == 0, ran.error
    assert ran.inspection.model.steps > 0 and ran.inspection.model.grad_forwards == ()
    assert findings("grad-in-eval", ran.inspection) == []


def test_a_library_calling_forward_itself_is_no_bypass_of_the_users(
    doctor_run: DoctorRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lightning's logging calls a metric module's forward() itself: the note blamed the user's
    `self.log(...)` line and said to call model(x) instead."""
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "loglib.py").write_text(
        "import torch\n"
        "metric = torch.nn.Identity()\n"
        "def log(value):\n"
        "    return metric.forward(value)\n"
    )
    monkeypatch.syspath_prepend(str(lib))
    ran = doctor_run("logs_through_a_library.py")
    assert ran.exit_code == 0, ran.error
    assert ran.inspection.model.forward_bypass is None
