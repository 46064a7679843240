"""The HTML report opened in headless Chromium: it renders, offline, to a non-blank page.

`TORCHPACE_UPDATE_SCREENSHOT=1 pytest -m browser tests/report/test_html_browser.py` also refreshes
docs/report-screenshot.png (the picture the README shows).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest  # browser tests are skipped when chromium is absent (tests/conftest.py)

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import figures
from torchpace.report.html import render_html
from torchpace.report.html_style import CSS
from torchpace.trace import load_trace, load_traces

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 1280, 2400


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(
    page: Path, png: Path, profile: Path, size: tuple[int, int] = (WIDTH, HEIGHT)
) -> None:
    """Render `page` in headless Chromium with networking off, writing a PNG screenshot."""
    chromium = CHROMIUM
    assert chromium is not None
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--screenshot={png}",
        f"--window-size={size[0]},{size[1]}",
        page.as_uri(),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


def _report() -> Diagnosis:
    """A real report: the recorded V100 transformer trace, diagnosed with every rule, with the
    tables and pictures the HTML report shows."""
    trace = load_trace(
        ROOT / "tests/fixtures/traces/large/transformer_v100_rank1of2_memory.json.gz"
    )
    return diagnose(trace, top=True)


@pytest.mark.browser
@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    from matplotlib.image import imread

    page = tmp_path / "report.html"
    page.write_text(render_html(_report()), encoding="utf-8")
    png = tmp_path / "report.png"
    screenshot(page, png, tmp_path / "profile")
    pixels = imread(png)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    # a rendered page, not a blank one: the dark header band and light sections both show
    assert pixels[:60, :, :3].mean() < 0.3 and pixels[400:, :, :3].mean() > 0.7
    if os.environ.get("TORCHPACE_UPDATE_SCREENSHOT"):
        shutil.copy(png, ROOT / "docs" / "report-screenshot.png")


def _pictures() -> dict[str, str | None]:
    """Every picture of the report, drawn from recorded traces (a GPU trace with memory events,
    and the 2-rank gloo run for the rank bars)."""
    d = _report()
    assert d.pictures is not None and d.top is not None
    ranks = diagnose(
        load_traces(ROOT / "tests/fixtures/traces/ddp_gloo_2rank/straggler_data"), top=True
    )
    return {
        "timeline": figures.timeline_svg(d.pictures.steps),
        "idle": figures.idle_svg(d.pictures.idle_ms_by_cause, d.breakdown.median_step_ms),
        "memory": figures.memory_svg(d.pictures.memory),
        "top-kernels": figures.top_svg(d.top.kernels, "GPU kernels", "topk"),
        "ranks": figures.ranks_svg(ranks.ranks, ranks.slowest_rank),
    }


@pytest.mark.browser
@pytest.mark.slow
def test_each_picture_draws_in_headless_chromium(tmp_path: Path) -> None:
    """Each picture alone on a page: the browser draws it (ink, not a blank or broken box)."""
    from matplotlib.image import imread

    for name, svg in _pictures().items():
        assert svg is not None, name
        page = tmp_path / f"{name}.html"
        page.write_text(
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{CSS}</style></head>"
            f"<body style='background:#fff'><figure>{svg}</figure></body></html>",
            encoding="utf-8",
        )
        png = tmp_path / f"{name}.png"
        screenshot(page, png, tmp_path / "profile", size=(1200, 700))
        pixels = imread(png)[:, :, :3]
        # Ink, not a blank or broken box (a blank page has none); the memory curve's two thin
        # lines ink the least, ~0.9% of the window.
        inked = (pixels.mean(axis=2) < 0.9).mean()
        assert 0.004 < inked < 0.9, (name, inked)


@pytest.mark.browser
@pytest.mark.slow
def test_a_followed_runs_timeline_draws_in_headless_chromium(tmp_path: Path) -> None:
    """A real followed run (3 epochs, each with validation, a torch.save and its loaders
    started again): its report opens with the account, whose timeline the browser draws."""
    from dataclasses import replace

    from matplotlib.image import imread

    from torchpace.report import run_figure
    from torchpace.runner.options import DoctorOptions
    from torchpace.runner.run import Target, run_target

    script = ROOT / "tests/doctor/scripts/whole_run.py"
    options = DoctorOptions(
        out_dir=tmp_path / "out", warmup=2, steps=3, window_after_s=0.0, follow=True
    )
    ran = run_target(Target(str(script), ()), options)
    assert ran.inspection.whole_run is not None and ran.trace_files
    account = ran.inspection.whole_run.account
    report = replace(diagnose(load_trace(ran.trace_files[0]), live=ran.inspection), account=account)
    page = tmp_path / "followed.html"
    page.write_text(render_html(report), encoding="utf-8")
    assert page.read_text().index("id='account'") < page.read_text().index("id='findings'")
    svg = run_figure.run_svg(account)
    assert svg is not None
    alone = tmp_path / "run.html"
    alone.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{CSS}</style></head>"
        f"<body style='background:#fff'><figure>{svg}</figure></body></html>",
        encoding="utf-8",
    )
    for html_page, size in ((page, (WIDTH, HEIGHT)), (alone, (1200, 400))):
        png = html_page.with_suffix(".png")
        screenshot(html_page, png, tmp_path / "profile", size=size)
        pixels = imread(png)[:, :, :3]
        inked = (pixels.mean(axis=2) < 0.9).mean()
        assert 0.01 < inked < 0.9, (html_page.name, inked)
