"""The wheel a pip user gets: it ships the demos and the rule pages, and works from any folder.

Builds the wheel from a copy of the sources, installs it into a fresh virtual environment whose only
other packages are this environment's (torch included, through a .pth line: pip installs nothing
from an index, so never a CUDA torch), and runs the README's commands from an empty folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The built wheel and the build's log."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    build = _run(
        sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
        "-w", tmp / "dist", source,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (built,) = (tmp / "dist").glob("torchpace-*.whl")
    return built, build.stdout + build.stderr


def test_the_wheel_ships_the_demos_the_pages_and_the_license(wheel: tuple[Path, str]) -> None:
    built, log = wheel
    names = set(zipfile.ZipFile(built).namelist())
    for shipped in (
        "torchpace/examples/naive_train.py",
        "torchpace/examples/tuned_train.py",
        "torchpace/examples/slow_loader.pt.trace.json.gz",
        "torchpace/docs/rules/dataloader-stall.md",
        "torchpace/py.typed",
    ):
        assert shipped in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    metadata = zipfile.ZipFile(built).read(meta).decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "project.license" not in log  # setuptools' deprecation warning about the TOML table


@pytest.fixture(scope="module")
def installed(wheel: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; its dependencies are this environment's."""
    env = tmp_path_factory.mktemp("venv") / "env"
    assert _run(sys.executable, "-m", "venv", "--without-pip", env).returncode == 0
    python = env / "bin" / "python"
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    # Only this environment's packages, after the venv's own: torch, numpy, msgspec, rich...
    # (.pth files inside that folder are not processed, so the editable torchpace stays out).
    Path(purelib.stdout.strip(), "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = _run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-index", wheel[0]
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return env


def test_the_doctor_runs_the_bundled_demo_from_another_folder(installed: Path, tmp_path: Path):
    where = _run(installed / "bin" / "python", "-c", "import torchpace; print(torchpace.__file__)")
    assert where.stdout.startswith(str(installed))  # the wheel, not the sources
    done = _run(
        installed / "bin" / "torchpace", "doctor", "--warmup", "3", "--steps", "3",
        "-o", "report.json", "-m", "torchpace.examples.naive_train", "--epochs", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    rules = {f["rule"]: f for f in report["findings"]}
    assert {"debug-api-enabled", "deprecated-api", "data-parallel"} <= set(rules)
    # The demo stands for the user's script: its lines are shown even from site-packages.
    (where_called,) = rules["deprecated-api"]["locations"]
    assert where_called["file"].endswith("torchpace/examples/naive_train.py")


def test_the_sample_trace_and_the_rule_pages_are_found(installed: Path, tmp_path: Path) -> None:
    bin_ = installed / "bin"
    sample = _run(bin_ / "python", "-m", "torchpace.examples", "slow_loader.pt.trace.json.gz")
    assert sample.returncode == 0 and Path(sample.stdout.strip()).is_file()
    done = _run(
        bin_ / "torchpace", "analyze", sample.stdout.strip(), "--format", "json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "dataloader-stall" in {f["rule"] for f in json.loads(done.stdout)["findings"]}
    page = _run(bin_ / "torchpace", "explain", "dataloader-stall", cwd=tmp_path)
    assert page.returncode == 0 and "dataloader-stall" in page.stdout


def test_env_works_where_torch_is_not_installed(wheel: tuple[Path, str], tmp_path: Path) -> None:
    env = tmp_path / "bare"
    assert _run(sys.executable, "-m", "venv", "--without-pip", env).returncode == 0
    python = env / "bin" / "python"
    install = _run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps",
        wheel[0],
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-2000:]
    assert _run(python, "-c", "import torch").returncode != 0  # really no torch here
    done = _run(env / "bin" / "torchpace", "env", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "not installed" in done.stdout and "pip install torch" in done.stdout
