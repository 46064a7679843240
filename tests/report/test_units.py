"""Evidence values are shown in the unit their key names."""

from __future__ import annotations

import pytest

from torchpace.report import units


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("window_ms", 11844.2, "11.8 s"),
        ("step_ms", 148.23, "148 ms"),
        ("wait_ms", 48.123, "48.1 ms"),
        ("copy_ms", 2.345, "2.35 ms"),
        ("launch_ms", 0.0421, "0.042 ms"),
        ("idle_ms", 0.0, "0 ms"),
        ("kernel_us", 12.5, "12.5 us"),
        ("gap_us", 2500.0, "2.50 ms"),
        ("wait_fraction", 0.347, "35%"),
        ("idle_share", 0.042, "4.2%"),
        ("h2d_bytes", 1536, "1.5 KiB"),
        ("reserved_bytes", 3 * 1024**3, "3.0 GiB"),
        ("sync_count", 12, "12"),
        ("events", 216092, "216,092"),
        ("speedup_x", 3.14159, "3.14x"),
        ("idle_ms_per_step", 77.21, "77.2 ms/step"),
        ("h2d_pageable_bytes_per_step", 19_267_840, "18.4 MiB/step"),
        ("bandwidth_gb_per_s", 9.936, "9.94 GB/s"),
        ("copies_per_step_count", 2, "2/step"),
        ("steps_per_s", 3.14159, "3.14/s"),
        ("busy_pct", 41.25, "41.2%"),
        ("per_step", 3, "3"),
        ("pinned", True, "yes"),
        ("torch_version", None, "unknown"),
        ("op", "aten::item", "aten::item"),
        ("ratio", float("nan"), "n/a"),
    ],
)
def test_scalar_units_follow_the_key(key: str, value: object, shown: str) -> None:
    assert units.evidence_value(key, value) == shown  # type: ignore[arg-type]


def test_lists_carry_the_key_unit_and_say_how_many_are_hidden() -> None:
    shown = units.evidence_value("step_ms", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    assert shown == "1.00 ms, 2.00 ms, 3.00 ms, 4.00 ms, 5.00 ms, 6.00 ms (+2 more)"


def test_mapping_values_use_their_own_unit_or_the_outer_one() -> None:
    shown = units.evidence_value("blocked_ms", {"aten::item": 3.5, "copy_bytes": 2048})
    assert shown == "aten::item=3.50 ms, copy_bytes=2.0 KiB"
