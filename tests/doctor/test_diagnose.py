"""diagnose(): rule selection, NotApplicable -> Skipped, ranks, thresholds and errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from torchpace.doctor import registry
from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable
from torchpace.trace import Trace, load_trace
from torchpace.trace.synthetic import TraceBuilder


def _trace(tmp_path: Path, rank: int | None, step_us: float, name: str = "t") -> Trace:
    b = TraceBuilder()
    if rank is not None:
        b.top["distributedInfo"] = {"rank": rank, "world_size": 2}
    for n in range(3):
        b.step(n, n * 10_000, step_us)
        b.op("aten::mm", n * 10_000 + 1, step_us / 2)
    return load_trace(b.write(tmp_path / f"synthetic_{name}_{rank}.json"))


@pytest.fixture
def fake_rules() -> Iterator[None]:
    """Two throwaway rules registered for one test, then removed."""
    saved = dict(registry._RULES)

    @registry.rule("zz-always")
    def always(trace: Trace, *, limit_ms: float = 1.0) -> list[Finding]:
        ms = trace.median_step_ms()
        return [Finding("zz-always", Severity.LOW, f"step {ms:.1f} ms", {"step_ms": ms}, "-")]

    @registry.rule("zz-needs-stacks")
    def needs(trace: Trace) -> list[Finding]:
        raise NotApplicable("the trace has no stacks", "profile(with_stack=True)")

    yield
    registry._RULES.clear()
    registry._RULES.update(saved)


def test_unknown_rule_names_are_rejected(tmp_path: Path) -> None:
    t = _trace(tmp_path, None, 1000)
    with pytest.raises(ValueError, match="unknown rule 'no-such'; run 'torchpace rules'"):
        diagnose(t, only=["no-such"])
    with pytest.raises(ValueError, match="unknown rule 'nope'"):
        diagnose(t, ignore=["nope"])


def test_unknown_threshold_is_rejected(tmp_path: Path, fake_rules: None) -> None:
    with pytest.raises(
        ValueError, match="rule 'zz-always' has no threshold 'limit'; its thresholds are: limit_ms"
    ):
        diagnose(
            _trace(tmp_path, None, 1000), only=["zz-always"], thresholds={"zz-always": {"limit": 2}}
        )


def test_not_applicable_becomes_skipped(tmp_path: Path, fake_rules: None) -> None:
    d = diagnose(_trace(tmp_path, None, 1000), only=["zz-always", "zz-needs-stacks"])
    assert [f.rule for f in d.findings] == ["zz-always"]
    assert [(s.rule, s.enable) for s in d.skipped] == [
        ("zz-needs-stacks", "profile(with_stack=True)")
    ]
    assert d.findings[0].rank is None and d.ranks == () and d.slowest_rank is None


def test_ignore_removes_a_rule(tmp_path: Path, fake_rules: None) -> None:
    d = diagnose(_trace(tmp_path, None, 1000), only=["zz-always"], ignore=["zz-always"])
    assert d.findings == ()


def test_several_ranks_tag_findings_and_pick_the_slowest(tmp_path: Path, fake_rules: None) -> None:
    traces = [_trace(tmp_path, 0, 1000), _trace(tmp_path, 1, 3000)]
    d = diagnose(traces, only=["zz-always"])
    assert sorted(f.rank for f in d.findings) == [0, 1]  # type: ignore[type-var]
    assert d.slowest_rank == 1
    assert d.info.rank == 1 and d.breakdown.median_step_ms == pytest.approx(3.0)
    assert [r.info.rank for r in d.ranks] == [0, 1]
    assert d.trace_files == tuple(t.info.path for t in traces)


def test_rejects_empty_and_wrong_types() -> None:
    with pytest.raises(ValueError, match="at least one Trace"):
        diagnose([])
    with pytest.raises(TypeError, match="diagnose\\(\\) takes Trace objects"):
        diagnose(["trace.json"])  # type: ignore[list-item]


def test_real_rules_all_run_on_a_cpu_trace(tmp_path: Path) -> None:
    d = diagnose(_trace(tmp_path, None, 1000))
    assert not [s for s in d.skipped if "rule failed" in s.reason]
