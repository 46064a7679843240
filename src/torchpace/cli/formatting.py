"""The help formatter every torchpace parser uses."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def terminal_columns() -> int:
    """Columns of the terminal as shutil.get_terminal_size reads them: COLUMNS, then stdout's
    terminal, then 80.

    Without importing shutil: argparse builds a formatter for every add_argument, and its
    default width imports shutil and the archive modules with it, 4 ms of every command.
    """
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs kept as written (examples stay one per line), fitted to the
    terminal."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = terminal_columns() - 2  # argparse's own margin
        super().__init__(prog, indent_increment, max_help_position, width)


def subcommand(
    subparsers: Any, name: str, help: str, description: str, epilog: str
) -> argparse.ArgumentParser:
    """Register subcommand `name`: its help fitted to the terminal, the rest kept as written."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=HelpFormatter
    )
    return parser
