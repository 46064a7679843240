"""Launch helpers for the torchrun tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
SRC = Path(__file__).resolve().parents[2] / "src"


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture
def torchrun(tmp_path: Path):
    """Run a script under `torchrun --standalone --nproc-per-node N`; fail on leftover processes."""
    token = f"torchpace-test-{uuid.uuid4().hex}"

    def run(script: str, nproc: int = 2, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
        env["OMP_NUM_THREADS"] = "1"  # 2 ranks on a shared 2-core machine
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(name, None)
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", str(SCRIPTS / script), str(tmp_path), token,
        ]  # fmt: skip
        # A session of its own, so a hung run can be killed with all its workers, not only the agent.
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"torchrun did not finish in {timeout}s:\n{err[-3000:]}")
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    yield run
    assert _processes_with(token) == [], "torchrun left processes behind"
