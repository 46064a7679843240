"""Built-in workloads and user workload files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from torchpace.bench.techniques.checkpointing import repeated_blocks
from torchpace.bench.workloads import get_workload
from torchpace.bench.workloads.text import IGNORE_INDEX, count_tokens, lm_collate
from torchpace.bench.workloads.user import load
from torchpace.errors import UsageError

EXAMPLE = Path(__file__).parents[2] / "examples" / "bench_workload.py"


def test_vision_items_are_augmented_normalised_and_deterministic_per_index() -> None:
    workload = get_workload("vision", "tiny")
    image, label = workload.dataset[3]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert torch.equal(image, workload.dataset[3][0])  # seeded by index: same in any worker
    assert not torch.equal(image, workload.dataset[4][0])
    assert abs(float(image.mean())) < 1.0 and 0 <= label < 10
    assert workload.has_convolutions and repeated_blocks(workload.build_model())


def test_text_lengths_vary_and_padding_is_ignored() -> None:
    workload = get_workload("text", "tiny")
    assert workload.variable_length and len(set(workload.lengths or [])) > 3
    inputs, targets = lm_collate([workload.dataset[i] for i in range(4)])
    lengths = [workload.lengths[i] for i in range(4)]  # type: ignore[index]
    padded = -(-max(lengths) // 8) * 8  # pad_collate rounds up to a multiple of 8
    assert inputs.shape == targets.shape == (4, padded)
    assert count_tokens((inputs, targets)) == sum(lengths)
    assert int((targets == IGNORE_INDEX).sum()) == 4 * padded - sum(lengths)
    assert torch.equal(
        inputs[0, 1 : lengths[0]], targets[0, : lengths[0] - 1]
    )  # next-token targets
    assert not workload.has_convolutions


def test_unknown_size_is_a_usage_error() -> None:
    with pytest.raises(
        UsageError, match=r"unknown workload size 'huge'; choose one of tiny, small, full"
    ):
        get_workload("vision", "huge")


def test_example_user_workload_loads() -> None:
    workload = load(EXAMPLE)
    assert workload.name == "tabular-mlp" and workload.batch_size == 128
    a, b = workload.build_model(), workload.build_model()
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert a is not b and repeated_blocks(a)


BAD = {
    "no_build.py": ("x = 1\n", r"no_build.py: defines no build\(\) function; add def build\(\)"),
    "raises.py": (
        "def build():\n    raise ValueError('no data')\n",
        r"build\(\) raised ValueError: no data",
    ),
    "syntax.py": ("def build(:\n", r"syntax.py: importing it raised SyntaxError"),
    "wrong.py": (
        "def build():\n    return 3\n",
        r"build\(\) returned a int; return \(model, dataset, loss",
    ),
    "pair.py": ("def build():\n    return (1, 2)\n", r"build\(\) returned a tuple of 2 items"),
    "model.py": (
        "def build():\n    return ('m', [1, 2], len)\n",
        r"build\(\)'s model is a str; expected a torch.nn.Module",
    ),
    "keys.py": (
        "import torch\ndef build():\n    return {'model': torch.nn.Linear(1, 1), 'dataset': [1], 'loss': len, 'lr': 1}\n",
        r"build\(\) returned unknown keys \['lr'\]",
    ),
    "small.py": (
        "import torch\ndef build():\n    return {'model': torch.nn.Linear(1, 1), 'dataset': [1], 'loss': len}\n",
        r"the dataset has 1 samples, fewer than one batch of 32",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_user_files_give_one_line_errors(name: str, tmp_path: Path) -> None:
    source, message = BAD[name]
    path = tmp_path / name
    path.write_text(source)
    with pytest.raises(UsageError, match=message) as info:
        load(path)
    assert "\n" not in str(info.value)


def test_missing_workload_names_the_builtins() -> None:
    with pytest.raises(
        UsageError,
        match=r"workload 'visoin' is neither a built-in \(vision, text\) nor an existing file",
    ):
        get_workload("visoin")


VARIABLE = """
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset


class Seqs(Dataset):
    def __init__(self):
        self.lengths = [3 + (i * 7) % 13 for i in range(48)]

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        return torch.ones(self.lengths[i], 4) * i, i % 2


def collate(items):
    longest = max(len(x) for x, _ in items)
    xs = torch.zeros(len(items), longest, 4)
    for row, (x, _) in enumerate(items):
        xs[row, : len(x)] = x
    return xs, torch.tensor([y for _, y in items])


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.proj(x).mean(1)


def build():
    data = Seqs()
    return {"model": Model(), "dataset": data, "loss": F.cross_entropy, "collate": collate,
            "batch_size": 8, "lengths": data.lengths}
"""


def test_user_workload_with_lengths_gets_bucketing(tmp_path: Path) -> None:
    from torchpace.bench.harness import run_bench
    from torchpace.bench.techniques import get_technique

    from .conftest import CPU, tiny_settings

    path = tmp_path / "variable.py"
    path.write_text(VARIABLE)
    workload = load(path)
    assert workload.variable_length and not workload.has_convolutions
    chosen = [
        get_technique(n) for n in ("bucketing", "token-budget", "checkpointing", "channels-last")
    ]
    result = run_bench(workload, CPU, tiny_settings(ceiling=False), chosen)
    assert [c.name for c in result.configs] == [
        "baseline",
        "bucketing",
        "token-budget",
        "+ bucketing",
    ]
    skipped = {s.name: s.reason for s in result.skipped}
    assert (
        skipped["checkpointing"]
        == "the model has no repeated blocks (a ModuleList/Sequential of one type)"
    )
    assert skipped["channels-last"] == "the variable workload has no convolutions"


def test_lengths_must_match_the_dataset(tmp_path: Path) -> None:
    path = tmp_path / "short.py"
    path.write_text(VARIABLE.replace('"lengths": data.lengths', '"lengths": [1, 2]'))
    with pytest.raises(
        UsageError, match=r"lengths must be a sequence with one int per sample \(48\); got a list"
    ):
        load(path)
