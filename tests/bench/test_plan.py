"""Planning: which techniques apply where, what runs alone, what stacks, and why others are skipped."""

from __future__ import annotations

import itertools

import pytest
import torch

from torchpace.bench.harness import CEILING, plan
from torchpace.bench.techniques import ORDER, get_technique
from torchpace.bench.workloads import get_workload
from torchpace.errors import UsageError

from .conftest import CPU, tiny_settings


@pytest.fixture(scope="module")
def vision():  # type: ignore[no-untyped-def]
    return get_workload("vision", "tiny")


@pytest.fixture(scope="module")
def text():  # type: ignore[no-untyped-def]
    return get_workload("text", "tiny")


def _skips(workload, device=CPU):  # type: ignore[no-untyped-def]
    return {s.name: s.reason for s in plan(workload, device, tiny_settings())[1]}


def test_cpu_skip_reasons_name_the_missing_piece(vision, text) -> None:  # type: ignore[no-untyped-def]
    skips = _skips(vision)
    assert skips["pin-memory"] == "only helps with an accelerator (no host-to-device copy on CPU)"
    assert skips["tf32"] == "needs an Ampere+ CUDA GPU"
    assert skips["prefetcher"] == "overlaps host-to-device copies; there are none on CPU"
    assert skips["cudnn-benchmark"] == "cuDNN runs only on a CUDA device"
    assert skips["amp-fp16"].startswith("fp16 + GradScaler needs a CUDA GPU")
    assert "same shape" in skips["bucketing"]
    assert "channels-last" not in skips
    text_skips = _skips(text)
    assert text_skips["channels-last"] == "the text workload has no convolutions"
    assert "bucketing" not in text_skips and "token-budget" not in text_skips


def test_accelerator_only_techniques_apply_on_cuda_devices(vision) -> None:  # type: ignore[no-untyped-def]
    cuda = torch.device("cuda")
    assert get_technique("pin-memory").applies_to(vision, cuda) == (True, "")
    assert get_technique("sync-free-logging").applies_to(vision, cuda) == (True, "")
    assert get_technique("cudnn-benchmark").applies_to(vision, cuda) == (True, "")


def test_memory_warmup_needs_variable_shapes_even_on_cuda(vision, text) -> None:  # type: ignore[no-untyped-def]
    cuda = torch.device("cuda")
    ok, reason = get_technique("memory-warmup").applies_to(vision, cuda)
    assert not ok and "same shape" in reason
    assert get_technique("memory-warmup").applies_to(text, cuda) == (True, "")


def test_alone_means_with_what_it_requires(vision) -> None:  # type: ignore[no-untyped-def]
    rows, _ = plan(vision, CPU, tiny_settings(workers=3))
    persistent = next(r for r in rows if r.kind == "single" and r.name.startswith("persistent"))
    assert persistent.name == "persistent-workers (+workers)"
    assert persistent.config.num_workers == 3 and persistent.config.persistent_workers


def test_recipe_stacks_in_order_one_per_group_without_trade_offs(text) -> None:  # type: ignore[no-untyped-def]
    rows, _ = plan(text, CPU, tiny_settings())
    cumulative = [r for r in rows if r.kind == "cumulative"]
    names = [r.techniques[-1].name for r in cumulative]
    assert "checkpointing" not in names  # memory vs speed: measured alone only
    assert "bucketing" in names and "token-budget" not in names
    assert [n for n in names] == sorted(names, key=[t.name for t in ORDER].index)
    for shorter, longer in itertools.pairwise(cumulative):
        assert set(shorter.techniques) < set(longer.techniques)


def test_ceiling_is_the_full_recipe_with_data_on_device(vision) -> None:  # type: ignore[no-untyped-def]
    rows, _ = plan(vision, CPU, tiny_settings())
    ceiling = rows[-1]
    top = [r for r in rows if r.kind == "cumulative"][-1]
    assert ceiling.name == CEILING and ceiling.config.data_on_device
    assert ceiling.config.changes() == {**top.config.changes(), "data_on_device": True}
    assert all(r.kind != "ceiling" for r in plan(vision, CPU, tiny_settings(ceiling=False))[0])


def test_choosing_techniques_limits_the_plan(vision) -> None:  # type: ignore[no-untyped-def]
    rows, skipped = plan(vision, CPU, tiny_settings(ceiling=False), [get_technique("pin-memory")])
    assert [r.name for r in rows] == ["baseline"]
    assert [s.name for s in skipped] == ["pin-memory"]


def test_unknown_technique_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown technique 'amp'; known techniques: workers, "):
        get_technique("amp")


def test_every_technique_module_has_a_kebab_case_name_and_summary() -> None:
    names = [t.name for t in ORDER]
    assert len(set(names)) == len(names) == 15
    for technique in ORDER:
        assert technique.name == technique.name.lower() and " " not in technique.name
        assert technique.summary
