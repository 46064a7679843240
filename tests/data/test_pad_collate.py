"""pad_collate: padding to a multiple of 8, nested samples, lengths."""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpace.data import pad_collate


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 70), min_size=1, max_size=12),
    multiple_of=st.sampled_from([1, 8, 64]),
)
def test_padding_bound_and_content(sizes, multiple_of):
    seqs = [torch.arange(1, n + 1) for n in sizes]
    out, lengths = pad_collate(seqs, multiple_of=multiple_of, return_lengths=True)
    width = out.shape[1]
    assert width % multiple_of == 0 and max(sizes) <= width < max(sizes) + multiple_of
    assert lengths.tolist() == sizes
    for row, n in zip(out, sizes, strict=True):
        assert row[:n].tolist() == list(range(1, n + 1)) and not row[n:].any()


def test_dict_samples_with_per_key_pad_values_and_labels():
    batch = [
        {"input_ids": [5, 6, 7], "labels": [1, 2, 3], "target": 0},
        {"input_ids": [8], "labels": [4], "target": 1},
    ]
    out, lengths = pad_collate(batch, pad_value={"labels": -100}, return_lengths=True)
    assert out["input_ids"].tolist() == [[5, 6, 7, 0, 0, 0, 0, 0], [8, 0, 0, 0, 0, 0, 0, 0]]
    assert out["labels"][1].tolist()[:2] == [4, -100]
    assert out["target"].tolist() == [0, 1]
    assert lengths["input_ids"].tolist() == [3, 1]


def test_tuple_and_namedtuple_samples_keep_structure():
    Sample = namedtuple("Sample", ["tokens", "label"])
    batch = [Sample(torch.ones(3, 2), 1), Sample(torch.ones(5, 2), 0)]
    out = pad_collate(batch, multiple_of=4)
    assert (
        isinstance(out, Sample) and out.tokens.shape == (2, 8, 2) and out.label.tolist() == [1, 0]
    )
    plain = pad_collate([(torch.ones(2), 3.0), (torch.ones(1), 4.0)], multiple_of=1)
    assert isinstance(plain, tuple) and plain[0].tolist() == [[1, 1], [1, 0]]


def test_left_padding_and_selected_fields():
    out = pad_collate([[1, 2], [3]], padding_side="left", multiple_of=1, pad_value=9)
    assert out.tolist() == [[1, 2], [9, 3]]
    batch = [{"a": [1, 2], "b": [1, 2]}, {"a": [3, 4], "b": [5, 6]}]
    out = pad_collate(batch, fields={"a"}, multiple_of=8)
    assert out["a"].shape == (2, 8) and out["b"].shape == (2, 2)


def test_bad_arguments():
    with pytest.raises(ValueError, match="multiple_of must be >= 1, got 0"):
        pad_collate([[1]], multiple_of=0)
    with pytest.raises(ValueError, match="padding_side must be 'right' or 'left', got 'top'"):
        pad_collate([[1]], padding_side="top")
    with pytest.raises(ValueError, match="pad_collate got an empty batch"):
        pad_collate([])


def test_a_none_sample_is_named_with_the_fix():
    with pytest.raises(TypeError) as raised:
        pad_collate([torch.arange(3), None, torch.arange(2), None])
    assert str(raised.value).startswith(
        "pad_collate: sample 1 (and 1 more) of this batch of 4 is None: the dataset returned no "
        "sample for it"
    )
    assert "collate_fn=lambda batch: pad_collate([s for s in batch if s is not None])" in str(
        raised.value
    )
