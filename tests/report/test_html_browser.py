"""The HTML report opened in headless Chromium: it renders, offline, to a non-blank page.

`TORCHPACE_UPDATE_SCREENSHOT=1 pytest -m browser tests/report/test_html_browser.py` also refreshes
docs/report-screenshot.png (the picture the README shows).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report.html import render_html
from torchpace.trace import load_trace
from torchpace.trace.top import TopTables, top_tables

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 1280, 2400


def screenshot(page: Path, png: Path, profile: Path) -> None:
    """Render `page` in headless Chromium with networking off, writing a PNG screenshot."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium is not None
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--screenshot={png}",
        f"--window-size={WIDTH},{HEIGHT}",
        page.as_uri(),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


def _report() -> tuple[Diagnosis, TopTables | None]:
    """A real report: the recorded V100 transformer trace, diagnosed with every rule."""
    trace = load_trace(
        ROOT / "tests/fixtures/traces/large/transformer_v100_rank1of2_memory.json.gz"
    )
    return diagnose(trace), top_tables(trace)


@pytest.mark.browser
@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    from matplotlib.image import imread

    diagnosis, top = _report()
    page = tmp_path / "report.html"
    page.write_text(render_html(diagnosis, top=top), encoding="utf-8")
    png = tmp_path / "report.png"
    screenshot(page, png, tmp_path / "profile")
    pixels = imread(png)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    # a rendered page, not a blank one: the dark header band and light sections both show
    assert pixels[:60, :, :3].mean() < 0.3 and pixels[400:, :, :3].mean() > 0.7
    if os.environ.get("TORCHPACE_UPDATE_SCREENSHOT"):
        shutil.copy(png, ROOT / "docs" / "report-screenshot.png")
