"""Recorded trace fixtures for rule tests: tests/fixtures/traces/<scenario>/<name>.json.gz."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.trace import Trace, load_trace

FIXTURES = Path(__file__).parents[2] / "fixtures" / "traces"
_LOADED: dict[str, Trace] = {}


@pytest.fixture(scope="session")
def trace_fixture() -> Callable[[str], Trace]:
    """Load `<scenario>/<name>` (without .json.gz) once per session."""

    def load(name: str) -> Trace:
        if name not in _LOADED:
            _LOADED[name] = load_trace(FIXTURES / f"{name}.json.gz")
        return _LOADED[name]

    return load
