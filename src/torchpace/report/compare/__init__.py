"""Reporters for `torchpace compare`: a Comparison -> text, JSON, Markdown or HTML."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from torchpace.report import FORMATS

if TYPE_CHECKING:
    from torchpace.compare import Comparison


def renderer(fmt: str) -> Callable[[Comparison], str]:
    """The function that renders a Comparison as `fmt` (text, json, md or html)."""
    if fmt == "text":
        from torchpace.report.compare.text import render_text

        return render_text
    if fmt == "json":
        from torchpace.report.compare.jsondoc import render_json

        return render_json
    if fmt == "md":
        from torchpace.report.compare.markdown import render_markdown

        return render_markdown
    if fmt == "html":
        from torchpace.report.compare.html import render_html

        return render_html
    raise ValueError(f"unknown report format {fmt!r}; choose one of: {', '.join(FORMATS)}")
