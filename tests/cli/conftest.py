"""Run the CLI in-process and capture what it prints; register throwaway rules for edge cases."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from torchpace.cli.main import main
from torchpace.doctor import registry
from torchpace.doctor.finding import Finding

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


@dataclass(frozen=True)
class Result:
    """What one CLI run returned and printed."""

    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run `torchpace ARGS...` in-process; returns the exit code, stdout and stderr."""

    def run(*args: str) -> Result:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def trace() -> Callable[[str], Path]:
    """The path of a recorded trace under tests/fixtures/traces/."""

    def find(name: str) -> Path:
        path = TRACES / name
        assert path.exists(), f"missing fixture {path}"
        return path

    return find


def _crash(trace: object, *, min_ms: float = 1.0) -> list[Finding]:
    raise RuntimeError("boom")


@pytest.fixture
def crashing_rule(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A registered rule that raises an unexpected exception; removed after the test."""
    registry.all_rules()  # load the real rules first, so the fake one is not the only one
    spec = registry.RuleSpec("crashing-rule", "trace", _crash, "Always raises (a test rule)")
    monkeypatch.setitem(registry._RULES, "crashing-rule", spec)
    yield "crashing-rule"
