"""The out-of-memory explanation on real CUDA allocator snapshots recorded by others on their GPUs
(tests/fixtures/snapshots/PROVENANCE.md): one written by an out-of-memory observer in torch 2.0's
format, one from a fine-tuning run in today's."""

from __future__ import annotations

import gzip
import io
import pickle
from pathlib import Path
from typing import Any

import pytest

from torchpace.doctor.rules.out_of_memory import fixes, out_of_memory
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.memory import MemoryRecord, OomRecord
from torchpace.runner.sensors.memory_census import Census
from torchpace.runner.sensors.memory_snapshot import SnapshotSummary, summarize_snapshot

SNAPSHOTS = Path(__file__).parents[1] / "fixtures" / "snapshots"
MIB = 2**20


class _PlainData(pickle.Unpickler):
    """A snapshot is dicts, lists, strings and numbers: any global in it is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} in a snapshot fixture")


def _load(name: str) -> dict[str, Any]:
    raw = gzip.decompress((SNAPSHOTS / f"{name}.pickle.gz").read_bytes())
    snapshot: dict[str, Any] = _PlainData(io.BytesIO(raw)).load()
    return snapshot


def _oom(summary: SnapshotSummary) -> OomRecord:
    """The record the memory sensor makes from a CUDA OOM, with this snapshot: the allocator's
    counters are the snapshot's totals; no census (the script's objects are not in the file)."""
    return OomRecord(
        kind="cuda", message="torch.cuda.OutOfMemoryError", requested_bytes=None, where=None,
        modules=(), held=Census("cuda", ()), batch_size=None, repeated=None,
        allocated_bytes=summary.allocated_bytes, reserved_bytes=summary.reserved_bytes,
        snapshot=summary,
    )  # fmt: skip


def test_torch_2_0_snapshot_is_read_from_block_history() -> None:
    raw = _load("flexgen_opt_oom")
    summary = summarize_snapshot(raw)
    # torch's own counts: each segment's allocated_size, and the trace's `snapshot` entry.
    assert summary.allocated_bytes == sum(s["allocated_size"] for s in raw["segments"])
    assert summary.allocated_bytes == raw["device_traces"][0][-1]["size"] == 11_840_159_744
    assert summary.reserved_bytes == 11_296 * MIB and summary.segments == 176
    first = summary.largest[0]
    assert first.bytes == 411_828_224 and first.addr == 0x7F5FA8000000  # from its history
    assert first.where is not None and (first.where.line, first.where.function) == (190, "allocate")
    assert "flex_opt.py:125 in init_weight_list" in first.frames[1]


def test_oom_snapshot_names_the_weights_and_offers_no_allocator_fix() -> None:
    summary = summarize_snapshot(_load("flexgen_opt_oom"))
    # Three call sites made every live byte: FlexGen's init_weight_list, for three weight kinds.
    assert sum(n for _, n, _ in summary.sites) == summary.allocated_bytes
    assert all("flex_opt.py:125 in init_weight_list" in f[1] for f, _, _ in summary.sites)
    oom = _oom(summary)
    # 4.3 MiB cached of 11,296 MiB: the allocator's rounding; expandable segments cannot help.
    assert fixes(oom) == []
    (finding,) = out_of_memory(Inspection(memory=MemoryRecord(oom=oom)))
    ev = finding.evidence
    assert ev["fragmentation_bytes"] == 4_554_752 and ev["largest_free_block_bytes"] < 2 * MIB
    sites = ev["allocation_sites"]
    assert isinstance(sites, list) and sites[0]["blocks"] == 168  # type: ignore[index]
    assert finding.summary.startswith(
        "The script ran out of GPU memory; 11.0 GiB of tensors were held"
    )
    made = "made at pytorch_backend.py:190 in allocate < flex_opt.py:125 in init_weight_list"
    assert f"63% of the allocator's live bytes were {made}" in finding.summary
    assert "reduce the batch or the model" in finding.fix


def test_training_snapshot_sites_hold_two_copies_of_the_model() -> None:
    raw = _load("decomfl_opt125m_train")
    summary = summarize_snapshot(raw)
    assert summary.allocated_bytes == sum(s["allocated_size"] for s in raw["segments"])
    assert summary.fragmentation_bytes == pytest.approx(842.6 * MIB, rel=1e-3)
    assert summary.largest_free_bytes == 148 * MIB
    (model, state, *_) = summary.sites
    # facebook/opt-125m has 125,239,296 parameters: 478 MiB in float32, block-rounded up.
    weights = 125_239_296 * 4
    assert weights <= model[1] <= 1.01 * weights and weights <= state[1] <= 1.01 * weights
    assert "client.py:176 in reset_model" in model[0][0]
    assert "adam_forward.py:267 in update_K_param_paramwise" in state[0][0]
    # Had it failed here, 842.6 MiB cached in pieces is what expandable segments would reuse.
    (fix,) = fixes(_oom(summary))
    assert fix.name == "expandable-segments" and fix.saving_bytes == summary.fragmentation_bytes
