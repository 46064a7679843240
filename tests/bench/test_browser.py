"""The HTML page renders in headless Chromium (no network) into a non-trivial screenshot."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from torchpace.bench.results import BenchResult
from torchpace.report.bench.html import render_html


@pytest.mark.browser
def test_page_renders_in_headless_chromium(vision_result: BenchResult, tmp_path: Path) -> None:
    page = tmp_path / "results.html"
    page.write_text(render_html(vision_result), encoding="utf-8")
    shot = tmp_path / "shot.png"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium is not None
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=90,
    )
    assert shot.stat().st_size > 20_000
    pixels = image.imread(shot)
    assert pixels.shape[:2] == (2000, 1280)
    # Not a blank page: many distinct colours (text, bars in several colours, box plots).
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50
