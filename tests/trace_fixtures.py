"""The one loader of recorded trace fixtures: tests/fixtures/traces/<scenario>/<name>.json.gz.

Each is loaded once per session. Test modules use the `trace_fixture` fixture (tests/conftest.py)
or, where a parametrisation needs a trace at collection time, `recorded` directly.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from torchpace.trace import Trace, load_trace

TRACE_FIXTURES = Path(__file__).parent / "fixtures" / "traces"


@cache
def recorded(name: str) -> Trace:
    """The recorded fixture `<scenario>/<name>` (without .json.gz), loaded once."""
    return load_trace(TRACE_FIXTURES / f"{name}.json.gz")
