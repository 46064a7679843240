"""The torch.compile view: graph breaks and recompiles of a compiled model run under the doctor."""

from __future__ import annotations

from collections.abc import Callable

from torchpace.doctor.registry import get_rule
from torchpace.runner.run import RunResult
from torchpace.runner.sensors.compile import CompileRecord, Recompile
from torchpace.runner.sensors.inspection import Inspection
from torchpace.trace.stacks import SourceLocation

DoctorRun = Callable[..., RunResult]


def test_graph_break_names_the_reason_and_the_users_line(doctor_run: DoctorRun) -> None:
    ran = doctor_run("graph_break.py")
    assert ran.exit_code == 0, ran.error
    assert ran.steps_recorded == 3 and ran.trace_files  # the profiled window works compiled
    (finding,) = get_rule("graph-break").func(ran.inspection)
    (where,) = finding.locations
    assert where.file.endswith("graph_break.py") and where.line == 22
    assert "item()" in finding.summary and "fullgraph=True" in finding.fix
    assert finding.saving_ms is None and "not estimated" in finding.saving_method


def test_recompiles_after_warmup_name_the_failed_guard(doctor_run: DoctorRun) -> None:
    ran = doctor_run("recompile.py")
    assert ran.exit_code == 0, ran.error
    record = ran.inspection.compiles
    assert record.steps_after_warmup == 6  # 3 profiled, 3 timed
    (finding,) = get_rule("recompile").func(ran.inspection)
    ev = finding.evidence
    assert ev["cause"] == "shape" and "size mismatch at index 1" in str(ev["guard"])
    # lengths 8, 9, ... one new length per step: a recompile at each step after the first
    assert ev["recompiles"] >= 4 and ev["recompiles_after_warmup"] >= 3  # type: ignore[operator]
    assert finding.saving_ms and finding.saving_ms > 0
    assert "mark_dynamic" in finding.fix
    assert record.compile_s and record.run_s and record.compile_s < record.run_s


def test_marked_dynamic_compiles_once(doctor_run: DoctorRun) -> None:
    record = doctor_run("recompile_fixed.py").inspection.compiles
    assert record.compiles == 1 and record.recompiles == () and record.breaks == ()


def _live(*recompiles: Recompile, limit: tuple[str, ...] = (), steps: int = 6) -> Inspection:
    record = CompileRecord(
        compiles=1 + sum(r.count for r in recompiles),
        compile_s=4.0,
        run_s=20.0,
        recompiles=recompiles,
        recompile_s_after_warmup=1.5,
        steps_after_warmup=steps,
        limit_hit=limit,
    )
    return Inspection(compiles=record)


def test_a_warmup_recompile_that_settles_is_no_finding() -> None:
    once = Recompile("forward", "tensor 'x' size mismatch at index 0. expected 8, actual 9")
    assert get_rule("recompile").func(_live(once)) == []


def test_a_changing_python_number_asks_for_a_tensor() -> None:
    value = Recompile("forward", "scale == 0.5", SourceLocation("m.py", 3), 5, after_warmup=3)
    (finding,) = get_rule("recompile").func(_live(value))
    assert finding.evidence["cause"] == "value" and "torch.tensor" in finding.fix
    assert finding.saving_ms == 1500.0 / 6 and finding.locations == (SourceLocation("m.py", 3),)


def test_the_recompile_limit_means_the_function_runs_uncompiled() -> None:
    churn = Recompile("forward", "self.step == 7", count=7, after_warmup=0)
    (finding,) = get_rule("recompile").func(_live(churn, limit=("forward",)))
    assert "runs uncompiled" in finding.summary and finding.severity.label == "high"
    assert finding.saving_ms is None and "recompile_limit" in finding.caveat


def test_a_clean_compiled_model_gives_no_compile_finding(doctor_run: DoctorRun) -> None:
    ran = doctor_run("compiled.py")
    assert ran.exit_code == 0, ran.error
    assert ran.inspection.compiles.compiles >= 1 and ran.inspection.compiles.breaks == ()
    assert get_rule("graph-break").func(ran.inspection) == []
    assert get_rule("recompile").func(ran.inspection) == []
    # The notes still weigh compile time against the run's.
    record = ran.inspection.compiles
    (note,) = [n for n in ran.inspection.notes if n.startswith("torch.compile compiled")]
    assert note == record.sentence() and "no recompiles; no graph breaks" in note
    assert f"{record.compile_s:.1f} s, " in note and f"of the {record.run_s:.0f} s" in note


def test_the_compile_sentence_names_a_warmup_recompile_and_its_guard() -> None:
    once = Recompile("forward", "___check_global_state()", count=1)
    text = _live(once).compiles.sentence()
    assert text == (
        "torch.compile compiled 2 frame(s) in 4.0 s, 20% of the 20 s the script ran; 1 "
        "recompile(s), most of forward (guard `___check_global_state()`), none after warm-up; "
        "no graph breaks"
    )
    assert CompileRecord().sentence() == ""


def test_an_uncompiled_run_has_an_empty_record(doctor_run: DoctorRun) -> None:
    # (torch._dynamo may be loaded by an earlier test: what it compiled then is not this run's)
    record = doctor_run("grad_in_eval_fixed.py").inspection.compiles
    assert (record.compiles, record.recompiles, record.breaks) == (0, (), ())


def test_a_compiled_module_gets_no_global_hook_warning_from_the_doctor(
    doctor_run: DoctorRun,
) -> None:
    """The doctor's one-shot global module hook goes when torch.compile is called: still there
    at the compiled module's first call, torch warned of global hooks on the user's stderr."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ran = doctor_run("recompile_fixed.py")
    assert ran.exit_code == 0, ran.error
    assert not [w for w in seen if "global hooks" in str(w.message)]
