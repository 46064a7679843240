"""Loss parity judgements, on made-up loss curves."""

from __future__ import annotations

import math

from torchpace.bench.parity import compare
from torchpace.bench.techniques import get_technique

BASE = [2.30, 2.10, 1.95, 1.80]


def test_identical_losses_are_the_same_math() -> None:
    parity = compare(BASE, list(BASE), [get_technique("workers")])
    assert parity.status == "same" and parity.max_rel_diff == 0.0


def test_fp32_drift_beyond_tolerance_is_flagged() -> None:
    parity = compare(BASE, [2.30, 2.10, 1.95, 1.90], [get_technique("workers")])
    assert parity.status == "differs"
    assert parity.note == "expected the same math"
    assert math.isclose(parity.max_rel_diff or 0, 0.1 / 1.8)


def test_amp_is_never_called_same_math_even_when_close() -> None:
    parity = compare(BASE, list(BASE), [get_technique("amp-bf16")])
    assert parity.status == "within-tolerance"
    assert "bf16" in parity.note


def test_amp_beyond_its_tolerance_differs() -> None:
    parity = compare(BASE, [x * 1.2 for x in BASE], [get_technique("amp-bf16")])
    assert parity.status == "differs"


def test_bucketing_is_not_comparable_and_says_why() -> None:
    parity = compare(BASE, [1.0] * 4, [get_technique("workers"), get_technique("bucketing")])
    assert parity.status == "not-comparable"
    assert parity.note == "batches are composed differently (the same samples, grouped by length)"


def test_non_finite_loss_differs() -> None:
    parity = compare(BASE, [2.30, math.nan, 1.0, 1.0], [get_technique("compile")])
    assert (parity.status, parity.note) == ("differs", "non-finite loss")
