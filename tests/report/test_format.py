"""The report format comes from --format, else from -o's extension, else text."""

from __future__ import annotations

import pytest

from torchpace.errors import UsageError
from torchpace.report import choose_format, render


@pytest.mark.parametrize(
    ("output", "explicit", "fmt"),
    [
        (None, None, "text"),
        (None, "json", "json"),
        ("report.json", None, "json"),
        ("out/REPORT.MD", None, "md"),
        ("report.html", None, "html"),
        ("report.htm", None, "html"),
        ("report.txt", None, "text"),
        ("report", None, "text"),
        ("report.json", "json", "json"),
        ("report.out", "md", "md"),  # an extension that names no format: --format decides
        ("report", "html", "html"),
    ],
)
def test_format_from_extension_or_flag(output: str | None, explicit: str | None, fmt: str) -> None:
    assert choose_format(output, explicit) == fmt


def test_conflicting_extension_and_flag_names_both() -> None:
    with pytest.raises(UsageError) as info:
        choose_format("report.json", "md")
    assert str(info.value) == (
        "-o 'report.json' implies --format json but --format md was given; "
        "drop one of them or make them agree"
    )


def test_unknown_extension_without_flag_lists_the_supported_ones() -> None:
    with pytest.raises(UsageError, match=r"cannot tell the report format from 'r\.xml'") as info:
        choose_format("r.xml", None)
    for ext in (".json", ".md", ".html", ".txt"):
        assert ext in str(info.value)
    assert "--format (text, json, md, html)" in str(info.value)


def test_unknown_format_names_the_choices() -> None:
    with pytest.raises(
        UsageError, match=r"unknown --format 'xml'; choose one of: text, json, md, html"
    ):
        choose_format(None, "xml")


def test_render_rejects_an_unknown_format(diagnosis: object) -> None:
    with pytest.raises(ValueError, match="unknown report format 'pdf'"):
        render(diagnosis, "pdf")  # type: ignore[arg-type]
