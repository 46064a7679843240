"""Reporters: a Diagnosis -> text, JSON, Markdown or HTML. The library never imports this package.

Reporters take plain data and return a string; writing it anywhere is the caller's job. Each format's
module is imported only when asked for, so the plain-text path never pays for rich or matplotlib.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal, cast, get_args

from torchpace.errors import UsageError

if TYPE_CHECKING:
    from torchpace.doctor.diagnosis import Diagnosis

Format = Literal["text", "json", "md", "html"]
FORMATS: tuple[str, ...] = get_args(Format)

# Output-file extension -> format; a path without an extension gets text.
EXTENSIONS: dict[str, Format] = {
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".json": "json",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
}


def render(
    diagnosis: Diagnosis,
    fmt: str,
    *,
    color: bool = False,
    width: int | None = None,
    verbose: bool = False,
) -> str:
    """Render `diagnosis` as `fmt` (text, json, md or html); `color` and `width` apply to text,
    `verbose` (every skipped rule rather than one line per cause) to text and Markdown."""
    return renderer(fmt, color=color, width=width, verbose=verbose)(diagnosis)


def renderer(
    fmt: str, *, color: bool = False, width: int | None = None, verbose: bool = False
) -> Callable[[Diagnosis], str]:
    """The function that renders a Diagnosis as `fmt`, its module imported now.

    A command can ask for it before the analysis, while other work (reading a trace) goes on.
    """
    if fmt == "text":
        if color:
            from torchpace.report.rich_text import render_rich

            return functools.partial(render_rich, width=width, verbose=verbose)
        from torchpace.report.text import render_text

        return functools.partial(render_text, width=width, verbose=verbose)
    if fmt == "json":
        from torchpace.report.jsondoc import render_json

        return render_json
    if fmt == "md":
        from torchpace.report.markdown import render_markdown

        return functools.partial(render_markdown, verbose=verbose)
    if fmt == "html":
        from torchpace.report.html import render_html  # the page with plots (matplotlib)

        return render_html
    raise ValueError(f"unknown report format {fmt!r}; choose one of: {', '.join(FORMATS)}")


def choose_format(
    output_path: str | None,
    explicit_format: str | None,
    *,
    extensions: Mapping[str, str] = EXTENSIONS,
) -> Format:
    """The output format: --format if given, else from -o's extension, else text.

    `extensions` maps each output-file extension to its format (a command that writes other
    formats, such as `bench`, passes its own); the formats are its values. Raises UsageError for
    an unknown --format, an -o extension that names no format (without --format), and an -o
    extension that names a different format than --format.
    """
    formats = tuple(dict.fromkeys(extensions.values()))
    explicit = explicit_format
    if explicit is not None and explicit not in formats:
        raise UsageError(f"unknown --format {explicit!r}; choose one of: {', '.join(formats)}")
    if output_path is None:
        return cast(Format, explicit or "text")
    suffix = os.path.splitext(output_path)[1].lower()
    implied = extensions.get(suffix) if suffix else "text"
    if explicit is None:
        if implied is None:
            raise UsageError(
                f"cannot tell the report format from {output_path!r}: unknown extension "
                f"{suffix!r}; use one of {', '.join(extensions)} or pass --format "
                f"({', '.join(formats)})"
            )
        return cast(Format, implied)
    if implied is not None and suffix and implied != explicit:
        raise UsageError(
            f"-o {output_path!r} implies --format {implied} but --format {explicit} was given; "
            f"drop one of them or make them agree"
        )
    return cast(Format, explicit)


__all__ = ["EXTENSIONS", "FORMATS", "Format", "choose_format", "render"]
