"""pad_collate: batch variable-length sequences, padded to a multiple of 8 for tensor cores."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

import torch
from torch.utils.data import default_collate

PadValue = float | int | bool


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    is_seq = isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    if is_seq and value and all(isinstance(v, (int, float, bool)) for v in value):
        return torch.as_tensor(value)
    return None


def _pad(
    seqs: list[torch.Tensor], pad_value: PadValue, multiple_of: int, side: str
) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
    longest = int(lengths.max()) if len(seqs) else 0
    target = -(-longest // multiple_of) * multiple_of
    first = seqs[0]
    out = first.new_full((len(seqs), target, *first.shape[1:]), pad_value)
    for row, seq in enumerate(seqs):
        if side == "right":
            out[row, : len(seq)] = seq
        else:
            out[row, target - len(seq) :] = seq
    return out, lengths


class _Collator:
    """One pad_collate call's settings, applied field by field."""

    def __init__(
        self,
        pad_value: PadValue | Mapping[Any, PadValue],
        multiple_of: int,
        side: str,
        fields: Collection[Any] | None,
    ) -> None:
        self.pad_value, self.multiple_of = pad_value, multiple_of
        self.side, self.fields = side, fields
        self.lengths: dict[Any, torch.Tensor] = {}

    def _value_for(self, key: Any) -> PadValue:
        if isinstance(self.pad_value, Mapping):
            return self.pad_value.get(key, 0)
        return self.pad_value

    def field(self, key: Any, values: list[Any]) -> Any:
        """Collate one field: pad sequences, default_collate anything else."""
        tensors = [_as_tensor(v) for v in values]
        wanted = self.fields is None or key in self.fields
        if wanted and all(t is not None and t.dim() >= 1 for t in tensors):
            padded, lengths = _pad(tensors, self._value_for(key), self.multiple_of, self.side)  # type: ignore[arg-type]
            self.lengths[key] = lengths
            return padded
        if all(t is not None for t in tensors) and len({t.shape for t in tensors}) == 1:  # type: ignore[union-attr]
            return torch.stack(tensors)  # type: ignore[arg-type]
        return default_collate(values)

    def batch(self, batch: Sequence[Any]) -> Any:
        """Collate a list of samples of the same structure."""
        first = batch[0]
        if isinstance(first, Mapping):
            return {key: self.field(key, [sample[key] for sample in batch]) for key in first}
        if isinstance(first, tuple):
            columns = [self.field(i, [sample[i] for sample in batch]) for i in range(len(first))]
            return type(first)(*columns) if hasattr(first, "_fields") else tuple(columns)
        return self.field(None, list(batch))


def _check_no_none(batch: Sequence[Any]) -> None:
    """TypeError naming the sample that is None (a dataset's __getitem__ that returned nothing)."""
    missing = [i for i, sample in enumerate(batch) if sample is None]
    if missing:
        which = f"sample {missing[0]}" + (
            f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        )
        raise TypeError(
            f"pad_collate: {which} of this batch of {len(batch)} is None: the dataset returned no "
            "sample for it (a __getitem__ path without `return`?); return the sample, or drop "
            "such items first: collate_fn=lambda batch: pad_collate([s for s in batch if s is "
            "not None]). fast_loader(dataset, collate_fn=pad_collate) names the dataset index"
        )


def pad_collate(
    batch: Sequence[Any],
    *,
    pad_value: PadValue | Mapping[Any, PadValue] = 0,
    multiple_of: int = 8,
    padding_side: Literal["right", "left"] = "right",
    fields: Collection[Any] | None = None,
    return_lengths: bool = False,
) -> Any:
    """Collate samples, padding variable-length sequences along their first dimension.

    Samples may be sequences (tensors or lists of numbers), tuples or dicts of them; every field
    whose values are all >= 1-D is padded to the longest in the batch rounded up to `multiple_of`
    (8 keeps fp16/bf16 matmuls on tensor cores), other fields use default_collate. Use it through
    `functools.partial(pad_collate, pad_value=..., ...)` as a DataLoader `collate_fn`.

    Args:
        pad_value: fill value, or a mapping from dict key / tuple position to fill value.
        fields: only these dict keys / tuple positions are padded (None: every sequence field).
        return_lengths: return `(batch, lengths)`; lengths is a tensor for bare sequences, else a
            dict from key / position to a tensor of the original lengths.
    """
    if multiple_of < 1:
        raise ValueError(f"multiple_of must be >= 1, got {multiple_of}")
    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
    if not batch:
        raise ValueError("pad_collate got an empty batch; a DataLoader never builds one")
    _check_no_none(batch)
    collator = _Collator(pad_value, multiple_of, padding_side, fields)
    out = collator.batch(batch)
    if not return_lengths:
        return out
    lengths: Any = collator.lengths
    if list(lengths) == [None]:
        lengths = lengths[None]
    return out, lengths
