"""Reports are safe to post and to print: trace strings never become HTML or terminal control."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding, Severity, Skipped
from torchpace.report import render
from torchpace.report.safe import printable, printable_data
from torchpace.trace import load_trace
from torchpace.trace.synthetic import TraceBuilder

# Sets the window title, clears the screen, and reverses the rest of the line.
EVIL_TERMINAL = "GPU\x1b]0;owned\x07\x1b[2J\u202eevil\x9b31m"
EVIL_HTML = "<script>alert(1)</script><img src=x onerror=alert(2)>"
# Any escape that is not one of rich's own colour codes (ESC [ digits/semicolons m).
NOT_SGR = re.compile(r"\x1b(?!\[[0-9;]*m)")
# Markdown shows code literally: fenced blocks and inline spans (a run of backticks to the same run).
CODE = re.compile(r"^(`{3,})python\n.*?\n\1$|(`+)[^`].*?\2", re.S | re.M)


def _markup(md: str) -> str:
    """What GitHub would read as Markdown/HTML: everything outside code."""
    return CODE.sub("", md)


@pytest.fixture
def evil_trace(tmp_path: Path) -> Path:
    """A synthetic trace whose device and op names carry HTML and terminal control sequences."""
    b = TraceBuilder()
    b.gpu_device(f"{EVIL_HTML} {EVIL_TERMINAL}")
    for n in range(4):
        t0 = n * 1000.0
        b.step(n, t0, 1000)
        b.op(f"aten::mm{EVIL_HTML}", t0 + 10, 300)
        b.kernel(f"{EVIL_HTML}_kernel{EVIL_TERMINAL}", t0 + 400, 100)
    return b.write(tmp_path / "synthetic_evil.json")


def _evil(diagnosis: Diagnosis) -> Diagnosis:
    finding = Finding(
        rule="sync-point",
        severity=Severity.HIGH,
        summary=f"op {EVIL_HTML} syncs {EVIL_TERMINAL}",
        evidence={"op_name": f"{EVIL_HTML}{EVIL_TERMINAL}", "kernels": [EVIL_HTML]},
        fix=f"x = {EVIL_HTML!r}  # ``` not closing the fence",
        saving_ms=1.0,
        caveat=EVIL_HTML,
    )
    return replace(
        diagnosis,
        info=replace(diagnosis.info, device_name=f"{EVIL_HTML}{EVIL_TERMINAL}"),
        findings=(finding,),
        skipped=(Skipped("gpu-idle", f"no {EVIL_HTML}", f"`{EVIL_HTML}`"),),
        notes=(EVIL_TERMINAL,),
    )


def test_printable_makes_control_characters_visible() -> None:
    assert printable("a\x1b[2Jb\x07\tc\nd") == "a\\x1b[2Jb\\x07\tc\nd"
    assert printable("\u202eevil\x9b") == "\\u202eevil\\x9b"
    clean = "aten::mm <T> 12 ms"
    assert printable(clean) is clean


def test_printable_data_copies_only_what_changes(diagnosis: Diagnosis) -> None:
    assert printable_data(diagnosis) is diagnosis  # a clean report: nothing copied
    cleaned = printable_data(_evil(diagnosis))
    assert "\x1b" not in (cleaned.info.device_name or "")
    assert cleaned.breakdown is diagnosis.breakdown  # untouched parts are shared
    assert list(cleaned.breakdown.median_phase_ms) == list(diagnosis.breakdown.median_phase_ms)


@pytest.mark.parametrize("color", [False, True])
def test_terminal_reports_carry_no_control_sequence_from_the_trace(
    diagnosis: Diagnosis, color: bool
) -> None:
    text = render(_evil(diagnosis), "text", color=color, width=120)
    assert not NOT_SGR.search(text)
    assert "\x07" not in text and "\u202e" not in text and "\x9b" not in text
    assert "\\x1b]0;owned\\x07" in text  # shown, so the reader sees something odd was there


def test_rich_does_not_read_trace_strings_as_markup(diagnosis: Diagnosis) -> None:
    odd = replace(diagnosis, info=replace(diagnosis.info, device_name="[bold red]X[/bold red]"))
    assert "[bold red]X[/bold red]" in render(odd, "text", color=True, width=120)


def test_markdown_escapes_html_from_the_trace(diagnosis: Diagnosis) -> None:
    md = render(_evil(diagnosis), "md")
    assert "<script" not in _markup(md) and "<img" not in _markup(md)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md  # the summary and the device row
    assert "\x1b" not in md and "\u202e" not in md
    # In code spans and fences HTML is shown literally: it stays as written, and cannot close them.
    assert "```python\nx = '<script>" in md


def test_a_hostile_trace_end_to_end(evil_trace: Path) -> None:
    diagnosis = diagnose(load_trace(evil_trace), top=True)
    assert "<script>" in (diagnosis.info.device_name or "")  # the data keeps what was recorded
    md, text = render(diagnosis, "md"), render(diagnosis, "text")
    html_page = render(diagnosis, "html")
    for out in (_markup(md), html_page):
        assert "<script" not in out and "<img" not in out
    assert not NOT_SGR.search(text) and "\x07" not in text


def test_top_operators_leave_out_profiler_steps(evil_trace: Path) -> None:
    from torchpace.trace.top import top_tables

    names = [row.name for row in top_tables(load_trace(evil_trace)).ops]
    assert names and not any(name.startswith("ProfilerStep#") for name in names)


# Markdown link and image syntax, and a backslash that would undo an escape in front of it.
LINKS = "[x](javascript:alert(1)) ![i](https://e.example/i.png) \\[y\\](https://e.example)"


def _rendered(md: str) -> str:
    """The HTML a CommonMark renderer with GitHub's tables makes of `md`."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(md)


def test_markdown_shows_links_from_the_trace_as_text(diagnosis: Diagnosis) -> None:
    finding = Finding(
        rule="sync-point",
        severity=Severity.HIGH,
        summary=f"op {LINKS} syncs",
        evidence={"op_name": LINKS, "kernels": [LINKS]},
        fix="torch.cuda.synchronize()",
        saving_ms=1.0,
        caveat=LINKS,
    )
    odd = replace(
        diagnosis,
        info=replace(diagnosis.info, device_name=LINKS),
        findings=(finding,),
        notes=(LINKS,),
    )
    md = render(odd, "md")
    page = _rendered(md)
    assert "<a " not in page and "<img" not in page
    assert page.count("[x](javascript:alert(1))") >= 6  # shown as written: summary, evidence...
    assert "<a " not in render(odd, "html") and "<img" not in render(odd, "html")


def test_compare_markdown_shows_names_as_text(tmp_path: Path) -> None:
    from torchpace.compare import compare_paths
    from torchpace.report.compare import renderer

    paths = []
    for n, ms in (("a", 10_000), ("b", 5_000)):
        b = TraceBuilder()
        for i in range(4):
            b.step(i, i * 20_000, ms)
            b.op(f"{EVIL_HTML}{LINKS}", i * 20_000, ms // 2)
        paths.append(b.write(tmp_path / f"synthetic_{n}.json"))
    md = renderer("md")(compare_paths(str(paths[0]), str(paths[1])))
    page = _rendered(md)
    assert "<script" not in page and "<a " not in page and "<img" not in page
    assert "[x](javascript:alert(1))" in page
