"""Walk nested batches: tensors inside dicts, lists, tuples, namedtuples and dataclasses."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Return `obj` with every tensor replaced by `fn(tensor)`; other leaves pass through."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        items = {key: map_tensors(value, fn) for key, value in obj.items()}
        try:
            return type(obj)(items)  # type: ignore[call-arg]
        except TypeError:  # a mapping type that cannot be built from a dict (defaultdict, ...)
            return items
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(map_tensors(value, fn) for value in obj))
    if isinstance(obj, (list, tuple)):
        values = [map_tensors(value, fn) for value in obj]
        try:
            return type(obj)(values)
        except TypeError:
            return values if isinstance(obj, list) else tuple(values)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # Copy, then set fields: works for frozen dataclasses and init=False fields alike.
        out = copy.copy(obj)
        for field in dataclasses.fields(obj):
            object.__setattr__(out, field.name, map_tensors(getattr(obj, field.name), fn))
        return out
    return obj


def iter_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Yield every tensor inside `obj`, in the order map_tensors visits them."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, Mapping):
        for value in obj.values():
            yield from iter_tensors(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from iter_tensors(value)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from iter_tensors(getattr(obj, field.name))
