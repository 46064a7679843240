"""The flags sensor: global switches, precision tools and deprecated APIs the script uses.

`FlagsRecord` is its record (plain data, read by the live rules). `FlagsSensor` patches a few torch
entry points (GradScaler.scale, autocast, torch.compile, the deprecated amp/jit entry points,
warnings.warn); each patch does O(1) work per call, so they cost nothing measurable.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchpace.runner.patching import Patcher, caller_location, skip_wrappers
from torchpace.trace.stacks import SourceLocation

# Deprecated entry points, patched so the user's call site is known even when warnings are filtered.
_DEPRECATED = (
    ("torch.cuda.amp", "autocast", "torch.amp.autocast('cuda', ...)"),
    ("torch.cuda.amp", "GradScaler", "torch.amp.GradScaler('cuda', ...)"),
    ("torch.cpu.amp", "autocast", "torch.amp.autocast('cpu', ...)"),
    ("torch.cpu.amp", "GradScaler", "torch.amp.GradScaler('cpu', ...)"),
)
# torch.jit.script is not patched: TorchScript resolves a class's names from its caller's frame,
# which a wrapper would shift (`import torch.distributed.optim`, and so every ignite script, then
# failed); torch >= 2.10 warns of it itself, and the warnings patch sees that.
_DEBUG_ENV = {
    "CUDA_LAUNCH_BLOCKING": "every kernel launch waits for the GPU",
    "PYTORCH_NO_CUDA_MEMORY_CACHING": "every allocation goes to the CUDA driver",
    "TORCH_SHOW_CPP_STACKTRACES": "errors collect C++ stack traces",
}


@dataclass(frozen=True)
class ApiUse:
    """A deprecated or slow API the script called, with where and how often."""

    api: str  # e.g. "torch.cuda.amp.autocast"
    replacement: str  # e.g. "torch.amp.autocast('cuda')"
    message: str = ""  # PyTorch's own warning text when it gave one
    location: SourceLocation | None = None
    count: int = 1


@dataclass(frozen=True)
class FlagsRecord:
    """Switches as set inside the training loop, and the precision tools the script used."""

    anomaly_detection: bool | None = None
    debug_apis: tuple[str, ...] = ()  # debugging switches left on, e.g. "CUDA_LAUNCH_BLOCKING=1"
    deterministic_algorithms: bool | None = None
    cudnn_deterministic: bool | None = None
    cudnn_benchmark: bool | None = None
    tf32_matmul: bool | None = None  # torch.backends.cuda.matmul.allow_tf32 / matmul precision
    tf32_cudnn: bool | None = None
    float32_matmul_precision: str | None = None
    compiled: bool | None = None  # torch.compile in use
    grad_scaler_used: bool | None = None
    deprecated: tuple[ApiUse, ...] = ()


@dataclass(frozen=True)
class _WarningSeen:
    category: str
    message: str
    location: SourceLocation | None


class FlagsSensor:
    """Patches the entry points; `capture()` reads the switches from inside the loop."""

    def __init__(self) -> None:
        self.api_uses: Counter[tuple[str, str, SourceLocation | None]] = Counter()
        self.warnings: list[_WarningSeen] = []
        self.scaler_used: bool | None = None
        self.switches: dict[str, Any] | None = None  # as set inside the training loop
        self.autocast_seen: dict[str, str] = {}  # device type -> dtype of enabled autocast regions
        self.compiled = False
        # told what torch.compile returned, before the script can call it
        self.on_compile: Callable[[Any], None] | None = None

    def install(self, patcher: Patcher) -> None:
        """Patch the entry points (undone by the patcher's restore())."""
        import torch
        from torch.amp import autocast_mode, grad_scaler

        patcher.wrap(grad_scaler.GradScaler, "scale", self._wrap_scale)
        patcher.wrap(autocast_mode.autocast, "__enter__", self._wrap_autocast)
        patcher.wrap(torch, "compile", self._wrap_compile)
        for module_name, attr, replacement in _DEPRECATED:
            module = sys.modules.get(module_name)
            if module is not None and hasattr(module, attr):
                self._patch_deprecated(patcher, module, module_name, attr, replacement)
        patcher.wrap(warnings, "warn", self._wrap_warn)

    def capture(self) -> None:
        """Record the global switches now, from inside the loop (a `with detect_anomaly():` around
        the loop is over by the time the run ends)."""
        self.switches = _switches()

    def record(self) -> FlagsRecord:
        """The switches (as captured, else as they are now) and what the patches saw."""
        return FlagsRecord(
            **(self.switches if self.switches is not None else _switches()),
            compiled=self.compiled,
            grad_scaler_used=self.scaler_used,
            deprecated=self.deprecated(),
        )

    def deprecated(self) -> tuple[ApiUse, ...]:
        """Deprecated calls seen by the patches, plus PyTorch's own deprecation warnings."""
        uses = [ApiUse(api, fix, "", loc, n) for (api, fix, loc), n in self.api_uses.items()]
        patched = {u.location for u in uses}
        for w in self.warnings:
            deprecated = w.category in ("DeprecationWarning", "FutureWarning")
            if (deprecated or "deprecat" in w.message.lower()) and w.location not in patched:
                uses.append(ApiUse(_api_from_message(w.message), "", w.message, w.location))
                patched.add(w.location)
        return tuple(uses)

    def _wrap_scale(self, original: Any) -> Any:
        sensor = self

        def scale(scaler: Any, *args: Any, **kwargs: Any) -> Any:
            sensor.scaler_used = bool(scaler.is_enabled()) or bool(sensor.scaler_used)
            return original(scaler, *args, **kwargs)

        return scale

    def _wrap_autocast(self, original: Any) -> Any:
        seen = self.autocast_seen

        def __enter__(ctx: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(ctx, "_enabled", False):
                dtype = str(getattr(ctx, "fast_dtype", "")).removeprefix("torch.")
                seen[str(getattr(ctx, "device", ""))] = dtype
            return original(ctx, *args, **kwargs)

        return __enter__

    def _wrap_compile(self, original: Any) -> Any:
        sensor = self

        def compile(*args: Any, **kwargs: Any) -> Any:
            sensor.compiled = True
            compiled = original(*args, **kwargs)
            if sensor.on_compile is not None:
                sensor.on_compile(compiled)
            return compiled

        return compile

    def _patch_deprecated(
        self, patcher: Patcher, module: Any, module_name: str, attr: str, fix: str
    ) -> None:
        api = f"{module_name}.{attr}"
        uses = self.api_uses
        target = getattr(module, attr)
        if isinstance(target, type):

            def wrap_init(original: Any) -> Any:
                def __init__(obj: Any, *args: Any, **kwargs: Any) -> None:
                    where = caller_location(sys._getframe(1))
                    if type(obj) is target and where is not None:
                        uses[(api, fix, where)] += 1
                    original(obj, *args, **kwargs)

                return __init__

            patcher.wrap(target, "__init__", wrap_init)
            return

        def wrap_func(original: Any) -> Any:
            def deprecated(*args: Any, **kwargs: Any) -> Any:
                where = caller_location(sys._getframe(1))
                if where is not None:
                    uses[(api, fix, where)] += 1
                return original(*args, **kwargs)

            return deprecated

        patcher.wrap(module, attr, wrap_func)

    def _wrap_warn(self, original: Any) -> Any:
        seen = self.warnings

        def warn(
            message: Any, category: Any = None, stacklevel: int = 1, *args: Any, **kw: Any
        ) -> None:
            frame = sys._getframe(1)
            caller = frame.f_globals.get("__name__", "")
            cat = category or (type(message) if isinstance(message, Warning) else UserWarning)
            from_torch = caller == "torch" or caller.startswith("torch.")
            if isinstance(stacklevel, int) and stacklevel > 1:
                stacklevel = skip_wrappers(frame, stacklevel)
            where = _warned_call(frame, stacklevel) if from_torch and len(seen) < 200 else None
            if where is not None:
                seen.append(_WarningSeen(cat.__name__, str(message), where))
            original(message, category, stacklevel + 1, *args, **kw)

        return warn


def _warned_call(frame: Any, stacklevel: Any) -> SourceLocation | None:
    """The user's call that a warning from torch is about, or None when no user code made it.

    The frame the warning names (its `stacklevel`) when that is the user's, else that frame's
    caller (torch.jit.script warns with stacklevel 1: the call is one frame further out); a
    warning about a call that torch or another library made is not the user's to fix."""
    level = stacklevel if isinstance(stacklevel, int) and stacklevel > 1 else 1
    for _ in range(level - 1):
        if frame.f_back is None:
            break
        frame = frame.f_back
    return caller_location(frame) or caller_location(frame.f_back)


def _api_from_message(message: str) -> str:
    start = message.find("`")
    end = message.find("`", start + 1)
    if start >= 0 and end > start:
        return message[start + 1 : end].split("(")[0]
    return message.split(" is deprecated")[0][:60]


def _switches() -> dict[str, Any]:
    import torch

    from torchpace.environment.tf32 import conv_tf32, matmul_precision, matmul_tf32

    debug = [
        f"{k}={os.environ[k]}: {why}"
        for k, why in _DEBUG_ENV.items()
        if os.environ.get(k, "0") not in ("", "0")
    ]
    if torch.is_anomaly_enabled():
        debug.append("torch.autograd.set_detect_anomaly(True): every backward op is checked")
    if torch.cuda.is_available() and torch.cuda.get_sync_debug_mode() != 0:
        debug.append("torch.cuda.set_sync_debug_mode(...): every sync is checked")
    precision = matmul_precision()
    return {
        "anomaly_detection": bool(torch.is_anomaly_enabled()),
        "debug_apis": tuple(debug),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "tf32_matmul": matmul_tf32() or precision != "highest",
        "tf32_cudnn": conv_tf32(),
        "float32_matmul_precision": precision,
    }
