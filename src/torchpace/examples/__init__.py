"""Bundled demos: training scripts for `torchpace doctor` and a recorded trace for `torchpace analyze`.

They ship in the wheel, so a pip install can try torchpace from any folder:

    torchpace doctor -m torchpace.examples.naive_train --epochs 1   # a script with 6 CPU smells
    torchpace doctor -m torchpace.examples.tuned_train --epochs 1   # the same with every fix
    torchpace analyze "$(python -m torchpace.examples slow_loader.pt.trace.json.gz)"
    python -m torchpace.examples                                    # lists them with their paths

`slow_loader.pt.trace.json.gz` is a real torch.profiler trace (torch 2.13.0+cpu, recorded by
tests/fixtures/traces/record_cpu_loop.py `sleepy`): an MLP whose Dataset sleeps 1 ms per sample with
num_workers=0, so the DataLoader takes most of each step (dataloader-stall).
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE_TRACE = HERE / "slow_loader.pt.trace.json.gz"


def files() -> list[Path]:
    """The bundled scripts and traces, by name."""
    return sorted(
        p for p in HERE.iterdir() if p.suffix == ".py" and not p.name.startswith("_")
    ) + sorted(HERE.glob("*.json.gz"))


def path(name: str) -> Path:
    """The path of a bundled file; ValueError naming the bundled files otherwise."""
    for candidate in files():
        if candidate.name == name:
            return candidate
    names = ", ".join(p.name for p in files())
    raise ValueError(f"no bundled example {name!r}; the examples are: {names}")
