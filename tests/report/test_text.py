"""The plain-text report states what was measured, where the time goes and what to fix."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding
from torchpace.report import render
from torchpace.report.text import render_text
from torchpace.trace.summary import Breakdown

ANSI = re.compile(r"\x1b\[")


def test_header_states_what_was_measured(diagnosis: Diagnosis) -> None:
    text = render(diagnosis, "text")
    assert "Trace         traces/resnet50.pt.trace.json.gz" in text
    assert "Tesla V100-DGXS-32GB (CUDA, compute capability 7.0, 31.7 GiB)" in text
    assert "5, from ProfilerStep# markers (prof.step()); 1 outlier left out of the medians" in text
    assert "Median step   121 ms" in text
    assert "GPU busy      30% of the step (idle 70%)" in text
    assert "Note: memory events present" in text
    assert "PyTorch" not in text  # not recorded in this trace: not guessed


def test_header_shows_the_torch_version_when_known(cpu_diagnosis: Diagnosis) -> None:
    text = render(cpu_diagnosis, "text")
    assert "PyTorch       2.13.0+cpu" in text
    assert "CPU only (no device activity in the trace)" in text
    assert "GPU busy" not in text


def test_breakdown_gives_median_ms_and_share_per_phase(diagnosis: Diagnosis) -> None:
    text = render(diagnosis, "text")
    assert re.search(r"data loading +60\.6 ms +50% +#{15}\n", text)
    assert re.search(r"backward +30\.3 ms +25%", text)
    assert re.search(r"conv +20\.0 ms +17%", text)


def test_few_steps_get_a_table_and_outliers_are_labelled(diagnosis: Diagnosis) -> None:
    text = render(diagnosis, "text")
    assert "Per step (ms)" in text
    assert re.search(r"\n  4 +372 +186 .* 3\.1x the median\n", text)


def test_many_steps_show_only_the_outliers(
    diagnosis_factory: Callable[..., Diagnosis], breakdown_factory: Callable[..., Breakdown]
) -> None:
    scales = [1.0] * 30
    scales[17] = 4.0
    bd = breakdown_factory(scales, outliers={17: "4.0x the median"})
    text = render(diagnosis_factory(breakdown=bd), "text")
    assert "Outlier steps (ms; 1 of 30 steps)" in text
    assert re.search(r"\n  17 +480 .*4\.0x the median\n", text)
    assert not re.search(r"\n  16 ", text)


def test_each_finding_has_evidence_saving_fix_and_where(diagnosis: Diagnosis) -> None:
    text = render(diagnosis, "text", width=200)
    assert "1. [HIGH] dataloader-stall: Each step waits 50% of its time for the next batch" in text
    assert re.search(r"wait_fraction +50%\n", text)
    assert re.search(r"wait_ms +60\.0 ms\n", text)
    assert (
        "Estimated saving: about 42.0 ms per step (35% of the 121 ms median step on "
        "Tesla V100-DGXS-32GB); method: overlap model" in text
    )
    assert (
        "     DataLoader(dataset, num_workers=4, pin_memory=True, persistent_workers=True)" in text
    )
    assert "     train.py:42 in main (6x)" in text
    assert "Caveat: Workers add CPU load" in text
    assert "Estimated saving: not estimated" in text  # allocator-churn has no estimate


def test_findings_are_ordered_by_saving(diagnosis: Diagnosis) -> None:
    text = render(diagnosis, "text")
    order = [
        text.index(f"] {rule}:")
        for rule in ("dataloader-stall", "pageable-copy", "allocator-churn")
    ]
    assert order == sorted(order)


def test_multiline_fix_keeps_its_lines(diagnosis: Diagnosis) -> None:
    text = render(diagnosis, "text")
    assert (
        "     DataLoader(..., pin_memory=True)\n     batch = batch.to(device, non_blocking=True)\n"
        in text
    )


def test_skipped_rules_say_what_would_enable_them(diagnosis: Diagnosis) -> None:
    text = render(diagnosis, "text", width=200)
    assert (
        "Not analysed (1 rule)\n  gpu-idle: the trace has no kernels (CPU-only run); to enable: "
        "record on a GPU: torch.profiler.profile(" in text
    )
    verbose = render(diagnosis, "text", width=200, verbose=True)
    assert "Not analysed (1 rule)\n  gpu-idle: the trace has no kernels (CPU-only run)\n" in verbose
    assert "To enable: record on a GPU: torch.profiler.profile(" in verbose


def test_ranks_side_by_side_and_the_slowest_named(multirank: Diagnosis) -> None:
    text = render(multirank, "text")
    assert "Ranks (2), median ms per step" in text
    assert re.search(r"\n  0 +120 +60\.0 .*30%\n", text)
    assert re.search(r"\n  1 +144 +72\.0 .*30%  slowest\n", text)
    assert "Slowest rank: 1, median step 144 ms, 20% above the fastest (rank 0, 120 ms)." in text
    narrow = render_text(multirank, width=40)  # wrapped like the rest (it ran to 220 columns)
    assert "Slowest rank: 1, median step 144 ms," in narrow
    assert all(
        len(line) <= 40 for line in narrow.split("Ranks (2)")[1].split("\n\n")[1].split("\n")
    )
    assert "Where the step time goes on rank 1, the slowest" in text
    assert "1. [HIGH] dataloader-stall (rank 1):" in text
    # The saving is measured against rank 1's own median step.
    assert "(29% of the 144 ms median step" in text


def test_a_trace_without_steps_is_one_window(window_diagnosis: Diagnosis) -> None:
    text = render(window_diagnosis, "text", width=200)
    assert (
        "none marked (no ProfilerStep# events): the whole trace is analysed as one window" in text
    )
    assert "Window        120 ms" in text
    assert "Note: no ProfilerStep# events; analysed as one window" in text
    assert "Where the time goes (the whole trace as one window, host timeline)" in text
    assert "Per step" not in text
    assert "Findings: none" in text


def test_plain_text_has_no_escape_codes_and_no_characters_of_its_own_beyond_ascii(
    diagnosis: Diagnosis, multirank: Diagnosis
) -> None:
    for d in (diagnosis, multirank):
        text = render(d, "text")
        assert not ANSI.search(text)
        assert text.isascii()


def test_prose_wraps_to_the_width(
    diagnosis_factory: Callable[..., Diagnosis], stall: Finding
) -> None:
    long = replace(stall, summary="Each step waits for the next batch " * 6)
    text = render(diagnosis_factory(findings=(long,)), "text", width=60)
    summary_lines = [line for line in text.splitlines() if "next batch" in line]
    assert len(summary_lines) > 2
    assert all(len(line) <= 60 for line in summary_lines)


def test_ranks_without_distributed_info_are_numbered_by_position(multirank: Diagnosis) -> None:
    views = tuple(
        replace(v, info=replace(v.info, rank=None, world_size=None, backend=None))
        for v in multirank.ranks
    )
    bare = replace(multirank, ranks=views, info=views[1].info)
    text = render(bare, "text")
    assert "Distributed   2 ranks analysed\n" in text
    assert re.search(r"\n  1 +144 .*  slowest\n", text)
