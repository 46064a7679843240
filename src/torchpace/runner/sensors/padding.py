"""How much of a batch of variable-length sequences is padding, read from the batch itself.

Three kinds of batch say where their padding is: a mapping with an `attention_mask` (Hugging Face
tokenizers and collators: 0 marks padding), a padded tensor next to the lengths of its rows
(`pad_sequence` + lengths for `pack_padded_sequence`, `pad_collate(return_lengths=True)`), and
token ids whose rows end (or start) in runs of one pad id that the longest row lacks. Only CPU
tensors are read (a device tensor would sync); a few reductions per batch, during profiled steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIN_ROWS = 2
MIN_WIDTH = 8  # narrower batches are not worth bucketing
MAX_ROWS_KEPT = 8192  # row lengths kept per loader (enough to plan buckets from)


@dataclass(frozen=True)
class PaddedBatch:
    """One batch's padded width and the real length of each row."""

    width: int
    lengths: tuple[int, ...]
    source: str  # "attention_mask", "lengths", "pad id 0"


def _cpu_2d(x: Any) -> bool:
    import torch

    return (
        isinstance(x, torch.Tensor)
        and x.device.type == "cpu"
        and x.dim() == 2
        and x.shape[0] >= MIN_ROWS
        and x.shape[1] >= MIN_WIDTH
    )


def _is_ids(x: Any) -> bool:
    import torch

    return _cpu_2d(x) and x.dtype in (torch.int64, torch.int32)


def _from_mask(mask: Any) -> PaddedBatch:
    lengths = (mask != 0).sum(dim=1).tolist()
    return PaddedBatch(int(mask.shape[1]), tuple(lengths), "attention_mask")


def _from_lengths(items: list[Any]) -> PaddedBatch | None:
    """A padded [B, T, ...] (or [T, B, ...]) tensor beside a 1-D tensor of B lengths <= T."""
    import torch

    tensors = [x for x in items if isinstance(x, torch.Tensor) and x.device.type == "cpu"]
    for lengths in tensors:
        if lengths.dim() != 1 or lengths.is_floating_point() or len(lengths) < MIN_ROWS:
            continue
        rows, longest = len(lengths), int(lengths.max())
        for padded in tensors:
            if padded.dim() < 2 or int(lengths.min()) < 0:
                continue
            width = _width(padded.shape, rows, longest)
            if width is not None and width >= MIN_WIDTH:
                return PaddedBatch(width, tuple(lengths.tolist()), "lengths")
    return None


def _width(shape: Any, rows: int, longest: int) -> int | None:
    """The padded length of a [rows, T, ...] or [T, rows, ...] tensor holding rows up to `longest`
    (padded to the longest, or rounded up to a multiple: pad_collate's multiple_of)."""
    for batch_dim, time_dim in ((0, 1), (1, 0)):
        if shape[batch_dim] == rows and longest <= shape[time_dim] < 2 * max(longest, 8):
            return int(shape[time_dim])
    return None


# Token ids hold their pad id almost only in the runs at the row ends; one-hot or count rows
# (mostly zeros everywhere) do not, and are not padding.
MAX_PAD_INSIDE = 0.05


def _from_pad_runs(ids: Any, pad_id: int | None) -> PaddedBatch | None:
    """Token ids padded with one id at the row ends (right) or starts (left). Without a known pad
    id: the id that ends (starts) at least half the rows and that the longest row lacks there."""
    for flip in (True, False):  # trailing runs, then leading ones
        view = ids.flip(1) if flip else ids
        first = view[:, 0]
        pad = pad_id if pad_id is not None else int(first.mode().values)
        padded_rows = int((first == pad).sum())
        if pad_id is None and (padded_rows * 2 < len(first) or padded_rows == len(first)):
            continue
        if padded_rows == 0:
            continue
        is_pad = view == pad
        runs = is_pad.int().cumprod(dim=1).sum(dim=1)
        width = int(ids.shape[1])
        real = width * len(first) - int(runs.sum())
        if real <= 0 or int(is_pad.sum()) - int(runs.sum()) > MAX_PAD_INSIDE * real:
            continue
        return PaddedBatch(width, tuple((width - runs).tolist()), f"pad id {pad}")
    return None


def measure(batch: Any, pad_id: int | None = None) -> PaddedBatch | None:
    """The padding of one batch, or None when the batch shows none of the kinds above."""
    if isinstance(batch, Mapping):
        mask = batch.get("attention_mask")
        if mask is not None and _cpu_2d(mask):
            return _from_mask(mask)
        ids = batch.get("input_ids")
        items = [ids, *batch.values()] if ids is not None else list(batch.values())
    elif isinstance(batch, (list, tuple)):
        items = list(batch)
    else:
        items = [batch]
    found = _from_lengths(items)
    if found is not None:
        return found
    ids = next((x for x in items if _is_ids(x)), None)
    return _from_pad_runs(ids, pad_id) if ids is not None else None


# Where a collate_fn keeps its pad id: functools.partial keywords, attributes (HF collators hold
# a tokenizer).
_PAD_NAMES = ("pad_value", "padding_value", "pad_id", "pad_token_id", "pad_idx", "pad_index")


def collate_pad_id(collate_fn: Any) -> int | None:
    """The pad id a collate_fn was given (pad_collate pads with 0 unless told), if it says."""
    func = getattr(collate_fn, "func", None)
    keywords = getattr(collate_fn, "keywords", None)
    values = dict(keywords) if isinstance(keywords, dict) else {}
    for holder in (collate_fn, getattr(collate_fn, "tokenizer", None)):
        for name in _PAD_NAMES:
            value = getattr(holder, name, None)
            if value is not None:
                values.setdefault(name, value)
    for name in _PAD_NAMES:
        if isinstance(values.get(name), int) and not isinstance(values[name], bool):
            return int(values[name])
    return 0 if any(_is_pad_collate(f) for f in (collate_fn, func)) else None


def _is_pad_collate(func: Any) -> bool:
    name = (getattr(func, "__module__", None), getattr(func, "__name__", None))
    return name == ("torchpace.data.collate", "pad_collate")
