"""A user's workload: a Python file whose build() returns model, dataset, loss (and optional collate)."""

from __future__ import annotations

import copy
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import nn

from torchpace.bench.workloads.base import (
    Workload,
    count_samples,
    default_optimizer,
    has_convolutions,
    parameter_count,
)
from torchpace.errors import UsageError

KEYS = ("model", "dataset", "loss", "collate", "batch_size", "lengths", "optimizer", "name")
HOW = "return (model, dataset, loss[, collate]) or a dict with those keys (see docs/bench.md)"


def load(path: str | Path) -> Workload:
    """Import `path`, call its build(), and check what it returns; bad files raise a one-line UsageError."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(
            f"workload {str(path)!r} is neither a built-in (vision, text) nor an existing file; "
            "pass --workload vision, text, or a path to a .py file that defines build()"
        )
    build = _build_function(file)
    try:
        built = build()
    except Exception as exc:  # the user's code: report it in one line, whatever it raised
        raise UsageError(f"{file}: build() raised {type(exc).__name__}: {exc}") from exc
    return _to_workload(file, _as_mapping(file, built))


def _build_function(file: Path) -> Callable[[], Any]:
    spec = importlib.util.spec_from_file_location(f"torchpace_user_workload_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise UsageError(
            f"{file}: cannot be imported as Python; give a .py file that defines build()"
        )
    module = importlib.util.module_from_spec(spec)
    # Registered so that worker processes can unpickle the file's dataset and collate classes.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"{file}: importing it raised {type(exc).__name__}: {exc}") from exc
    build = getattr(module, "build", None)
    if not callable(build):
        raise UsageError(f"{file}: defines no build() function; add def build() that should {HOW}")
    return build  # type: ignore[no-any-return]


def _as_mapping(file: Path, built: Any) -> Mapping[str, Any]:
    if isinstance(built, Mapping):
        unknown = sorted(set(built) - set(KEYS))
        if unknown:
            raise UsageError(
                f"{file}: build() returned unknown keys {unknown}; known keys: {list(KEYS)}"
            )
        missing = [k for k in ("model", "dataset", "loss") if k not in built]
        if missing:
            raise UsageError(f"{file}: build() returned a dict without {missing}; {HOW}")
        return built
    if isinstance(built, tuple) and len(built) in (3, 4):
        return dict(zip(("model", "dataset", "loss", "collate"), built, strict=False))
    raise UsageError(f"{file}: build() returned {_describe(built)}; {HOW}")


def _describe(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} items"
    return f"a {type(value).__name__}"


def _to_workload(file: Path, built: Mapping[str, Any]) -> Workload:
    model, dataset, loss = built["model"], built["dataset"], built["loss"]
    if not isinstance(model, nn.Module):
        raise UsageError(
            f"{file}: build()'s model is {_describe(model)}; expected a torch.nn.Module"
        )
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
        raise UsageError(
            f"{file}: build()'s dataset is {_describe(dataset)}; expected a map-style Dataset "
            "with __len__ and __getitem__"
        )
    for key in ("loss", "collate", "optimizer"):
        if built.get(key) is not None and not callable(built[key]):
            raise UsageError(
                f"{file}: build()'s {key} is {_describe(built[key])}; expected a callable"
            )
    batch_size = built.get("batch_size", 32)
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise UsageError(f"{file}: build()'s batch_size is {batch_size!r}; expected an int >= 1")
    if len(dataset) < batch_size:
        raise UsageError(
            f"{file}: the dataset has {len(dataset)} samples, fewer than one batch of {batch_size}; "
            "return a larger dataset or a smaller batch_size"
        )
    lengths = _lengths(file, built.get("lengths"), len(dataset))
    # The harness builds a fresh model per configuration: copies of this one share its initial weights.
    template = copy.deepcopy(model)
    return Workload(
        name=str(built.get("name") or file.stem),
        build_model=lambda: copy.deepcopy(template),
        dataset=dataset,
        loss=loss,
        batch_size=batch_size,
        collate=built.get("collate"),
        count_units=count_samples,
        lengths=lengths,
        make_optimizer=built.get("optimizer") or default_optimizer,
        has_convolutions=has_convolutions(model),
        description=f"user workload from {file}",
        facts={"file": str(file), "parameters": parameter_count(model), "batch_size": batch_size},
    )


def _lengths(file: Path, lengths: Any, n: int) -> Sequence[int] | None:
    if lengths is None:
        return None
    if not isinstance(lengths, Sequence) or len(lengths) != n:
        raise UsageError(
            f"{file}: build()'s lengths must be a sequence with one int per sample ({n}); "
            f"got {_describe(lengths)}"
        )
    return [int(x) for x in lengths]
