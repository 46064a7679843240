"""`torchpace env`: facts and verdicts, text and JSON."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from torchpace.cli.main import main
from torchpace.environment import malloc
from torchpace.environment import probe as environment
from torchpace.environment.probe import CpuFacts, EnvFacts, GpuFacts


def facts(**changes: object) -> EnvFacts:
    cpu = CpuFacts("test cpu", 8, 8, 4, 1, 1, "jemalloc", None)
    base = EnvFacts(
        python="3.11",
        platform="linux",
        torch_version="2.13.0",
        cuda_build=None,
        hip_build=None,
        cudnn_version=None,
        driver_version=None,
        nvml="not installed",
        gpu_device_files=False,
        gpus=(),
        cpu=cpu,
        torch_threads=8,
        interop_threads=8,
        env_vars=(),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def levels(f: EnvFacts) -> list[tuple[str, str]]:
    return [(v.level, v.message) for v in environment.verdicts(f)]


def test_cpu_build_on_a_gpu_machine_is_an_error() -> None:
    ((level, message),) = levels(facts(gpu_device_files=True, driver_version="550.54"))[:1]
    assert level == "error" and "CPU-only build of torch" in message and "550.54" in message


def test_cuda_build_without_a_gpu_says_a_cpu_build_is_smaller() -> None:
    level, message = levels(facts(cuda_build="12.4"))[0]
    assert level == "info" and "CUDA build of torch (CUDA 12.4) with no GPU" in message


def test_cuda_build_with_an_attached_gpu_it_cannot_use_is_an_error() -> None:
    level, message = levels(facts(cuda_build="12.4", gpu_device_files=True))[0]
    assert level == "error" and "cannot use it" in message


def test_gpu_advice_for_tf32_and_missing_bf16() -> None:
    gpus = (
        GpuFacts(0, "A100", (8, 0), 80 << 30, True, True),
        GpuFacts(1, "T4", (7, 5), 16 << 30, False, False),
    )
    found = levels(facts(cuda_build="12.4", gpus=gpus))
    assert found[0] == ("ok", "torch 2.13.0 sees 2 GPU(s)")
    assert any("A100" in m and "TF32" in m for _, m in found)
    assert any("T4" in m and "no fast bf16" in m for _, m in found)


def test_threads_over_cores_and_debug_env_are_warnings() -> None:
    cpu = CpuFacts("c", 4, 2, 2, 2, 2, "glibc", None)
    found = levels(facts(cpu=cpu, torch_threads=8, env_vars=(("CUDA_LAUNCH_BLOCKING", "1"),)))
    messages = " ".join(m for _, m in found)
    assert "torch uses 8 threads but this process may run on 2 cores" in messages
    assert "spans 2 NUMA nodes" in messages and "glibc malloc" in messages
    assert "CUDA_LAUNCH_BLOCKING is set" in messages


def test_env_json_has_facts_and_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 1
    assert doc["facts"]["cpu"]["usable_cores"] >= 1
    assert doc["verdicts"] and {"level", "message", "fix"} <= set(doc["verdicts"][0])


def test_env_text_lists_versions_and_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    for key in ("torch ", "CUDA build", "cuDNN", "driver", "cores", "NUMA nodes", "allocator"):
        assert key in out
    assert "[ok  ]" in out or "[FAIL]" in out or "[info]" in out


def test_nvml_missing_degrades_to_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name: str, *args: object, **kwargs: object) -> object:
        if name == "pynvml":
            raise ImportError("no pynvml")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    _version, nvml = environment.driver_version()
    assert nvml.startswith("not installed (pip install nvidia-ml-py")


def test_env_without_torch_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "torch         not installed" in out
    assert "[FAIL] torch is not installed in this Python" in out and "pip install torch" in out
    assert "CUDA build" not in out  # nothing to say about a build that is not there
    assert main(["env", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["facts"]["torch_version"] is None and doc["facts"]["torch_threads"] is None


def test_allocator_advice_names_a_library_that_is_here(tmp_path: Path) -> None:
    (tmp_path / "libtcmalloc_minimal.so.4").write_bytes(b"")
    (found,) = malloc.malloc_libraries([tmp_path, tmp_path / "missing"])
    assert found == str(tmp_path / "libtcmalloc_minimal.so.4")
    if sys.platform.startswith("linux"):
        assert malloc.preload_advice((found,)) == f"LD_PRELOAD={found} python train.py"
    cpu = CpuFacts("c", 2, 2, 2, 1, 1, "glibc", None, malloc_libraries=(found,))
    (verdict,) = [v for v in environment.verdicts(facts(cpu=cpu)) if "glibc" in v.message]
    assert found in verdict.fix or not sys.platform.startswith("linux")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD is Linux's")
@pytest.mark.parametrize(
    ("os_release", "install", "path"),
    [
        ('ID=debian\nVERSION_ID="12"', "apt-get install libjemalloc2", "/libjemalloc.so.2"),
        ('ID="rocky"\nID_LIKE="rhel centos fedora"', "dnf install jemalloc", "/usr/lib64/"),
        ("ID=alpine", "apk add jemalloc", "/usr/lib/libjemalloc.so.2"),
        ("ID=gentoo", "conda install -c conda-forge jemalloc", "$CONDA_PREFIX/lib/"),
    ],
)
def test_without_one_the_advice_says_how_to_install_it(
    os_release: str, install: str, path: str
) -> None:
    install_line, preload_line = malloc.preload_advice((), os_release).splitlines()
    assert install in install_line and "none on this machine" in install_line
    assert preload_line.startswith("LD_PRELOAD=") and path in preload_line
