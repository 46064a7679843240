"""Each smell script makes its rule fire; its fixed twin does not (live rules, run in-process)."""

from __future__ import annotations

from collections.abc import Callable

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
    assert apis == {"torch.cuda.amp.autocast", "torch.jit.script"}
    assert all(f.locations and f.locations[0].file.endswith("deprecated_api.py") for f in found)


def test_two_loaders_made_at_one_line_give_one_finding(doctor_run: DoctorRun) -> None:
    from torchpace.doctor.diagnose import diagnose
    from torchpace.trace import load_trace

    ran = doctor_run("two_loaders_one_line.py")
    both = findings("loader-config", ran.inspection)
    assert len([f for f in both if "live buffer" in f.summary]) == 2  # one per loader
    found = diagnose(load_trace(ran.trace_files[0]), live=ran.inspection).findings
    (stale,) = [f for f in found if "live buffer" in f.summary]
    assert stale.summary.endswith("(2 alike, made at the same place)")
    assert stale.locations[0].file.endswith("two_loaders_one_line.py")
