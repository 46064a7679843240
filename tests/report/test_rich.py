"""The colour report says what the plain one says, drawn with rich; the plain path never loads rich."""

from __future__ import annotations

import re
import subprocess
import sys

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import render

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_colour_report_has_the_same_facts(diagnosis: Diagnosis) -> None:
    coloured = render(diagnosis, "text", color=True, width=140)
    assert ANSI.search(coloured)
    plain = ANSI.sub("", coloured)
    for fact in (
        "Tesla V100-DGXS-32GB (CUDA, compute capability 7.0, 31.7 GiB)",
        "Median step",
        "1. HIGH dataloader-stall",
        "about 42.0 ms per step (35% of the 121 ms median step on Tesla V100-DGXS-32GB)",
        "DataLoader(dataset, num_workers=4, pin_memory=True, persistent_workers=True)",
        "train.py:42 in main (6x)",
        "3.1x the median",
        "gpu-idle",
    ):
        assert fact in plain, fact


def test_colour_report_names_the_slowest_rank(multirank: Diagnosis) -> None:
    plain = ANSI.sub("", render(multirank, "text", color=True, width=140))
    assert "Slowest rank: 1, median step 144 ms" in plain


def test_plain_text_and_json_do_not_import_rich() -> None:
    code = (
        "import sys\n"
        "from torchpace.doctor.diagnosis import Diagnosis\n"
        "from torchpace.trace.summary import Breakdown, TraceInfo\n"
        "from torchpace.report import render\n"
        "d = Diagnosis(TraceInfo('t.json', 'cpu'), Breakdown((), 1.0, {}), ())\n"
        "render(d, 'text'); render(d, 'json'); render(d, 'md')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'torch', 'matplotlib'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_colour_report_fits_a_narrow_terminal(diagnosis: Diagnosis, multirank: Diagnosis) -> None:
    for d in (diagnosis, multirank):
        plain = ANSI.sub("", render(d, "text", color=True, width=60))
        assert max(len(line) for line in plain.splitlines()) <= 60
        assert "dataloader-stall" in plain


def test_colour_report_puts_the_verdict_first_and_wraps_fix_code(diagnosis: Diagnosis) -> None:
    plain = ANSI.sub("", render(diagnosis, "text", color=True, width=60))
    assert plain.splitlines()[1].startswith("Verdict: ")
    assert plain.index("Verdict: ") < plain.index("What was measured")
    # Code is wrapped, never cut at the terminal's edge (`DataLoader(..., num_worker` was).
    flat = re.sub(r"[\s│]+", "", plain)
    assert "DataLoader(dataset,num_workers=4,pin_memory=True,persistent_workers=True)" in flat
