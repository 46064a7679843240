"""The corpus reports, computed once per trace for the whole session."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from torchpace.doctor.diagnose import diagnose
from torchpace.report import render
from torchpace.trace import load_traces

from .readings import CORPUS


@cache
def report_of(trace: str) -> dict[str, Any]:
    """The JSON report a user gets from `torchpace analyze <corpus trace> --format json`."""
    return json.loads(render(diagnose(load_traces(CORPUS / trace)), "json"))
