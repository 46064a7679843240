"""Fix code fits the run: no device code for a CPU run, the CPU fixes that pay there."""

from __future__ import annotations

import pytest

from torchpace.fixes.policy import (
    autocast_code,
    channels_last_code,
    loader_code,
    mentions_device_code,
    target,
    threads_code,
)

CPU = target("cpu", "none")
CPU_BF16 = target("cpu", "avx512_bf16")
A100 = target("cuda", None, (8, 0))
V100 = target("cuda", None, (7, 0))


def test_cpu_fixes_name_no_accelerator() -> None:
    for code in (loader_code(CPU, 2), loader_code(CPU, 0), channels_last_code(CPU)):
        assert not mentions_device_code(code), code
    assert autocast_code(CPU) is None  # emulated bf16 is slower than fp32


def test_cpus_with_native_bf16_get_cpu_autocast() -> None:
    code = autocast_code(CPU_BF16)
    assert code is not None and 'torch.amp.autocast("cpu", dtype=torch.bfloat16)' in code
    assert "Changes the precision of the math" in code
    assert not mentions_device_code(code)
    # AVX512-BF16 without AMX: bf16 can be slower (0.48x on nanoGPT here): measure first.
    assert "no matrix engine (AMX)" in code and "torchpace doctor --verify" in code
    amx = autocast_code(target("cpu", "amx"))
    assert amx is not None and "in hardware (AMX)" in amx and "--verify" not in amx


def test_gpus_get_bf16_or_fp16_with_a_scaler_by_capability() -> None:
    bf16 = autocast_code(A100) or ""
    assert "bfloat16" in bf16 and "GradScaler(" not in bf16
    assert 'GradScaler("cuda")' in (autocast_code(V100) or "")
    assert "bfloat16" in (autocast_code(target("rocm")) or "")


def test_gpu_loader_code_pins_and_prefetches() -> None:
    code = loader_code(A100, 4)
    assert "pin_memory=True" in code and "DevicePrefetcher" in code and "num_workers=4" in code
    assert 'x.to("cuda", non_blocking=True)' in code


def test_unknown_devices_get_a_variable() -> None:
    code = channels_last_code(target("mps"))
    assert 'x.to("mps"' in code
    assert target("tpu").device == "unknown" and target("cpu", "sse").cpu_bf16 is None


@pytest.mark.parametrize(("ranks", "expected"), [(1, "torch.set_num_threads(4)"),
                                                 (2, "OMP_NUM_THREADS=4 torchrun")])  # fmt: skip
def test_threads(ranks: int, expected: str) -> None:
    assert expected in threads_code(4, ranks)


def test_loader_fix_code_names_only_loading_settings() -> None:
    """An invented shuffle=True changes the training and crashes a loader over an
    IterableDataset (the doctor prescribed it for a PPO script's iterable rollouts)."""
    for device in ("cpu", "cuda"):
        for workers in (0, 2):
            code = loader_code(target(device), workers)
            assert "shuffle=True" not in code and ", )" not in code
            compile(code, "<fix>", "exec")  # valid Python
