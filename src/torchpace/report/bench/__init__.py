"""Reporters for `torchpace bench`: a BenchResult -> a terminal table, JSON lines or an HTML page."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchpace.bench.results import BenchResult


def render(result: BenchResult, fmt: str) -> str:
    """`result` as `fmt`: text (the plain table), json (JSON lines) or html (the page)."""
    if fmt == "text":
        from torchpace.report.bench.text import render_plain

        return render_plain(result)
    if fmt == "json":
        from torchpace.bench.results import to_jsonl

        return to_jsonl(result)
    if fmt == "html":
        from torchpace.report.bench.html import render_html

        return render_html(result)
    raise ValueError(f"unknown bench output format {fmt!r}; choose one of: text, json, html")
