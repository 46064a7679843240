"""The framework matrix: real framework scripts run under `torchpace doctor` as under python.

Each script (tests/frameworks/scripts/) runs to its end under `doctor --full`, so every patch the
doctor installs is in place through the framework's whole life (Lightning's fit, validate, test
and predict; its ddp_spawn; Fabric; Hugging Face Trainer's train, evaluate and predict; accelerate; ignite;
TorchScript classes; torch.compile; a `-m` module). It must exit 0 with every line the script
prints, stderr must hold no torchpace frame, and the report's source lines must be the script's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
_DOCTOR_FRAME = re.compile(r'File "[^"]*/src/torchpace/|File "[^"]*site-packages/torchpace/')

CASES = [
    ("lightning_stages.py", (), ["STAGE fit done", "STAGE predict done 256"]),
    ("lightning_stages.py", ("--profiler",), ["STAGE fit done", "STAGE predict done 256"]),
    ("lightning_spawn.py", (), ["STAGE spawn done ['train_loss']"]),
    ("fabric_loop.py", (), ["STAGE fabric done"]),
    ("hf_trainer.py", (), ["STAGE train done", "STAGE predict done 256 True"]),
    ("accelerate_loop.py", (), ["STAGE accelerate done"]),
    ("ignite_trainer.py", (), ["STAGE ignite done ['accuracy', 'loss']"]),
    ("torchscript_class.py", (), ["STAGE torchscript done"]),
    ("compiled_loop.py", (), ["STAGE compile done"]),
    ("-m trainpkg.train", (), ["STAGE module done"]),
]


def _doctor(
    tmp: Path, target: str, args: tuple[str, ...]
) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    report = tmp / "report.json"
    cmd = [sys.executable, "-m", "torchpace", "doctor", "--full", "--out", str(tmp / "out")]
    cmd += ["--format", "json", "-o", str(report), *target.split(), *args, "--root", str(tmp)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    ran = subprocess.run(
        cmd, cwd=SCRIPTS, capture_output=True, text=True, timeout=600, env=env, check=False
    )
    return ran, json.loads(report.read_text()) if report.exists() else {}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "args", "printed"), CASES, ids=[f"{c[0]}{''.join(c[1])}" for c in CASES]
)
def test_framework_script_runs_under_the_doctor_as_under_python(
    tmp_path: Path, target: str, args: tuple[str, ...], printed: list[str]
) -> None:
    ran, report = _doctor(tmp_path, target, args)
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert [line for line in lines if line.startswith("STAGE")] == printed, ran.stdout[-2000:]
    assert not _DOCTOR_FRAME.search(ran.stderr), ran.stderr[-3000:]
    assert report.get("tool") == "torchpace", ran.stderr[-3000:]
    for finding in report["findings"]:
        for where in finding.get("locations", []):
            # the script's own lines (the launcher, torchpace and the framework are not the user's)
            source = SCRIPTS / where["file"]
            assert source.exists(), (finding["rule"], where)
            line = source.read_text().splitlines()[where["line"] - 1].strip()
            # an API the user called, not one a library called while the user's line imported it
            # (`import torch.distributed.optim` TorchScripts torch's own classes)
            assert not line.startswith(("import ", "from ")), (finding["rule"], where, line)
