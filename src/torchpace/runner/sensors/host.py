"""The host sensor: the device the model runs on, and the CPU side (cores, threads, allocator).

`DeviceRecord` and `HostRecord` are its records (plain data, read by the live rules); the probes
run once, when the run's Inspection is assembled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from torchpace.cores import usable_cores
from torchpace.environment import probe
from torchpace.policy.devices import is_cuda
from torchpace.policy.threads import FewerThreads


@dataclass(frozen=True)
class DeviceRecord:
    """The device the watched model ran on (the visible accelerator when none was watched)."""

    kind: str = "cpu"  # "cpu", "cuda", "rocm", "mps"
    name: str | None = None
    compute_capability: tuple[int, int] | None = None
    bf16_supported: bool | None = None
    count: int | None = None  # visible CUDA/ROCm devices


@dataclass(frozen=True)
class HostRecord:
    """The CPU side of the run: cores, how it computes bf16, threads, allocator, NUMA."""

    cores: int | None = None  # usable by this process
    # How the CPU computes bf16: "amx", "avx512_bf16" or "none" (emulated); None: unknown.
    cpu_bf16: str | None = None
    torch_threads: int | None = None
    interop_threads: int | None = None
    omp_num_threads: str | None = None  # the environment variable as set, None when unset
    mkl_num_threads: str | None = None
    allocator: str | None = None  # "glibc", "jemalloc", "tcmalloc", "mimalloc"
    numa_nodes: int | None = None
    # Measured over the profiled steps (runner/window.py), None when not measured: the cores
    # other processes kept busy, and the training thread's time ready to run but waiting for a
    # core (Linux's schedstat) per step. Together they tell torch's threads fighting the
    # machine's load from a script that oversubscribes the cores itself.
    others_cores: float | None = None
    ready_ms_per_step: float | None = None
    # Steps timed at fewer torch threads after the window, where they contended (runner/window.py).
    fewer_threads: FewerThreads | None = None


def device_record(used: str | None) -> DeviceRecord:
    """The device of the watched model (`used`: its device type, None when none was watched)."""
    import torch

    cuda = torch.cuda.is_available()
    kind = used or ("cuda" if cuda else "cpu")
    if kind == "cuda" and torch.version.hip is not None:
        kind = "rocm"
    if not is_cuda(kind) or not cuda:
        # CPU autocast supports bf16 everywhere; its speed depends on the CPU (HostRecord).
        return DeviceRecord(kind=kind, bf16_supported=True, count=0)
    gpu = probe.gpu_fact(torch, torch.cuda.current_device())
    return DeviceRecord(
        kind=kind,
        name=gpu.name,
        compute_capability=gpu.compute_capability,
        bf16_supported=gpu.bf16,
        count=torch.cuda.device_count(),
    )


def host_record() -> HostRecord:
    """The CPU side, read now."""
    import torch

    return HostRecord(
        cores=usable_cores(),
        cpu_bf16=probe.cpu_bf16(),
        torch_threads=torch.get_num_threads(),
        interop_threads=torch.get_num_interop_threads(),
        omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
        mkl_num_threads=os.environ.get("MKL_NUM_THREADS"),
        allocator=probe.allocator(),
        numa_nodes=probe.numa_nodes()[1],
    )
