"""The memory view: a step's peak split by what holds it, on real runs and a recorded trace."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchpace.analysis import analyze
from torchpace.doctor.memory_view import MemoryView, memory_view
from torchpace.report.html import render_html
from torchpace.report.jsondoc import to_document
from torchpace.report.markdown import render_markdown
from torchpace.report.rich_text import render_rich
from torchpace.report.text import render_text
from torchpace.runner.run import RunResult
from torchpace.trace import load_trace

DoctorRun = Callable[..., RunResult]
ROOT = Path(__file__).parents[2]
GPT = ROOT / "src" / "torchpace" / "examples" / "gpt_train.py"
GPT_ARGS = ("--n-layer", "2", "--n-embd", "64", "--n-head", "2", "--block-size", "64")
V100 = ROOT / "tests" / "fixtures" / "traces" / "large" / "transformer_v100_rank1of2_memory.json.gz"
CPU_TRACE = ROOT / "tests" / "fixtures" / "traces" / "healthy" / "cpu_fast_loader.json.gz"


def _bytes(view: MemoryView) -> dict[str, int]:
    return dict(view.categories)


@pytest.fixture(scope="module")
def gpt_view(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bundled GPT example, run for real under the doctor on CPU (memory view on), in its own
    process as a user runs it: the census counts every tensor of the process it runs in."""
    out = tmp_path_factory.mktemp("gpt")
    cmd = [sys.executable, "-m", "torchpace", "doctor", "--warmup", "2", "--steps", "3"]
    cmd += ["--out", str(out), "-o", str(out / "report.json"), str(GPT), *GPT_ARGS]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=out)
    assert done.returncode == 0, done.stderr[-2000:]
    memory: dict[str, Any] = json.loads((out / "report.json").read_text())["memory"]
    return memory


def test_gpt_peak_categories_add_up_to_the_measured_peak(gpt_view: dict[str, Any]) -> None:
    assert gpt_view["from_live_run"] and gpt_view["device"] == "CPU"
    total = sum(gpt_view["categories_bytes"].values())
    peak = gpt_view["peak_allocated_bytes"]
    assert abs(total - peak) <= 0.05 * peak


def test_gpt_categories_match_the_model_and_optimizer(gpt_view: dict[str, Any]) -> None:
    from torchpace.examples.gpt_train import GPT

    model = GPT(65, 64, 2, 64, 2)  # vocab, block size, layers, width, heads: GPT_ARGS
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    held = gpt_view["categories_bytes"]
    assert held["parameters"] == params
    # zero_grad(set_to_none=True) runs after the forward: the previous step's gradients are
    # still held at the forward's peak.
    assert held["gradients"] == params
    # AdamW: exp_avg and exp_avg_sq per parameter, plus a step counter each.
    assert 2 * params <= held["optimizer state"] <= 2 * params + 4096
    assert held["activations"] > held["parameters"]


def test_gpt_largest_blocks_name_their_op_and_module(gpt_view: dict[str, Any]) -> None:
    largest = gpt_view["largest"]
    assert largest and all(b["bytes"] > 0 for b in largest)
    biggest = largest[0]
    assert biggest["category"] == "activations" and biggest["phase"] == "forward"
    # A CPU run records no Python stacks (on PyG's GIN example they made the profiled steps
    # 1.8x slower than unprofiled, against 1.4x without): the block names its op, not its line.
    assert biggest["where"] is None and biggest["op"].startswith("aten::")
    assert not gpt_view["activation_modules_bytes"]  # modules are placed by stacks too


def test_trace_only_view_of_a_recorded_gpu_trace() -> None:
    view = memory_view(load_trace(V100))
    assert view is not None and not view.live and view.device == "GPU"
    held = _bytes(view)
    # Absolute allocator totals on CUDA: the categories add up to allocated + reserve exactly.
    assert sum(held.values()) == view.total_bytes
    assert held["activations"] > 0 and held["allocator reserve"] == view.reserve_bytes
    assert any("live run" in n for n in view.notes)


def test_trace_only_view_of_a_cpu_trace_says_what_it_lacks() -> None:
    view = memory_view(load_trace(CPU_TRACE))
    assert view is not None and view.peak_bytes is None and view.rise_bytes > 0
    assert any("held from before the window" in n for n in view.notes)


def test_every_format_renders_the_view() -> None:
    diagnosis = analyze([str(V100)], top=True)
    assert diagnosis.memory is not None
    document = to_document(diagnosis)["memory"]
    assert document["categories_bytes"]["allocator reserve"] == diagnosis.memory.reserve_bytes
    assert "Largest blocks alive at the peak" in render_text(diagnosis)
    assert "Largest blocks alive at the peak" in render_markdown(diagnosis)
    assert "Largest blocks alive at the peak" in render_rich(diagnosis, width=160)
    html = render_html(diagnosis)
    assert "what holds it" in html and "allocator reserve" in html


def test_tensors_kept_across_steps_are_seen_growing(doctor_run: DoctorRun) -> None:
    smelly = doctor_run("kept_tensors.py").inspection.memory
    assert smelly is not None and smelly.growth is not None
    # Three profiled steps, each keeping its 2048 x 256 float32 output (2 MiB).
    assert smelly.growth.steps == 3 and smelly.growth.bytes == 3 * 2048 * 256 * 4
    assert "[2048, 256]" in smelly.growth.largest[0]
    fixed = doctor_run("kept_tensors_fixed.py").inspection.memory
    assert fixed is not None and fixed.census is not None and fixed.growth is None
