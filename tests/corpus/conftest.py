"""The corpus and held-out reports, computed once per trace for the whole session."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from torchpace.doctor.diagnose import diagnose
from torchpace.report import render
from torchpace.trace import load_traces

from .readings import CORPUS
from .readings_holdout import HOLDOUT


def trace_path(trace: str) -> Path:
    """A trace named by a check: the corpus' file or folder, else the held-out set's."""
    path = CORPUS / trace
    return path if path.exists() else HOLDOUT / trace


@cache
def report_of(trace: str) -> dict[str, Any]:
    """The JSON report a user gets from `torchpace analyze <trace> --format json`."""
    return json.loads(render(diagnose(load_traces(trace_path(trace))), "json"))
