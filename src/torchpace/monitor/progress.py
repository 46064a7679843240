"""A progress bar with live throughput, drawn only on a terminal (stderr by default)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from torchpace.monitor.throughput import Throughput, format_stats

T = TypeVar("T")


def progress(
    iterable: Iterable[T],
    *,
    total: int | None = None,
    meter: Throughput | None = None,
    description: str = "train",
    stream: IO[str] | None = None,
    refresh_every: int = 10,
) -> Iterator[T]:
    """Yield from `iterable`, showing a bar (and `meter`'s figures) when `stream` is a TTY.

    Not a TTY (logs, CI, pipes): items pass through and nothing is written. The meter's figures
    refresh every `refresh_every` items (reading them may sync once, see Throughput.stats).
    """
    stream = stream if stream is not None else sys.stderr
    if not stream.isatty():
        yield from iterable
        return
    if total is None:
        total = len(iterable) if hasattr(iterable, "__len__") else None  # type: ignore[arg-type]
    console = Console(file=stream, force_terminal=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[figures]}"),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(description, total=total, figures="")
        for i, item in enumerate(iterable, start=1):
            yield item
            figures = None
            if meter is not None and i % refresh_every == 0:
                stats = meter.stats()
                figures = format_stats(stats) if stats is not None else None
            if figures is None:
                bar.advance(task)
            else:
                bar.update(task, advance=1, figures=figures)
