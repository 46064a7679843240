"""The harness on tiny workloads: result structure, loss parity, skips; never timings."""

from __future__ import annotations

import torch

from torchpace.bench import _train
from torchpace.bench.config import RunConfig
from torchpace.bench.harness import CEILING, run_bench
from torchpace.bench.loop import run_config
from torchpace.bench.results import BenchResult
from torchpace.bench.techniques import get_technique
from torchpace.bench.techniques.amp_bf16 import cpu_has_bf16
from torchpace.bench.workloads import get_workload

from .conftest import CPU, tiny_settings


def test_vision_result_has_baseline_singles_cumulative_and_ceiling(
    vision_result: BenchResult,
) -> None:
    kinds = [c.kind for c in vision_result.configs]
    assert kinds[0] == "baseline" and kinds[-1] == "ceiling"
    singles = {c.name for c in vision_result.configs if c.kind == "single"}
    assert {
        "workers",
        "persistent-workers (+workers)",
        "channels-last",
        "compile",
        "checkpointing",
    } <= singles
    assert vision_result.config(CEILING).changes["data_on_device"] is True
    assert not vision_result.failed


def test_every_configuration_is_measured(vision_result: BenchResult) -> None:
    for config in vision_result.configs:
        # One round; the baseline also closes it (every run sits between two baseline runs).
        runs = 2 if config.kind == "baseline" else 1
        assert config.units_per_s > 0 and len(config.units_per_s_repeats) == runs
        assert (
            len(config.step_ms) == 2
            and config.step_ms_min <= config.step_ms_median <= config.step_ms_max
        )
        assert 0.0 <= config.data_wait_fraction <= 1.0
        assert config.peak_memory_bytes > 0 and config.peak_memory_kind.startswith("host RSS")
        assert config.first_step_ms > 0
    assert vision_result.baseline.speedup == 1.0


def test_pipeline_and_layout_techniques_keep_the_same_math(vision_result: BenchResult) -> None:
    for name in (
        "workers",
        "persistent-workers (+workers)",
        "channels-last",
        "compile",
        "checkpointing",
    ):
        assert vision_result.config(name).parity.status == "same", name
    # Workers compute exactly what the loop computes: same pixels, same order, bit for bit.
    assert vision_result.config("workers").parity.max_rel_diff == 0.0
    assert vision_result.config(CEILING).parity.status in ("same", "within-tolerance")


def test_amp_reports_changed_numerics_within_tolerance(vision_result: BenchResult) -> None:
    if not cpu_has_bf16():
        assert any(s.name == "amp-bf16" for s in vision_result.skipped)
        return
    parity = vision_result.config("amp-bf16").parity
    assert parity.status == "within-tolerance" and "bf16" in parity.note


def test_text_counts_tokens_and_bucketing_is_not_comparable(text_result: BenchResult) -> None:
    assert text_result.workload.unit == "tokens"
    assert text_result.config("bucketing").parity.status == "not-comparable"
    assert text_result.config("token-budget").parity.status == "not-comparable"
    assert text_result.config("workers").parity.status == "same"  # crosses an epoch boundary
    assert len(text_result.config("baseline").units_per_s_repeats) == 3  # 2 rounds, then closed
    assert {s.name for s in text_result.skipped} >= {"channels-last", "pin-memory", "tf32"}


def test_a_failing_configuration_is_reported_and_the_rest_kept(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = _train.prepare_model

    def broken(model, config, settings, device):  # type: ignore[no-untyped-def]
        if config.channels_last:
            raise RuntimeError("simulated kernel failure\nsecond line")
        return real(model, config, settings, device)

    monkeypatch.setattr(_train, "prepare_model", broken)
    result = run_bench(
        get_workload("vision", "tiny"),
        CPU,
        tiny_settings(ceiling=False),
        [get_technique("channels-last"), get_technique("checkpointing")],
    )
    assert [c.name for c in result.configs] == ["baseline", "checkpointing"]
    assert [(f.name, f.reason) for f in result.failed] == [
        ("channels_last=True", "RuntimeError: simulated kernel failure")
    ]


def test_memory_warmup_leaves_weights_and_buffers_untouched() -> None:
    workload = get_workload("text", "tiny")
    config = RunConfig(warmup_memory=True)
    torch.manual_seed(0)
    model = workload.build_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    _train.warm_memory(model, workload, config, tiny_settings(), CPU)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_memory_warmup_run_matches_the_baseline_loss() -> None:
    workload = get_workload("text", "tiny")
    base = run_config(workload, RunConfig(), tiny_settings(), CPU)
    warmed = run_config(workload, RunConfig(warmup_memory=True), tiny_settings(), CPU)
    assert warmed.losses == base.losses


def _scripted(times: dict[str, float]):  # type: ignore[no-untyped-def]
    """A stand-in for run_config: each configuration's step takes a scripted time (no timing)."""
    from torchpace.bench import harness
    from torchpace.bench.loop import Measurement

    def run(workload, config, settings, device):  # type: ignore[no-untyped-def]
        label = harness._label(config)
        ms = times.get(label, 10.0)
        jitter = [ms * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(settings.steps)]
        return Measurement(
            units_per_s=1000.0 / ms, step_ms=jitter, data_wait_fraction=0.0,
            peak_memory_bytes=1, peak_memory_kind="host RSS", first_step_ms=ms,
            losses=[1.0] * settings.steps, steps=settings.steps, units=settings.steps,
        )  # fmt: skip

    return run


def test_implausible_speedups_are_flagged_and_stacks_slower_than_parts_noted(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from torchpace.bench import harness

    times = {
        "checkpointing=True": 5.0,  # twice as fast from recomputing: a disturbed measurement
        "channels_last=True": 5.0,  # alone: 2x
        "num_workers=1": 10.0,
        "num_workers=1, channels_last=True": 9.0,  # the stack: 1.1x, below its part
    }
    monkeypatch.setattr(harness, "run_config", _scripted(times))
    chosen = [get_technique(n) for n in ("workers", "channels-last", "checkpointing")]
    result = run_bench(
        get_workload("vision", "tiny"), CPU, tiny_settings(repeat=3, steps=8, ceiling=False), chosen
    )
    ckpt = result.config("checkpointing")
    assert ckpt.verdict == "faster" and ckpt.flags and "can only add time" in ckpt.flags[0]
    assert result.config("workers").verdict == "no-change"
    assert any("is slower than channels-last alone" in n for n in result.notes)
    assert "!" in render_plain_row(result, "checkpointing")


def render_plain_row(result: BenchResult, name: str) -> str:
    from torchpace.report.bench.text import render_plain

    return next(line for line in render_plain(result).splitlines() if line.startswith(name))
