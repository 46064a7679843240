"""The out-of-memory explanation: a real host OOM under a bounded RLIMIT_AS (in a subprocess, so
the machine's memory is never at stake), the CUDA allocator's snapshot format (a synthetic
snapshot, built to torch's documented format), a DataLoader worker's OOM seen from the training
process, and a real CUDA OOM on a GPU machine. Recorded snapshots: test_recorded_snapshots.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from torchpace.doctor.oom import NO_TRACE
from torchpace.doctor.rules.out_of_memory import fixes, out_of_memory, shortfall
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.memory import (
    Growth,
    MemoryRecord,
    OomRecord,
    oom_kind,
    requested_bytes,
    worker_oom,
)
from torchpace.runner.sensors.memory_census import Census, HeldBlock
from torchpace.runner.sensors.memory_snapshot import summarize_snapshot

SCRIPTS = Path(__file__).parent / "scripts"
MIB = 2**20


def _doctor(tmp_path: Path, script: str) -> tuple[int, dict[str, Any]]:
    """`torchpace doctor --format json` on a script, as a user runs it; (exit code, report)."""
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "torchpace", "doctor", "--warmup", "2", "--steps", "3"]
    cmd += ["--out", str(tmp_path / "out"), "-o", str(report), str(SCRIPTS / script)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert report.exists(), done.stderr[-2000:]
    return done.returncode, json.loads(report.read_text())


def _finding(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((f for f in report["findings"] if f["rule"] == "out-of-memory"), None)


def test_host_oom_under_rlimit_is_explained(tmp_path: Path) -> None:
    code, report = _doctor(tmp_path, "oom_host.py")
    assert code == 1  # the script's own status: it died
    finding = _finding(report)
    assert finding is not None and finding["severity"] == "high"
    ev = finding["evidence"]
    assert ev["device"] == "host" and ev["requested_bytes"] == 16384 * 2048 * 4
    held = ev["held_bytes"]
    # Two 2048-wide layers of a 16,384 batch were made when the third tensor failed.
    assert held["activations_bytes"] >= 2 * 16384 * 2048 * 4
    assert held["parameters_bytes"] == 4 * (512 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10)
    assert ev["batch_size"] == 16384 and ev["running_modules"][0] == "model (Sequential)"
    names = [f["fix"] for f in ev["fixes"]]
    assert any("gradient accumulation" in n for n in names)
    assert any("checkpoint" in n for n in names) and any("bf16" in n for n in names)
    assert all(f["saving_bytes"] >= ev["shortfall_bytes"] for f in ev["fixes"][:1])
    assert finding["locations"][0]["line"] == 16
    assert report["header"]["trace_files"] == [NO_TRACE]  # died before a profiled step ended


def test_fixed_twin_fits_and_shows_its_memory(tmp_path: Path) -> None:
    code, report = _doctor(tmp_path, "oom_host_fixed.py")
    assert code == 0 and _finding(report) is None
    memory = report["memory"]
    assert memory["from_live_run"] and memory["categories_bytes"]["parameters"] > 0
    assert any("RLIMIT_AS" in n for n in report["notes"])


def test_oom_kinds_and_requests_read_from_the_errors() -> None:
    cuda = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"
    assert oom_kind(RuntimeError(cuda)) == "cuda" and requested_bytes(cuda) == 2 * 2**30
    host = "DefaultCPUAllocator: can't allocate memory: you tried to allocate 134217728 bytes."
    assert oom_kind(RuntimeError(host)) == "host" and requested_bytes(host) == 134217728
    assert oom_kind(MemoryError()) == "host"
    assert oom_kind(RuntimeError("shape mismatch")) is None and requested_bytes("boom") is None


def _synthetic_snapshot() -> dict[str, Any]:
    """SYNTHETIC: a snapshot dict built by hand to torch.cuda.memory._snapshot()'s documented
    format (segments of blocks with state and frames); not recorded on a GPU."""
    frames = [
        {
            "filename": "/usr/lib/python3/site-packages/torch/nn/functional.py",
            "line": 9,
            "name": "f",
        },
        {"filename": "/home/me/train.py", "line": 42, "name": "forward"},
    ]
    return {
        "segments": [
            {
                "address": 0x1000, "total_size": 96 * MIB, "stream": 0, "segment_type": "large",
                "allocated_size": 64 * MIB, "active_size": 64 * MIB,
                "blocks": [
                    {"address": 0x1000, "size": 64 * MIB, "requested_size": 64 * MIB,
                     "state": "active_allocated", "frames": frames},
                    {"address": 0x5000, "size": 32 * MIB, "requested_size": 0,
                     "state": "inactive", "frames": []},
                ],
            },
            {
                "address": 0x9000, "total_size": 40 * MIB, "stream": 0, "segment_type": "large",
                "allocated_size": 20 * MIB, "active_size": 20 * MIB,
                "blocks": [
                    {"address": 0x9000, "size": 20 * MIB, "requested_size": 20 * MIB,
                     "state": "active_allocated", "frames": []},
                    {"address": 0xB000, "size": 20 * MIB, "requested_size": 0,
                     "state": "inactive", "frames": []},
                ],
            },
        ],
        "device_traces": [],
    }  # fmt: skip


def test_synthetic_snapshot_summary() -> None:
    summary = summarize_snapshot(_synthetic_snapshot())
    assert summary.reserved_bytes == 136 * MIB and summary.allocated_bytes == 84 * MIB
    assert summary.fragmentation_bytes == 52 * MIB and summary.largest_free_bytes == 32 * MIB
    first = summary.largest[0]
    assert first.bytes == 64 * MIB and first.where is not None
    assert (first.where.file, first.where.line) == ("/home/me/train.py", 42)
    assert summary.largest[1].where is None  # recorded without a stack


def test_a_dict_that_is_not_a_snapshot_is_refused() -> None:
    with pytest.raises(ValueError, match="not a CUDA memory snapshot: no 'segments' list"):
        summarize_snapshot({"blocks": []})


def test_cuda_oom_from_a_synthetic_snapshot_offers_expandable_segments() -> None:
    act = HeldBlock(1, 60 * MIB, "activations", "saved by MmBackward0", "float32", (4, 4))
    param = HeldBlock(2, 20 * MIB, "parameters", "w", "float32", (4, 4))
    oom = OomRecord(
        kind="cuda", message="CUDA out of memory. Tried to allocate 64.00 MiB.",
        requested_bytes=64 * MIB, where=None, modules=("model (Net)",),
        held=Census("cuda", (act, param)), batch_size=32, repeated=("blocks (Block)", 4),
        allocated_bytes=84 * MIB, reserved_bytes=136 * MIB, capacity_bytes=150 * MIB,
        snapshot=summarize_snapshot(_synthetic_snapshot()),
    )  # fmt: skip
    # Free: 150 - 136 = 14 MiB from the driver, and a 32 MiB cached block: 18 MiB short.
    assert shortfall(oom) == 18 * MIB
    found = {f.name: f for f in fixes(oom)}
    assert found["expandable-segments"].saving_bytes == 52 * MIB
    assert found["checkpoint"].saving_bytes == (60 + 64) * MIB * 3 // 4
    assert found["bf16"].saving_bytes == 30 * MIB
    (finding,) = out_of_memory(Inspection(memory=MemoryRecord(oom=oom)))
    assert finding.evidence["fragmentation_bytes"] == 52 * MIB
    assert finding.evidence["largest_live"][0]["where"] == "/home/me/train.py:42 in forward"  # type: ignore[index]


def test_no_oom_no_finding() -> None:
    assert out_of_memory(Inspection(memory=MemoryRecord())) == []


@pytest.mark.cuda
def test_real_cuda_oom_with_its_snapshot(tmp_path: Path) -> None:
    """On a GPU: the allocator's recorded snapshot names where the largest blocks were made."""
    code, report = _doctor(tmp_path, "oom_cuda.py")
    assert code == 1
    finding = _finding(report)
    assert finding is not None
    ev = finding["evidence"]
    assert ev["device"] == "GPU" and ev["requested_bytes"] > 0
    assert ev["held_bytes"]["activations_bytes"] > 0 and "largest_free_block_bytes" in ev
    assert ev["fragmentation_bytes"] >= 0
    assert any("oom_cuda.py" in str(b.get("where")) for b in ev["largest_live"])
    assert any("checkpoint" in f["fix"] for f in ev["fixes"])


def test_tensors_kept_across_steps_are_a_fix_when_it_runs_out() -> None:
    held = Census("cpu", (HeldBlock(1, 8 * MIB, "other", "tensor", "float32", (1024, 2048)),))
    oom = OomRecord(
        kind="host", message="MemoryError", requested_bytes=None, where=None, modules=(),
        held=held, batch_size=None, repeated=None,
    )  # fmt: skip
    grew = Growth(6 * MIB, 3, ("output of AddmmBackward0 [2048, 256] float32, 2.0 MiB",))
    (fix,) = fixes(oom, MemoryRecord(growth=grew))
    assert fix.name == "kept-tensors" and fix.saving_bytes == 6 * MIB
    assert "[2048, 256]" in fix.what and "3 profiled steps" in fix.method


def test_worker_oom_names_the_worker_not_the_training_process(tmp_path: Path) -> None:
    """The worker's own RLIMIT_AS: its error reaches the training process re-raised."""
    code, report = _doctor(tmp_path, "oom_worker.py")
    assert code == 1
    finding = _finding(report)
    assert finding is not None and finding["severity"] == "high"
    ev = finding["evidence"]
    assert ev["process"] == "DataLoader worker process 0" and ev["killed"] is False
    assert ev["requested_bytes"] == 64 * 1024 * 1024 * 4 and ev["num_workers"] == 1
    assert "held_bytes" not in ev  # the training process's tensors are not what ran out
    assert finding["summary"].startswith("A DataLoader worker died: DataLoader worker process 0")
    assert finding["locations"][0]["line"] == 19 and "memory-mapped" in finding["fix"]


def test_a_worker_killed_outright_is_named_with_its_pid(tmp_path: Path) -> None:
    """A sample kills its worker with SIGKILL, as the kernel's out-of-memory killer does."""
    code, report = _doctor(tmp_path, "worker_killed.py")
    assert code == 1
    finding = _finding(report)
    assert finding is not None
    ev = finding["evidence"]
    assert ev["killed"] is True and ev["process"].startswith("DataLoader worker (pid ")
    assert "killed by SIGKILL" in finding["summary"]
    assert "out-of-memory killer" in finding["summary"]
    assert ev["num_workers"] == 2 and "num_workers=1, prefetch_factor=2" in finding["fix"]
    assert worker_oom(RuntimeError("DataLoader worker exited: bad file")) is None


class _Images(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.randn(3, 16, 16)


def test_a_worker_killed_while_the_doctor_held_torchs_check_is_still_named() -> None:
    """A worker killed while the doctor writes its trace (torch's SIGCHLD check held off): torch
    later says only "exited unexpectedly" (its batch's file descriptors refused). Seen once in
    `make test` on worker_killed.py, when the worker died as the window's trace was written."""
    import os
    import signal
    import time

    from torch.utils.data._utils import signal_handling

    from torchpace.runner.watchdog import loader_sigchld_held

    # torch installs its SIGCHLD handler once per process: an earlier test in this worker whose
    # doctor run failed may have dropped it (drop_loader_sigchld), and then no hold happens here.
    before, was_set = signal.getsignal(signal.SIGCHLD), signal_handling._SIGCHLD_handler_set
    signal_handling._SIGCHLD_handler_set = False
    try:
        it = iter(torch.utils.data.DataLoader(_Images(), batch_size=8, num_workers=2))
        next(it)
        pid = it._workers[0].pid  # type: ignore[attr-defined]
        with loader_sigchld_held():
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 60  # dead (not yet reaped) however busy the machine
            while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                assert time.monotonic() < deadline, "the killed worker never ended"
                time.sleep(0.01)
        with pytest.raises(RuntimeError, match="exited unexpectedly") as e:
            for _ in range(50):
                next(it)
    finally:
        signal.signal(signal.SIGCHLD, before)
        signal_handling._SIGCHLD_handler_set = was_set
    record = worker_oom(e.value)
    assert record is not None and record.killed
    assert record.process == f"DataLoader worker (pid {pid})"


def test_the_census_passes_over_torch_compiles_fake_tensors_without_a_word() -> None:
    """nanoGPT with compile=True: the census asked a FakeTensor dynamo kept alive for its data
    pointer, and torch warned on the user's stderr ("... of FakeTensor is deprecated")."""
    import warnings

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from torchpace.runner.sensors.memory_census import take_census

    with FakeTensorMode():
        fake = torch.empty(1024)
    real = torch.ones(4096)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        census = take_census("cpu")
    assert not [w for w in seen if "FakeTensor" in str(w.message)], [str(w.message) for w in seen]
    names = {b.addr for b in census.blocks}
    assert real.untyped_storage().data_ptr() in names and fake.shape == (1024,)
