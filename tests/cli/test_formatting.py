"""The help formatter's width, read without shutil."""

from __future__ import annotations

import shutil

import pytest

from torchpace.cli.formatting import terminal_columns
from torchpace.cli.main import build_parser


@pytest.mark.parametrize("columns", ["", "abc", "0", "-3", "57", "200"])
def test_columns_as_shutil_reads_them(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


def test_help_is_wrapped_to_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["analyze", "--help"])
    text = capsys.readouterr().out
    # The description and the examples are kept as written; the options are wrapped.
    options = text[text.index("options:") : text.index("examples:")]
    assert max(len(line) for line in options.splitlines()) <= 60
    assert len(options.splitlines()) > 12
