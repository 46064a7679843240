"""Every expert reading of the real-trace corpus holds (tests/fixtures/corpus/PROVENANCE.md)."""

from __future__ import annotations

import pytest

from .conftest import report_of
from .readings import CORPUS, TRACES, Check, every_check

CHECKS = list(every_check())

# Readings that do not hold yet (issue 12 fixes them). Strict: a check that starts to hold while
# still listed fails, so this list only shrinks. It must be empty when issue 12 is done.
NOT_YET: frozenset[str] = frozenset()


def test_every_corpus_trace_is_read() -> None:
    on_disk = {p.name for p in CORPUS.iterdir() if p.name != "PROVENANCE.md"}
    assert on_disk == set(TRACES)


def test_check_ids_are_unique() -> None:
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
    assert set(ids) >= NOT_YET


def _param(check: Check) -> object:
    marks = [pytest.mark.xfail(strict=True, reason="not fixed yet")] if check.id in NOT_YET else []
    return pytest.param(check, id=check.id, marks=marks)


@pytest.mark.parametrize("check", [_param(c) for c in CHECKS])
def test_reading_holds(check: Check) -> None:
    doc = report_of(check.trace)
    assert check.holds(doc), f"{check.trace}: {check.says}"
