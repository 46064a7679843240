"""A real 2-rank run under torchrun with gloo: sharded dataset and both samplers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("data_ddp_check.py")


@pytest.mark.distributed
@pytest.mark.timeout(180)
def test_two_ranks_get_equal_batches_and_every_row_once(tmp_path):
    out = tmp_path / "verdict.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(SCRIPT),
        str(out),
    ]
    # Own session: on a timeout the whole group (torchrun and both ranks) is killed, not orphaned.
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, stderr[-3000:]
    verdict = json.loads(out.read_text())
    for epoch in (0, 1):
        sharded = verdict[f"sharded{epoch}"]
        assert sharded["counts"][0] == sharded["counts"][1]
        # even="pad" over 2 ranks x 2 workers: 101 rows padded to 104
        assert sharded["distinct"] == 101 and sharded["repeats"] == 3
        for kind in ("bucket", "budget"):
            plan = verdict[f"{kind}{epoch}"]
            assert plan["counts"][0] == plan["counts"][1] > 0
            assert plan["distinct"] == 500 and plan["repeats"] == 0
