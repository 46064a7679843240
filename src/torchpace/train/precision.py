"""Mixed precision: autocast for the forward and loss, a GradScaler only for fp16.

`Precision("auto")` picks what the doctor would prescribe on this hardware and says why
(`.reason`): torchpace's one mixed-precision policy (torchpace.fixes.policy.mixed_precision).
bf16 and fp16 change numerics (fewer mantissa bits in matmuls and convolutions); fp32 does not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal, TypeVar, cast, get_args

import torch

from torchpace.fixes.policy import CpuBf16, Target, mixed_precision, target
from torchpace.policy.devices import default_device

Mode = Literal["auto", "bf16", "fp16", "fp32"]
Resolved = Literal["bf16", "fp16", "fp32"]
F = TypeVar("F", bound=Callable[..., Any])

_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _cpu_bf16() -> CpuBf16:
    """How this CPU computes bf16 (AMX, AVX512-BF16 or emulated), as the doctor reads it."""
    from torchpace.environment.probe import cpu_bf16

    found = cpu_bf16()
    if found is not None:
        return found
    # No /proc/cpuinfo (macOS, Windows): what oneDNN reports to torch.
    if getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)():
        return "amx"
    return (
        "avx512_bf16"
        if getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()
        else "none"
    )


def _target(device: torch.device) -> Target:
    if device.type == "cuda" and torch.version.hip is not None:
        return target("rocm")
    if device.type == "cuda":
        return target("cuda", None, tuple(torch.cuda.get_device_capability(device)))  # type: ignore[arg-type]
    if device.type == "cpu":
        return target("cpu", _cpu_bf16())
    return Target(device="unknown")


def _choose_auto(device: torch.device) -> tuple[Resolved, str]:
    """What the doctor would prescribe on this device (fixes.policy.mixed_precision)."""
    rocm = device.type == "cuda" and torch.version.hip is not None
    if rocm and not torch.cuda.is_bf16_supported(including_emulation=False):  # an older AMD GPU
        return "fp16", "ROCm GPU without native bf16; fp16 with a GradScaler"
    if device.type not in ("cuda", "cpu"):
        return (
            "fp32",
            f"no automatic choice for device type {device.type!r}; ask for 'bf16' or 'fp16'",
        )
    amp = mixed_precision(_target(device))
    return amp.mode, amp.reason


def _explain_explicit(mode: Resolved, device: torch.device) -> str:
    if mode == "bf16" and device.type == "cuda" and torch.version.hip is None:
        major, _ = torch.cuda.get_device_capability(device)
        if major < 8:
            return "requested; this GPU emulates bf16 (capability < 8.0), expect it to be slow"
    if mode == "bf16" and device.type == "cpu":
        kind = _cpu_bf16()
        if kind == "none":
            return "requested; this CPU lacks AVX512-BF16/AMX, expect bf16 to be slower than fp32"
        if kind == "avx512_bf16":
            return "requested; this CPU has no AMX: bf16 is often slower than fp32, measure it"
    return "requested"


class Precision:
    """Autocast (+ GradScaler for fp16) for one device; a context manager and a decorator."""

    def __init__(
        self,
        mode: Mode = "auto",
        device: torch.device | str | None = None,
        *,
        scaler: torch.amp.GradScaler | None = None,
    ) -> None:
        if mode not in get_args(Mode):
            raise ValueError(
                f"Precision mode must be one of 'auto', 'bf16', 'fp16', 'fp32'; got {mode!r}"
            )
        self.device = torch.device(device) if device is not None else default_device()
        self.requested: Mode = mode
        if mode == "auto":
            self.mode, self.reason = _choose_auto(self.device)
        else:
            self.mode = cast(Resolved, mode)
            self.reason = _explain_explicit(self.mode, self.device)
        if scaler is not None and self.mode != "fp16":
            raise ValueError(
                f"a GradScaler is only used with fp16, but this Precision is {self.mode!r}; "
                "drop scaler= or ask for Precision('fp16')"
            )
        # bf16 keeps fp32's exponent range, so gradients cannot underflow: never build a scaler.
        self.scaler = scaler
        if self.scaler is None and self.mode == "fp16":
            self.scaler = torch.amp.GradScaler(self.device.type)
        self.skipped_steps = 0
        self.optimizer_steps = 0
        self._active: list[AbstractContextManager[Any]] = []

    @property
    def dtype(self) -> torch.dtype | None:
        """The autocast dtype, or None for fp32 (no autocast)."""
        return _DTYPES.get(self.mode)

    def __repr__(self) -> str:
        return f"Precision({self.mode!r}, device={str(self.device)!r}, reason={self.reason!r})"

    def autocast(self) -> AbstractContextManager[Any]:
        """A fresh autocast context for the forward and loss (a no-op for fp32)."""
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def __enter__(self) -> Precision:
        ctx = self.autocast()
        ctx.__enter__()
        self._active.append(ctx)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active.pop().__exit__(*exc)

    def __call__(self, fn: F) -> F:
        """Decorate a `forward` (or any function) so it runs under this precision's autocast."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.autocast():
                return fn(*args, **kwargs)

        return cast(F, wrapper)

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of `loss`, scaled first when a GradScaler is in use."""
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the gradients by the loss scale in place (call before clipping)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        """Step the optimizer unless fp16 gradients overflowed; True when it really stepped."""
        if self.scaler is None:
            optimizer.step()
            self.optimizer_steps += 1
            return True
        # GradScaler lowers its scale exactly when it skipped a step for inf/NaN gradients.
        # get_scale() syncs with the device, but scaler.step() has already synced on found_inf.
        before = self.scaler.get_scale()
        self.scaler.step(optimizer)
        self.scaler.update()
        stepped = self.scaler.get_scale() >= before
        if stepped:
            self.optimizer_steps += 1
        else:
            self.skipped_steps += 1
        return stepped

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state and the step counters, for checkpoints."""
        state: dict[str, Any] = {
            "skipped_steps": self.skipped_steps,
            "optimizer_steps": self.optimizer_steps,
        }
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict()` saved."""
        self.skipped_steps = int(state["skipped_steps"])
        self.optimizer_steps = int(state["optimizer_steps"])
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
