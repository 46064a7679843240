"""Every expert reading of the real-trace corpus and of the held-out set holds.

Readings: tests/fixtures/corpus/PROVENANCE.md (the traces the rules were fixed on) and
tests/fixtures/holdout/PROVENANCE.md (traces kept apart to judge whether the fixes generalise).
"""

from __future__ import annotations

import pytest

from . import readings, readings_holdout
from .conftest import report_of
from .readings import Check

CHECKS = [*readings.every_check(), *readings_holdout.every_check()]

# Readings that do not hold yet, each with why. Strict: a check that starts to hold while still
# listed fails, so this list only shrinks.
NOT_YET: dict[str, str] = {}


@pytest.mark.parametrize(
    ("folder", "traces"),
    [(readings.CORPUS, readings.TRACES), (readings_holdout.HOLDOUT, readings_holdout.TRACES)],
)
def test_every_trace_is_read(folder, traces) -> None:  # type: ignore[no-untyped-def]
    on_disk = {p.name for p in folder.iterdir() if p.name != "PROVENANCE.md"}
    assert on_disk == set(traces)


def test_check_ids_are_unique() -> None:
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
    assert set(ids) >= set(NOT_YET)


def _param(check: Check) -> object:
    reason = NOT_YET.get(check.id)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(check, id=check.id, marks=marks)


@pytest.mark.parametrize("check", [_param(c) for c in CHECKS])
def test_reading_holds(check: Check) -> None:
    doc = report_of(check.trace)
    assert check.holds(doc), f"{check.trace}: {check.says}"
