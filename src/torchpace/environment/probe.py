"""What this machine and torch build offer (`torchpace env`): facts, then verdicts about them.

torch and nvidia-ml-py are imported inside functions: nvidia-ml-py is optional and every fact degrades
to None ("unknown") rather than failing.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from torchpace.cores import usable_cores
from torchpace.environment import malloc
from torchpace.policy.threads import cores_per_process

_SYS_NODES = Path("/sys/devices/system/node")
# Allocators that replace glibc malloc, as their shared objects appear in /proc/self/maps.
_ALLOCATORS = (
    ("jemalloc", "libjemalloc"),
    ("tcmalloc", "libtcmalloc"),
    ("mimalloc", "libmimalloc"),
)


@dataclass(frozen=True)
class GpuFacts:
    """One visible accelerator."""

    index: int
    name: str
    compute_capability: tuple[int, int] | None
    memory_bytes: int | None
    bf16: bool | None  # bf16 tensor-core math (compute capability 8.0+ on NVIDIA)
    tf32: bool | None  # TF32 tensor cores (compute capability 8.0+)


@dataclass(frozen=True)
class CpuFacts:
    """The host CPU as this process sees it."""

    model: str | None
    logical_cores: int
    usable_cores: int  # os.sched_getaffinity: what this process may run on
    physical_cores: int | None
    numa_nodes: int | None
    numa_nodes_usable: int | None  # NUMA nodes this process's affinity spans
    allocator: str  # "glibc", "jemalloc", "tcmalloc", "mimalloc"
    bf16_native: bool | None  # avx512_bf16 or AMX: fast bf16 matmuls on the CPU
    malloc_libraries: tuple[str, ...] = ()  # jemalloc/tcmalloc found here (for LD_PRELOAD)


@dataclass(frozen=True)
class EnvFacts:
    """Versions, devices and CPU facts for one process."""

    python: str
    platform: str
    torch_version: str | None  # None: torch is not installed in this Python
    cuda_build: str | None  # torch.version.cuda: the CUDA the wheel was built for
    hip_build: str | None
    cudnn_version: str | None
    driver_version: str | None
    nvml: str  # "used", "not installed", or why it failed
    gpu_device_files: bool  # /dev/nvidia0 or /dev/kfd exists: a GPU is attached to the machine
    gpus: tuple[GpuFacts, ...]
    cpu: CpuFacts
    torch_threads: int | None  # None without torch
    interop_threads: int | None
    env_vars: tuple[tuple[str, str], ...]  # performance-relevant variables that are set


Level = Literal["ok", "info", "warn", "error"]


@dataclass(frozen=True)
class Verdict:
    """A judgement about the environment, with the fix when there is one."""

    level: Level
    message: str
    fix: str = ""


_ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "NCCL_DEBUG",
    "LD_PRELOAD",
    "TORCH_LOGS",
)


def _read(path: Path | str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def numa_nodes() -> tuple[int | None, int | None]:
    """(NUMA nodes on the machine, nodes this process's affinity spans); None when unknown."""
    nodes = sorted(_SYS_NODES.glob("node[0-9]*")) if _SYS_NODES.is_dir() else []
    if not nodes:
        return None, None
    try:
        mine = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return len(nodes), None
    spanned = sum(1 for n in nodes if _cpulist(_read(n / "cpulist")) & mine)
    return len(nodes), spanned


def allocator() -> str:
    """The malloc this process uses, from the libraries mapped into it."""
    maps = _read("/proc/self/maps") + os.environ.get("LD_PRELOAD", "")
    for name, lib in _ALLOCATORS:
        if lib in maps:
            return name
    return "glibc"


CpuBf16 = Literal["amx", "avx512_bf16", "none"]


def _bf16_kind(flags: set[str]) -> CpuBf16:
    if "amx_bf16" in flags:
        return "amx"
    return "avx512_bf16" if "avx512_bf16" in flags else "none"


def _field(cpuinfo: str, name: str) -> str | None:
    """The first `name` field of /proc/cpuinfo's text (None where there is none)."""
    found = re.search(rf"^{name}\s*:\s*(.+)$", cpuinfo, re.M)
    return found[1].strip() if found else None


def cpu_bf16() -> CpuBf16 | None:
    """How this CPU computes bf16: AMX tiles, AVX512-BF16 dot products, or not natively (emulated).

    From /proc/cpuinfo's flags (what the hypervisor lets through, as oneDNN sees it); None where
    there is no /proc/cpuinfo (macOS, Windows).
    """
    flags = _field(_read("/proc/cpuinfo"), "flags")
    return None if flags is None else _bf16_kind(set(flags.split()))


def cpu_model() -> str | None:
    """This CPU's model name (`env`, `bench`): /proc/cpuinfo's, else the platform's (macOS)."""
    text = _read("/proc/cpuinfo")
    return _field(text, "model name") if text else platform.processor() or None


def _physical_cores() -> int | None:
    text = _read("/proc/cpuinfo")
    cores = set(re.findall(r"^physical id\s*:\s*(\d+)\n(?:.*\n)*?core id\s*:\s*(\d+)", text, re.M))
    return len(cores) or None


def cpu_facts() -> CpuFacts:
    """The CPU facts that matter for training speed."""
    nodes, spanned = numa_nodes()
    bf16 = cpu_bf16()
    return CpuFacts(
        model=cpu_model(),
        logical_cores=os.cpu_count() or 1,
        usable_cores=usable_cores(),
        physical_cores=_physical_cores(),
        numa_nodes=nodes,
        numa_nodes_usable=spanned,
        allocator=allocator(),
        bf16_native=None if bf16 is None else bf16 != "none",
        malloc_libraries=malloc.malloc_libraries(),
    )


def _nvml_driver() -> tuple[str | None, str]:
    try:
        import pynvml  # nvidia-ml-py: optional
    except ImportError:
        return None, "not installed (pip install nvidia-ml-py for driver details)"
    try:
        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVML raises its own error types; any failure means "unknown"
        return None, f"failed: {exc}"
    return (version.decode() if isinstance(version, bytes) else str(version)), "used"


def driver_version() -> tuple[str | None, str]:
    """(NVIDIA driver version, how NVML fared); /proc/driver/nvidia is the fallback."""
    version, nvml = _nvml_driver()
    if version is None:
        match = re.search(r"Kernel Module\s+(\S+)", _read("/proc/driver/nvidia/version"))
        version = match[1] if match else None
    return version, nvml


def gpu_facts(torch: Any) -> tuple[GpuFacts, ...]:
    """Every device torch can see (CUDA or ROCm)."""
    if not torch.cuda.is_available():
        return ()
    return tuple(gpu_fact(torch, i) for i in range(torch.cuda.device_count()))


def gpu_fact(torch: Any, index: int) -> GpuFacts:
    """One visible device, read from its properties (torch.cuda must be available)."""
    props = torch.cuda.get_device_properties(index)
    cc = (props.major, props.minor)
    hip = torch.version.hip is not None
    # is_bf16_supported() answers for the current device; the others are judged by their cc.
    current = index == torch.cuda.current_device()
    return GpuFacts(
        index=index,
        name=props.name,
        compute_capability=cc,
        memory_bytes=int(props.total_memory),
        bf16=bool(torch.cuda.is_bf16_supported()) if current else cc >= (8, 0) or hip,
        tf32=None if hip else cc >= (8, 0),
    )


def _torch() -> Any:
    """torch, or None where it is not installed (`env` says how to install it)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def gather() -> EnvFacts:
    """Collect every fact `torchpace env` shows; the torch facts are None without torch."""
    driver, nvml = driver_version()
    facts = EnvFacts(
        python=sys.version.split()[0],
        platform=platform.platform(),
        torch_version=None,
        cuda_build=None,
        hip_build=None,
        cudnn_version=None,
        driver_version=driver,
        nvml=nvml,
        gpu_device_files=os.path.exists("/dev/nvidia0") or os.path.exists("/dev/kfd"),
        gpus=(),
        cpu=cpu_facts(),
        torch_threads=None,
        interop_threads=None,
        env_vars=tuple((k, os.environ[k]) for k in _ENV_VARS if k in os.environ),
    )
    torch = _torch()
    return facts if torch is None else _with_torch(facts, torch)


def _with_torch(facts: EnvFacts, torch: Any) -> EnvFacts:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return replace(
        facts,
        torch_version=str(torch.__version__),
        cuda_build=torch.version.cuda,
        hip_build=torch.version.hip,
        cudnn_version=str(cudnn) if cudnn else None,
        gpus=gpu_facts(torch),
        torch_threads=torch.get_num_threads(),
        interop_threads=torch.get_num_interop_threads(),
    )


def _build_verdicts(f: EnvFacts) -> list[Verdict]:
    if f.torch_version is None:
        return [
            Verdict(
                "error",
                f"torch is not installed in this Python ({sys.executable}): nothing can train",
                "pip install torch (a CPU build: add --index-url "
                "https://download.pytorch.org/whl/cpu; for CUDA or ROCm see "
                "https://pytorch.org/get-started/locally/)",
            )
        ]
    gpu_build = f.cuda_build is not None or f.hip_build is not None
    if not gpu_build and (f.gpu_device_files or f.driver_version):
        return [
            Verdict(
                "error",
                f"a CPU-only build of torch ({f.torch_version}) on a machine with a GPU "
                f"(driver {f.driver_version or 'present'}): training runs on the CPU",
                "install a CUDA build: pip install torch --index-url "
                "https://download.pytorch.org/whl/cu124 (pick the CUDA your driver supports)",
            )
        ]
    if gpu_build and not f.gpus:
        if f.gpu_device_files:
            return [
                Verdict(
                    "error",
                    f"a GPU is attached but CUDA {f.cuda_build} cannot use it "
                    f"(driver {f.driver_version or 'unknown'}; CUDA_VISIBLE_DEVICES="
                    f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})",
                    "check that the driver supports this CUDA version (nvidia-smi) and that "
                    "CUDA_VISIBLE_DEVICES is not empty",
                )
            ]
        return [
            Verdict(
                "info",
                f"a CUDA build of torch (CUDA {f.cuda_build}) with no GPU: it works on the CPU, "
                "but a CPU build is a much smaller install",
                "pip install torch --index-url https://download.pytorch.org/whl/cpu",
            )
        ]
    if not gpu_build:
        return [Verdict("ok", f"CPU build of torch {f.torch_version} on a machine with no GPU")]
    return [Verdict("ok", f"torch {f.torch_version} sees {len(f.gpus)} GPU(s)")]


def _gpu_verdicts(f: EnvFacts) -> list[Verdict]:
    out: list[Verdict] = []
    for g in f.gpus:
        if g.tf32:
            out.append(
                Verdict(
                    "info",
                    f"GPU {g.index} ({g.name}) has TF32 tensor cores; fp32 matmuls use them only "
                    "when asked",
                    "torch.set_float32_matmul_precision('high')",
                )
            )
        if g.bf16 is False:
            out.append(
                Verdict(
                    "info",
                    f"GPU {g.index} ({g.name}) has no fast bf16: use fp16 autocast with GradScaler",
                    "torch.autocast('cuda', dtype=torch.float16) + torch.amp.GradScaler('cuda')",
                )
            )
    return out


def _cpu_verdicts(f: EnvFacts) -> list[Verdict]:
    cpu, out = f.cpu, []
    threads = cores_per_process(cpu.usable_cores)
    if f.torch_threads is not None and f.torch_threads > threads:
        out.append(
            Verdict(
                "warn",
                f"torch uses {f.torch_threads} threads but this process may run on "
                f"{cpu.usable_cores} cores: threads fight over cores",
                f"export OMP_NUM_THREADS={threads} (or torch.set_num_threads)",
            )
        )
    if cpu.numa_nodes_usable and cpu.numa_nodes_usable > 1:
        out.append(
            Verdict(
                "info",
                f"this process spans {cpu.numa_nodes_usable} NUMA nodes: memory on the far node "
                "is slower for CPU-heavy work",
                "numactl --cpunodebind=0 --membind=0 python train.py (one rank per node)",
            )
        )
    advice = malloc.preload_advice(cpu.malloc_libraries)
    if cpu.allocator == "glibc" and not f.gpus and advice:
        out.append(
            Verdict(
                "info",
                "glibc malloc: allocation-heavy CPU training often runs faster with jemalloc or "
                "tcmalloc",
                advice,
            )
        )
    return out


# Debugging switches that slow every step when left set: variable -> what it does.
_DEBUG_VARS = {
    "CUDA_LAUNCH_BLOCKING": "every kernel launch waits for the GPU",
    "PYTORCH_NO_CUDA_MEMORY_CACHING": "every allocation goes to the driver",
}


def _env_var_verdicts(f: EnvFacts) -> list[Verdict]:
    env = dict(f.env_vars)
    out = [
        Verdict("warn", f"{name} is set: {what}", f"unset {name} (it is for debugging)")
        for name, what in _DEBUG_VARS.items()
        if env.get(name, "0") not in ("", "0")
    ]
    if env.get("CUDA_VISIBLE_DEVICES") == "" and (f.cuda_build or f.hip_build):
        out.append(Verdict("warn", "CUDA_VISIBLE_DEVICES is empty: no GPU is visible to torch", ""))
    return out


def verdicts(facts: EnvFacts) -> list[Verdict]:
    """Judge the facts: build/device mismatches first, then GPU, CPU and environment advice."""
    return (
        _build_verdicts(facts)
        + _gpu_verdicts(facts)
        + _cpu_verdicts(facts)
        + _env_var_verdicts(facts)
    )
