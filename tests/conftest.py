"""Shared pytest set-up: GPU-only tests skip cleanly on machines without CUDA."""

from __future__ import annotations

import shutil

import pytest


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU; run on the GPU machine")
    skip_browser = pytest.mark.skip(
        reason="headless Chromium is not installed (apt-get install chromium)"
    )
    cuda = _has_cuda()
    browser = shutil.which("chromium") is not None or shutil.which("chromium-browser") is not None
    for item in items:
        if "cuda" in item.keywords and not cuda:
            item.add_marker(skip_cuda)
        if "browser" in item.keywords and not browser:
            item.add_marker(skip_browser)
