"""Fix code that fits the run: one place that knows which fix pays on which device, and spells it.

Rules call these instead of writing device code themselves, so a CPU run never gets CUDA code
(`.to("cuda")`, pin_memory, GradScaler("cuda")) and gets the CPU fixes that pay there: bf16 autocast
on CPUs that compute bf16 natively (AVX512-BF16 or AMX; emulated bf16 is slower than fp32),
channels_last for convolutions (oneDNN's fast path), thread settings. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from torchpace.policy.devices import Device, device, is_accelerator, is_cuda

CpuBf16 = Literal["amx", "avx512_bf16", "none"]


@dataclass(frozen=True)
class Target:
    """What a fix is for: the device the model runs on and what its arithmetic can do.

    Args:
        device: where the model runs; "unknown" gets device-neutral code.
        cpu_bf16: how the host CPU computes bf16 (None: unknown, e.g. a trace from elsewhere).
        compute_capability: of the GPU (None: unknown or not NVIDIA).
    """

    device: Device = "unknown"
    cpu_bf16: CpuBf16 | None = None
    compute_capability: tuple[int, int] | None = None

    @property
    def accelerator(self) -> bool:
        return is_accelerator(self.device)

    @property
    def torch_device(self) -> str:
        """The device string for code: ROCm is "cuda" to torch; unknown is a variable."""
        if is_cuda(self.device):
            return "cuda"
        return self.device if self.device in ("cpu", "mps") else "device"

    def quoted(self) -> str:
        """The device as it appears in code: "cuda", or the bare variable `device`."""
        dev = self.torch_device
        return dev if dev == "device" else f'"{dev}"'


def target(
    kind: str | None,
    cpu_bf16: str | None = None,
    compute_capability: tuple[int, int] | None = None,
) -> Target:
    """A Target from facts as rules hold them (strings from a trace header or live facts)."""
    bf16 = cpu_bf16 if cpu_bf16 in ("amx", "avx512_bf16", "none") else None
    return Target(device(kind), cast("CpuBf16 | None", bf16), compute_capability)


def loader_code(t: Target, workers: int, *, prefetch_factor: int = 2) -> str:
    """A DataLoader with `workers` workers (0: in the main process), pinned only for a device.

    Only the loading settings are named: the user's own arguments (shuffle, sampler, collate_fn)
    stay as they are. An invented `shuffle=True` changed the training, and crashes a DataLoader
    over an IterableDataset."""
    opts = []
    if workers > 0:
        opts.append(f"num_workers={workers}")
    if is_cuda(t.device):
        opts.append("pin_memory=True")
    if workers > 0:
        opts += ["persistent_workers=True", f"prefetch_factor={prefetch_factor}"]
    lines = [
        "# torchpace: workers, pinning, persistent workers and prefetching fitted to this machine",
        "# (your other arguments, e.g. shuffle, sampler or collate_fn, stay as they are)",
        "from torchpace.data import fast_loader",
        f"loader = fast_loader(dataset, batch_size=batch_size, num_workers={workers})",
    ]
    if is_cuda(t.device):
        lines += [
            "from torchpace.data import DevicePrefetcher",
            'batches = DevicePrefetcher(loader, device="cuda")  # copies batch N+1 on a side stream',
        ]
    lines += [
        "",
        "# plain PyTorch",
        f"loader = DataLoader({', '.join(['dataset', 'batch_size=batch_size', *opts])})",
    ]
    if t.accelerator:
        dev = t.quoted()
        lines += [
            "for x, y in loader:",
            f"    x, y = x.to({dev}, non_blocking=True), y.to({dev}, non_blocking=True)",
        ]
    return "\n".join(lines)


def cheaper_loading_code(t: Target) -> str:
    """What to do when more workers will not help: make each batch cheaper to produce."""
    steps = [
        "# make each batch cheaper to produce:",
        "# - decode / resize once, offline, and store tensors (or uint8 arrays) to read back",
        "# - cache decoded samples in memory when the dataset fits",
        "# - batch the transforms: index a whole batch at once (a BatchSampler into a tensor)",
    ]
    if t.accelerator:
        steps.append("# - move augmentation to the GPU (after the copy), where it is cheap")
    return "\n".join(steps)


# What autocast changes, said with every autocast fix (it changes the math, not only its speed).
_NUMERICS = (
    "# Changes the precision of the math: matmuls/convolutions run in {dtype} (fp32 accumulation);\n"
    "# compare the loss curve with the fp32 run once."
)


# What the fix says of the CPU. AMX multiplies bf16 tiles in hardware; AVX512-BF16 alone has bf16
# dot products but no matrix engine, and autocast casts weights and activations at every op: on a
# 2-core AVX512-BF16 Xeon, bf16 autocast ran a small CNN 1.09x but nanoGPT's CPU recipe 0.48x and
# a small text model 0.51x (docs: no-mixed-precision). So there the fix says to measure first.
_CPU_BF16_NOTE = {
    "amx": "# this CPU multiplies bf16 matrices in hardware (AMX): oneDNN runs bf16 matmuls/convs\n",
    "avx512_bf16": (
        "# this CPU has bf16 instructions (AVX512-BF16) but no matrix engine (AMX): bf16 can be\n"
        "# slower than fp32 (a cast at every op); measure it: torchpace doctor --verify SCRIPT\n"
    ),
}


AmpMode = Literal["bf16", "fp16", "fp32"]


@dataclass(frozen=True)
class Amp:
    """Mixed precision for a target: what to use, why, and what is worth measuring.

    `mode` is what `Precision("auto")` picks and the doctor prescribes; `candidate` is what the
    doctor's fix code shows and `doctor --verify` measures: the same, except on a CPU with
    AVX512-BF16 but no AMX, where fp32 stays the choice and bf16 is only worth measuring.
    """

    mode: AmpMode
    reason: str
    candidate: AmpMode


def mixed_precision(t: Target) -> Amp:
    """The one mixed-precision policy of torchpace (the doctor, Precision("auto"), --verify)."""
    cc = t.compute_capability
    if t.device == "rocm":
        return Amp("bf16", "ROCm GPU: bf16 autocast, no loss scaling needed", "bf16")
    if t.device == "cuda" and (cc is None or cc >= (8, 0)):
        cap = "of unknown capability" if cc is None else f"capability sm_{cc[0]}{cc[1]} >= 8.0"
        return Amp("bf16", f"CUDA {cap} has bf16 tensor cores; no loss scaling needed", "bf16")
    if t.device == "cuda":
        cap = f"CUDA capability sm_{cc[0]}{cc[1]}" if cc else "CUDA"
        if cc is not None and cc >= (7, 0):
            return Amp(
                "fp16", f"{cap} has fp16 tensor cores but no bf16; fp16 + GradScaler", "fp16"
            )
        return Amp("fp32", f"{cap} has no tensor cores; reduced precision is not faster", "fp32")
    if t.device == "cpu" and t.cpu_bf16 == "amx":
        return Amp("bf16", "CPU has AMX: oneDNN multiplies bf16 matrices in hardware", "bf16")
    if t.device == "cpu" and t.cpu_bf16 == "avx512_bf16":
        return Amp(
            "fp32",
            "CPU has AVX512-BF16 but no matrix engine (AMX): bf16 autocast casts at every op and "
            "was often slower than fp32 (0.48x on nanoGPT's CPU recipe); measure it with "
            "torchpace doctor --verify before choosing bf16",
            "bf16",
        )
    if t.device == "cpu":
        why = "CPU lacks AVX512-BF16/AMX: bf16 would be emulated and slower than fp32"
        return Amp("fp32", why, "fp32")
    why = f"no automatic choice for device {t.device!r}; ask for 'bf16' or 'fp16'"
    return Amp("fp32", why, "fp32")


def autocast_code(t: Target) -> str | None:
    """Mixed precision for this device (`mixed_precision(t).candidate`), or None where it does
    not pay (a CPU without native bf16, a GPU without tensor cores)."""
    candidate = mixed_precision(t).candidate
    if is_cuda(t.device) and candidate != "fp32":
        if candidate == "bf16":
            return (
                _NUMERICS.format(dtype="bf16 (8 mantissa bits)") + "\n"
                'with torch.amp.autocast("cuda", dtype=torch.bfloat16):\n'
                "    loss = loss_fn(model(x), y)\n"
                "loss.backward()  # bf16 keeps fp32's range: no GradScaler"
            )
        return (
            "# fp16 + GradScaler: this GPU has no fast bf16 (before Ampere)\n"
            + _NUMERICS.format(dtype="fp16 (10 mantissa bits, small range)")
            + "\n"
            'scaler = torch.amp.GradScaler("cuda")\n'
            'with torch.amp.autocast("cuda", dtype=torch.float16):\n'
            "    loss = loss_fn(model(x), y)\n"
            "scaler.scale(loss).backward()\n"
            "# clipping? scaler.unscale_(optimizer) first, then clip_grad_norm_(...)\n"
            "scaler.step(optimizer)  # skipped when the gradients hold inf/NaN\n"
            "scaler.update()  # once per iteration, after every optimizer's step"
        )
    if t.device == "cpu" and t.cpu_bf16 in ("amx", "avx512_bf16") and candidate == "bf16":
        return (
            _CPU_BF16_NOTE[t.cpu_bf16] + _NUMERICS.format(dtype="bf16 (8 mantissa bits)") + "\n"
            'with torch.amp.autocast("cpu", dtype=torch.bfloat16):\n'
            "    loss = loss_fn(model(x), y)\n"
            "loss.backward()"
        )
    return None


def channels_last_code(t: Target) -> str:
    """Model and inputs in channels_last (NHWC), moved to the device only when there is one."""
    model = "model = model.to(memory_format=torch.channels_last)"
    if t.accelerator:
        dev = t.quoted()
        return f"{model}\nx = x.to({dev}, memory_format=torch.channels_last, non_blocking=True)"
    return f"{model}\nx = x.contiguous(memory_format=torch.channels_last)"


def threads_code(threads: int, ranks: int = 1) -> str:
    """Set torch's intra-op threads, per process under torchrun."""
    if ranks > 1:  # the environment reaches torchrun's ranks and mp.spawn's processes alike
        return (
            f"OMP_NUM_THREADS={threads} torchrun --nproc-per-node {ranks} train.py\n"
            f"# a script that starts its processes itself (mp.spawn): "
            f"OMP_NUM_THREADS={threads} python train.py"
        )
    return f"torch.set_num_threads({threads})  # or: OMP_NUM_THREADS={threads} python train.py"


def mentions_device_code(code: str) -> bool:
    """Whether fix code names an accelerator API (what a CPU run's fixes must never do)."""
    lowered = code.lower()
    return any(
        word in lowered for word in ("cuda", "pin_memory=true", "non_blocking", "gradscaler")
    )
