"""Configuration as ruff and pytest read theirs: `[tool.torchpace]` in pyproject.toml, `--config FILE`.

    [tool.torchpace]
    ignore = ["allocator-churn"]            # rule ids; `only = [...]` runs just those
    fail-on = "high"                        # the default of --fail-on
    [tool.torchpace.thresholds.gpu-idle]    # a rule's keyword parameters (`torchpace rules`)
    min_idle_fraction = 0.3
    [[tool.torchpace.overrides]]            # for `analyze` of a trace or folder matching `paths`
    paths = ["traces/cpu/*"]
    ignore = ["gpu-idle"]

The pyproject.toml is the first one with a `[tool.torchpace]` table in the current directory or
above it (as ruff and pytest find theirs). Layers, lowest first: the rules' defaults, that file,
`--config FILE` (a pyproject.toml, or a file with the same keys at its top level), the command
line. `only` starts a layer's selection afresh and `ignore` takes rules out of it, so a higher
layer's `--only X` runs X even where a lower one ignores it. Overrides apply right after the file
that holds them; their `paths` are globs relative to that file's folder (`*` crosses folders).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchpace.errors import UsageError

KEYS = ("only", "ignore", "fail-on", "thresholds", "overrides")
OVERRIDE_KEYS = ("paths", "only", "ignore", "fail-on", "thresholds")
SEVERITIES = ("low", "medium", "high")
DEFAULT = "default"
Thresholds = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Layer:
    """Settings from one source (a file, one of its overrides, the command line)."""

    source: str  # shown by `torchpace rules`: "pyproject.toml", "--config ci.toml", "command line"
    only: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    fail_on: str | None = None
    thresholds: Thresholds = field(default_factory=dict)
    paths: tuple[str, ...] = ()  # an override's globs; () for a file's top level
    root: Path | None = None  # the folder `paths` are relative to


@dataclass(frozen=True)
class Settings:
    """The effective settings, each with where it came from."""

    selected: tuple[str, ...]  # the rules that run
    off: Mapping[str, str]  # rule id -> the source that took it out
    fail_on: str | None
    fail_on_source: str
    thresholds: Mapping[str, Mapping[str, float]]  # set values only; defaults stay the rules'
    sources: Mapping[tuple[str, str], str]  # (rule, threshold) -> source of its value
    files: tuple[str, ...]  # the configuration files read
    cli: Layer | None = None  # set when no file was read: the command line's filters as given

    def rule_filters(self) -> tuple[list[str] | None, list[str] | None]:
        """(only, ignore) for diagnose(): None, None when every rule runs."""
        if self.cli is not None:
            return (
                list(self.cli.only) if self.cli.only is not None else None,
                list(self.cli.ignore) if self.cli.ignore else None,
            )
        return (list(self.selected), None) if self.off else (None, None)


def _tomllib() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 only
        import tomli as tomllib
    return tomllib


def _display(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _read_toml(path: Path, flag: str = "") -> dict[str, Any]:
    name = f"{flag}{_display(path)}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror}; give a readable TOML file") from None
    toml = _tomllib()
    try:
        doc: dict[str, Any] = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise UsageError(f"{name} is not valid TOML: {exc}") from None
    return doc


def find_pyproject(start: Path | None = None) -> Path | None:
    """The first pyproject.toml with a [tool.torchpace] table, from `start` (cwd) upward."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        # Parse only a file that can hold our table: most pyproject.toml files do not.
        if "torchpace" in text and "torchpace" in _read_toml(path).get("tool", {}):
            return path
    return None


def _table(doc: dict[str, Any], path: Path, *, explicit: bool) -> dict[str, Any] | None:
    tool = doc.get("tool")
    table = tool.get("torchpace") if isinstance(tool, dict) else None
    if table is None:
        if not explicit:
            return None
        if "tool" not in doc and path.name != "pyproject.toml":
            return doc  # a file of torchpace's own: the keys at its top level
        raise UsageError(
            f"--config {_display(path)} has no [tool.torchpace] table; add one, or give a file "
            "with torchpace's keys (only, ignore, fail-on, thresholds, overrides) at its top level"
        )
    if not isinstance(table, dict):
        raise UsageError(f"{_display(path)}: tool.torchpace must be a table, e.g. [tool.torchpace]")
    return table


def load_file(path: Path, *, explicit: bool = False) -> list[Layer]:
    """A configuration file's layers: its top level, then each of its overrides."""
    source = f"--config {_display(path)}" if explicit else _display(path)
    doc = _read_toml(path, "--config " if explicit else "")
    table = _table(doc, path, explicit=explicit)
    if table is None:
        return []
    where = f"{source}: [tool.torchpace]" if table is not doc else f"{source}:"
    base = _layer(table, KEYS, where, source)
    layers = [base]
    overrides = table.get("overrides", [])
    if not isinstance(overrides, list) or not all(isinstance(o, dict) for o in overrides):
        raise UsageError(f"{where} overrides must be tables: [[tool.torchpace.overrides]]")
    for number, item in enumerate(overrides, start=1):
        label = f"{source} overrides #{number}"
        layer = _layer(item, OVERRIDE_KEYS, f"{where} overrides #{number}:", label)
        if not layer.paths:
            raise UsageError(f'{where} overrides #{number} needs paths = ["glob", ...]')
        layers.append(Layer(**{**layer.__dict__, "root": path.parent.resolve()}))
    return layers


def _layer(table: dict[str, Any], allowed: tuple[str, ...], where: str, source: str) -> Layer:
    for key in table:
        if key not in allowed:
            close = _close(key, allowed)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{where} unknown key {key!r}; allowed: {', '.join(allowed)}{hint}")
    only = _rule_list(table, "only", where)
    fail_on = table.get("fail-on")
    if fail_on is not None and (not isinstance(fail_on, str) or fail_on.lower() not in SEVERITIES):
        raise UsageError(f"{where} fail-on = {fail_on!r}; choose one of: {', '.join(SEVERITIES)}")
    return Layer(
        source=source,
        only=tuple(only) if "only" in table else None,
        ignore=tuple(_rule_list(table, "ignore", where)),
        fail_on=fail_on.lower() if isinstance(fail_on, str) else None,
        thresholds=_thresholds(table.get("thresholds", {}), where),
        paths=tuple(_strings(table, "paths", where, example='["traces/cpu/*"]')),
    )


def _strings(table: dict[str, Any], key: str, where: str, *, example: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(
            f"{where} {key} = {value!r}; give a list of strings, e.g. {key} = {example}"
        )
    return value


def _rule_list(table: dict[str, Any], key: str, where: str) -> list[str]:
    from torchpace.doctor.registry import check_rule_ids

    names = _strings(table, key, where, example='["dataloader-stall"]')
    check_rule_ids(names, f"{where} {key}: ")
    return names


def _close(word: str, choices: Sequence[str]) -> list[str]:
    import difflib  # only for a mistyped key or rule id

    return difflib.get_close_matches(word, choices, n=1)


def _thresholds(value: Any, where: str) -> dict[str, dict[str, float]]:
    if not isinstance(value, dict):
        raise UsageError(
            f"{where} thresholds must be a table of rules, e.g. [tool.torchpace.thresholds.gpu-idle]"
        )
    from torchpace.doctor.registry import check_rule_ids, check_thresholds

    out: dict[str, dict[str, float]] = {}
    for spec in check_rule_ids(value, f"{where} thresholds: "):
        given = value[spec.name]
        if not isinstance(given, dict):
            raise UsageError(f"{where} thresholds.{spec.name} must be a table of threshold = value")
        out[spec.name] = check_thresholds(spec, given, f"{where} thresholds: ")
    return out


def matches(layer: Layer, target: str | None) -> bool:
    """Whether an override applies to `target` (a file's top level always applies)."""
    if not layer.paths:
        return True
    if target is None or layer.root is None:
        return False
    path = Path(target).resolve()
    try:
        rel = path.relative_to(layer.root).as_posix()
    except ValueError:
        rel = path.as_posix()
    import fnmatch  # only where a file has overrides

    # A folder's pattern also covers what is inside it: "traces/ddp" matches "traces/ddp/r0.json".
    return any(
        fnmatch.fnmatchcase(rel, p.rstrip("/")) or fnmatch.fnmatchcase(rel, p.rstrip("/") + "/*")
        for p in layer.paths
    )


def layers(config: str | None, cli: Layer, *, target: str | None = None) -> list[Layer]:
    """Every layer that applies, lowest first: pyproject.toml, --config FILE, the command line."""
    found: list[Layer] = []
    pyproject = find_pyproject()
    if pyproject is not None:
        found += load_file(pyproject)
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise UsageError(
                f"--config {config}: no such file; give a TOML file with torchpace's keys"
            )
        found += load_file(path, explicit=True)
    return [layer for layer in [*found, cli] if matches(layer, target)]


def settle(stack: list[Layer]) -> Settings:
    """Fold the layers, lowest first, into the effective settings."""
    files = tuple(dict.fromkeys(layer.source.split(" overrides #")[0] for layer in stack[:-1]))
    if not files:  # the command line alone: its own --only/--ignore, no registry needed
        cli = stack[-1]
        source = "command line" if cli.fail_on else DEFAULT
        return Settings(cli.only or (), {}, cli.fail_on, source, {}, {}, (), cli)
    from torchpace.doctor.registry import all_rules

    names = [spec.name for spec in all_rules()]
    off: dict[str, str] = {}
    thresholds: dict[str, dict[str, float]] = {}
    sources: dict[tuple[str, str], str] = {}
    fail_on, fail_on_source = None, DEFAULT
    for layer in stack:
        if layer.only is not None:  # a fresh selection: what lower layers took out is back
            off = {n: layer.source for n in names if n not in layer.only}
        off.update(dict.fromkeys(layer.ignore, layer.source))
        if layer.fail_on is not None:
            fail_on, fail_on_source = layer.fail_on, layer.source
        for rule_id, values in layer.thresholds.items():
            thresholds.setdefault(rule_id, {}).update(values)
            sources.update({(rule_id, name): layer.source for name in values})
    selected = tuple(n for n in names if n not in off)
    return Settings(selected, off, fail_on, fail_on_source, thresholds, sources, files, None)


def add_option(parser: argparse.ArgumentParser) -> None:
    """Add --config FILE."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="settings file (pyproject.toml with [tool.torchpace], or the same keys at top "
        "level); read after the pyproject.toml found from the current folder upward",
    )


def resolve(
    args: argparse.Namespace,
    only: list[str] | None = None,
    ignore: list[str] | None = None,
    *,
    target: str | None = None,
) -> Settings:
    """The effective settings for a command: its files' and its command line's, and for `analyze`
    the overrides whose paths match `target`."""
    fail_on = getattr(args, "fail_on", None)
    cli = Layer(
        source="command line",
        only=tuple(only) if only is not None else None,
        ignore=tuple(ignore or ()),
        fail_on=fail_on.lower() if isinstance(fail_on, str) else None,
    )
    return settle(layers(getattr(args, "config", None), cli, target=target))
