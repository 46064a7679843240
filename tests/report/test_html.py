"""The HTML report: self-contained, escaped, and showing every part of a Diagnosis."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from html_synthetic import (
    make_breakdown,
    synthetic_diagnosis,
    synthetic_ranks_diagnosis,
    synthetic_top,
)

from torchpace.report.html import render_html
from torchpace.report.top import TopTables

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"


class _Tags(HTMLParser):
    """Collects start tags and attributes, to check what the page would load or run."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def test_strings_from_the_trace_are_escaped() -> None:
    page = render_html(synthetic_diagnosis(), top=synthetic_top())
    assert "<script" not in page.lower()
    assert "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    # op names, kernel names, device, skipped reasons, notes and file names all came through
    assert page.count("&lt;script&gt;") >= 9


def test_page_is_self_contained() -> None:
    page = render_html(synthetic_diagnosis(), top=synthetic_top())
    tags = _tags(page)
    assert {tag for tag, _ in tags}.isdisjoint({"script", "link", "iframe", "img", "object"})
    # only references inside the page itself (SVG clip paths, markers)
    links = [v for _, attrs in tags for k, v in attrs.items() if k.endswith(("src", "href"))]
    assert all(link and link.startswith("#") for link in links)
    assert "@import" not in page and not re.search(r"url\((?!#)", page)


def test_shows_header_figures_findings_skipped_and_how_to_open() -> None:
    page = render_html(synthetic_diagnosis(), top=synthetic_top())
    for text in ("Median step", "compute capability 7.0", "PyTorch", "2.13.0", "ProfilerStep#"):
        assert text in page
    # step phases, GPU busy/idle, kernel classes, top kernels and top operators (no pictures
    # data: the synthetic Diagnosis has no step lanes, idle split or memory curve)
    assert page.count("<svg") == 5
    rules = re.findall(r"<code class='rule'>([a-z-]+)</code>", page)
    assert rules == ["no-mixed-precision", "launch-bound", "memory-pressure"]
    assert "saves ~12.4 ms per step" in page and "no saving estimate" in page
    assert "torch.profiler.profile(record_shapes=True)" in page
    assert "ui.perfetto.dev" in page and "tensorboard --logdir" in page
    assert "78%" in page  # a *_fraction evidence value shown as a share
    assert "volta_sgemm_128x64_nn" in page and "aten::add_" in page


def test_multi_rank_side_by_side_names_the_slowest() -> None:
    page = render_html(synthetic_ranks_diagnosis(), top=TopTables())
    assert "rank 1 is the slowest" in page
    assert page.count("class='slowest'") == 1
    assert "2 of 2 ranks analysed, nccl" in page


def test_cpu_only_trace_has_no_gpu_section() -> None:
    gpu = synthetic_diagnosis()
    info = dataclasses.replace(gpu.info, device_kind="cpu", device_name=None)
    cpu = dataclasses.replace(gpu, info=info, breakdown=make_breakdown(gpu=False), findings=())
    page = render_html(cpu, top=TopTables())
    assert "id='gpu'" not in page and page.count("<svg") == 1
    assert "No rule found anything to fix" in page
    assert "CPU only" in page


def test_real_two_rank_run_side_by_side() -> None:
    from torchpace.doctor.diagnose import diagnose
    from torchpace.report.top import top_tables
    from torchpace.trace import load_traces

    run = FIXTURES / "ddp_gloo_2rank" / "straggler_seqlen"
    traces = load_traces(run)
    page = render_html(diagnose(traces), top=top_tables(traces[1]))
    assert "Ranks side by side" in page and page.count("class='slowest'") == 1
    assert "rank-imbalance" in page and "TokenBudgetBatchSampler" in page
    assert "Waiting in collectives" in page  # work vs wait per rank, from the finding
    assert "aten::addmm" in page  # host operators by self time


def test_self_time_subtracts_nested_ops() -> None:
    from torchpace.report.top import self_times_us
    from torchpace.trace.events import HostOp

    def op(name: str, ts: float, dur: float, tid: int = 1) -> HostOp:
        return HostOp(name, "op", ts, dur, 1, tid, None)

    ops = [
        op("outer", 0, 100),
        op("inner", 10, 30),
        op("leaf", 15, 5),
        op("next", 50, 20),
        op("other", 0, 80, tid=2),
    ]
    assert self_times_us(ops) == [50, 25, 5, 20, 80]


@pytest.mark.parametrize(
    "name",
    [
        "cpu_only/gloo_rank34_of300",
        "rocm/mi250_minitoy_rocm6.2",
        "nccl/nccl_a100",
        "ns_resolution/ns_resolution_v100_rank0",
        "cupti_alloc_benchmark/benchmark_cupti_alloc",
        "host_sync/event_sync_item",
    ],
)
def test_every_vintage_renders(name: str) -> None:
    from torchpace.doctor.diagnose import diagnose
    from torchpace.report.top import top_tables
    from torchpace.trace import load_trace

    trace = load_trace(FIXTURES / f"{name}.json.gz")
    diagnosis = diagnose(trace)
    page = render_html(diagnosis, top=top_tables(trace))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<article class='finding") == len(diagnosis.findings)
    assert page.count("<svg") >= 1


def test_analyze_a_rank_folder_to_html(tmp_path: Path) -> None:
    from torchpace.cli.main import main

    out = tmp_path / "report.html"
    assert (
        main(["analyze", str(FIXTURES / "ddp_gloo_2rank" / "straggler_data"), "-o", str(out)]) == 0
    )
    page = out.read_text(encoding="utf-8")
    assert "Ranks side by side: rank 1 is the slowest" in page
    assert "DataLoader takes" in page and "ui.perfetto.dev" in page
    assert "Top kernels and operators" in page  # computed from the loaded traces, not re-read


def test_top_tables_come_from_the_diagnosis_never_a_reread(tmp_path: Path) -> None:
    import shutil

    from torchpace.doctor.diagnose import diagnose
    from torchpace.trace import load_trace

    path = tmp_path / "t.json.gz"
    shutil.copy(FIXTURES / "loader_workers" / "resnet50_v100_num_workers_0.json.gz", path)
    trace = load_trace(path)
    assert diagnose(trace).top is None  # not computed unless asked for: analyze's JSON/text path
    diagnosis = diagnose(trace, top=True)
    assert diagnosis.top is not None and diagnosis.top.kernels and diagnosis.top.ops
    path.unlink()  # a re-read would now fail; the tables must come from diagnosis.top
    page = render_html(diagnosis)
    assert "Top kernels and operators" in page
    assert diagnosis.top.kernels[0].name.split("<")[0][:20] in page
    assert "Top kernels and operators" not in render_html(dataclasses.replace(diagnosis, top=None))
