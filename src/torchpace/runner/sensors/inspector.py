"""Inspect live objects while a script runs: DataLoaders, precision, flags, deprecated APIs -> Inspection.

`Inspector.install()` patches a few torch entry points (DataLoader construction, GradScaler.scale,
torch.compile, the deprecated amp/jit entry points, warnings.warn). Each patch does O(1) work per
call, so they cost nothing measurable outside the watched steps; `restore()` undoes them all.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
import weakref
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from torchpace.environment import probe as environment
from torchpace.runner.patching import Patcher, user_location
from torchpace.runner.sensors.inspection import ApiUse, Inspection
from torchpace.runner.sensors.loader import LoaderRecord, loader_facts, static_facts
from torchpace.runner.sensors.model import StepWatcher
from torchpace.trace.stacks import SourceLocation

# Deprecated entry points, patched so the user's call site is known even when warnings are filtered.
_DEPRECATED = (
    ("torch.cuda.amp", "autocast", "torch.amp.autocast('cuda', ...)"),
    ("torch.cuda.amp", "GradScaler", "torch.amp.GradScaler('cuda', ...)"),
    ("torch.cpu.amp", "autocast", "torch.amp.autocast('cpu', ...)"),
    ("torch.cpu.amp", "GradScaler", "torch.amp.GradScaler('cpu', ...)"),
    ("torch.jit", "script", "torch.compile(model) (or torch.export for deployment)"),
)
_DEBUG_ENV = {
    "CUDA_LAUNCH_BLOCKING": "every kernel launch waits for the GPU",
    "PYTORCH_NO_CUDA_MEMORY_CACHING": "every allocation goes to the CUDA driver",
    "TORCH_SHOW_CPP_STACKTRACES": "errors collect C++ stack traces",
}


@dataclass(frozen=True)
class _WarningSeen:
    category: str
    message: str
    location: SourceLocation | None


class Inspector:
    """Patches torch entry points, watches steps on request, and builds the Inspection."""

    def __init__(self, world_size: int = 1) -> None:
        self.world_size = world_size
        self.patcher = Patcher()
        self.loaders: list[LoaderRecord] = []
        # Loader -> its record, without keeping loaders (and persistent workers) alive.
        self._records: weakref.WeakKeyDictionary[Any, LoaderRecord] = weakref.WeakKeyDictionary()
        self.api_uses: Counter[tuple[str, str, SourceLocation | None]] = Counter()
        self.warnings: list[_WarningSeen] = []
        self.scaler_used: bool | None = None
        self.flags: dict[str, Any] | None = None  # global switches as set inside the training loop
        self.autocast_seen: dict[str, str] = {}  # device type -> dtype of enabled autocast regions
        self.compiled = False
        self.watcher: StepWatcher | None = None
        self.notes: list[str] = []

    # --- patches ----------------------------------------------------------------------------
    def install(self) -> None:
        """Patch the entry points; safe to call once per run."""
        import torch
        import torch.utils.data.dataloader as dl

        self.patcher.wrap(dl.DataLoader, "__init__", self._wrap_loader_init)
        self.patcher.wrap(dl.DataLoader, "__iter__", self._wrap_loader_iter)
        from torch.amp import grad_scaler

        self.patcher.wrap(grad_scaler.GradScaler, "scale", self._wrap_scale)
        from torch.amp import autocast_mode

        self.patcher.wrap(autocast_mode.autocast, "__enter__", self._wrap_autocast)
        self.patcher.wrap(torch, "compile", self._wrap_compile)
        for module_name, attr, replacement in _DEPRECATED:
            module = sys.modules.get(module_name)
            if module is not None and hasattr(module, attr):
                self._patch_deprecated(module, module_name, attr, replacement)
        self.patcher.wrap(warnings, "warn", self._wrap_warn)

    def restore(self) -> None:
        """Undo every patch and stop watching."""
        if self.watcher is not None:
            self.watcher.stop()
        self.patcher.restore()

    def _wrap_loader_init(self, original: Any) -> Any:
        inspector = self

        def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
            original(loader, *args, **kwargs)
            if loader not in inspector._records:
                record = LoaderRecord(static_facts(loader, user_location()))
                inspector._records[loader] = record
                inspector.loaders.append(record)

        return __init__

    def _wrap_loader_iter(self, original: Any) -> Any:
        records = self._records

        def __iter__(loader: Any, *args: Any, **kwargs: Any) -> Any:
            it = original(loader, *args, **kwargs)
            record = records.get(loader)
            if record is not None:
                record.epochs += 1
                # An iterator with __slots__ gets no per-loader timing.
                with contextlib.suppress(AttributeError):
                    it._torchpace_loader = record
            return it

        return __iter__

    def _wrap_scale(self, original: Any) -> Any:
        inspector = self

        def scale(scaler: Any, *args: Any, **kwargs: Any) -> Any:
            inspector.scaler_used = bool(scaler.is_enabled()) or bool(inspector.scaler_used)
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
        inspector = self

        def compile(*args: Any, **kwargs: Any) -> Any:
            inspector.compiled = True
            return original(*args, **kwargs)

        return compile

    def _patch_deprecated(self, module: Any, module_name: str, attr: str, fix: str) -> None:
        api = f"{module_name}.{attr}"
        uses = self.api_uses
        target = getattr(module, attr)
        if isinstance(target, type):

            def wrap_init(original: Any) -> Any:
                def __init__(obj: Any, *args: Any, **kwargs: Any) -> None:
                    if type(obj) is target:
                        uses[(api, fix, user_location())] += 1
                    original(obj, *args, **kwargs)

                return __init__

            self.patcher.wrap(target, "__init__", wrap_init)
            return

        def wrap_func(original: Any) -> Any:
            def deprecated(*args: Any, **kwargs: Any) -> Any:
                uses[(api, fix, user_location())] += 1
                return original(*args, **kwargs)

            return deprecated

        self.patcher.wrap(module, attr, wrap_func)

    def _wrap_warn(self, original: Any) -> Any:
        seen = self.warnings

        def warn(
            message: Any, category: Any = None, stacklevel: int = 1, *args: Any, **kw: Any
        ) -> None:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            cat = category or (type(message) if isinstance(message, Warning) else UserWarning)
            from_torch = caller == "torch" or caller.startswith("torch.")
            if from_torch and len(seen) < 200:
                seen.append(_WarningSeen(cat.__name__, str(message), user_location()))
            original(message, category, stacklevel + 1, *args, **kw)

        return warn

    # --- watching steps ---------------------------------------------------------------------
    def watch(self, *, dispatch: bool = True) -> None:
        """Start watching steps closely: module hooks and the host-tensor dispatch mode.

        A dispatch mode belongs to the thread that entered it: with several training threads
        (`dispatch=False`) only the module hooks watch.
        """
        if self.watcher is None:
            self.watcher = StepWatcher()
            # Dispatch modes and torch.compile do not mix well: skip the host-tensor watch then.
            self.watcher.start(dispatch=dispatch and not self.compiled)

    def unwatch(self) -> None:
        """Stop watching; what was seen stays for the Inspection."""
        if self.watcher is not None:
            self.watcher.stop()

    def capture_flags(self) -> None:
        """Record the global switches now, from inside the loop (a `with detect_anomaly():` around
        the loop is over by the time the run ends)."""
        self.flags = _flag_facts()

    # --- the Inspection ---------------------------------------------------------------------
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

    def snapshot(self, *, profiled_ms: float | None = None, steps: int = 0) -> Inspection:
        """Everything seen so far, as plain data."""
        import torch

        base = _device_facts(self.watcher)
        loaders = tuple(loader_facts(r, profiled_ms) for r in self.loaders)
        return replace(
            base,
            cpu_cores=environment.usable_cores(),
            cpu_bf16=environment.cpu_bf16(),
            torch_threads=torch.get_num_threads(),
            interop_threads=torch.get_num_interop_threads(),
            world_size=self.world_size,
            grad_scaler_used=self.scaler_used,
            compiled=self.compiled,
            loaders=loaders,
            deprecated=self.deprecated(),
            omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
            mkl_num_threads=os.environ.get("MKL_NUM_THREADS"),
            allocator=environment.allocator(),
            numa_nodes=environment.numa_nodes()[1],
            notes=tuple(self.notes),
            step_ms=profiled_ms / steps if profiled_ms and steps else None,
            **(self.flags if self.flags is not None else _flag_facts()),
            **{**self._autocast_facts(base.device_kind), **_watch_facts(self.watcher)},
        )

    def _autocast_facts(self, device_kind: str) -> dict[str, Any]:
        # Without a watched forward: no autocast region at all means none in the forward either.
        kind = "cuda" if device_kind in ("cuda", "rocm") else "cpu"
        if kind in self.autocast_seen:
            return {}  # autocast was used somewhere; only a watched forward says where
        return {"autocast_in_forward": False, "autocast_dtype": None}


def _api_from_message(message: str) -> str:
    start = message.find("`")
    end = message.find("`", start + 1)
    if start >= 0 and end > start:
        return message[start + 1 : end].split("(")[0]
    return message.split(" is deprecated")[0][:60]


def _device_facts(watcher: StepWatcher | None) -> Inspection:
    import torch

    used = watcher.model.device_type if watcher is not None else None
    cuda = torch.cuda.is_available()
    kind = used or ("cuda" if cuda else "cpu")
    if kind == "cuda" and torch.version.hip is not None:
        kind = "rocm"
    if kind not in ("cuda", "rocm") or not cuda:
        bf16 = True  # CPU autocast supports bf16 everywhere; speed depends on the CPU
        return Inspection(device_kind=kind, bf16_supported=bf16, accelerator_count=0)
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return Inspection(
        device_kind=kind,
        device_name=props.name,
        compute_capability=(props.major, props.minor),
        bf16_supported=bool(torch.cuda.is_bf16_supported()),
        accelerator_count=torch.cuda.device_count(),
    )


def _flag_facts() -> dict[str, Any]:
    import torch

    debug = [
        f"{k}={os.environ[k]}: {why}"
        for k, why in _DEBUG_ENV.items()
        if os.environ.get(k, "0") not in ("", "0")
    ]
    if torch.is_anomaly_enabled():
        debug.append("torch.autograd.set_detect_anomaly(True): every backward op is checked")
    if torch.cuda.is_available() and torch.cuda.get_sync_debug_mode() != 0:
        debug.append("torch.cuda.set_sync_debug_mode(...): every sync is checked")
    precision = torch.get_float32_matmul_precision()
    return {
        "anomaly_detection": bool(torch.is_anomaly_enabled()),
        "debug_apis": tuple(debug),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32) or precision != "highest",
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": precision,
    }


def _watch_facts(w: StepWatcher | None) -> dict[str, Any]:
    if w is None or w.steps == 0:
        return {}
    m = w.model
    return {
        "steps_inspected": w.steps,
        "autocast_in_forward": m.autocast_forwards > 0 if m.forwards else None,
        "autocast_dtype": m.autocast_dtype,
        "data_parallel_devices": m.data_parallel_devices,
        "conv_layers": m.conv_layers // max(w.steps, 1),
        "conv_bias_before_bn": w.conv_bn_pairs(),
        "conv_input_channels_last": m.conv_channels_last,
        "input_shapes_static": len(m.shapes) <= 1 if m.shapes else None,
        "param_dtypes": tuple(m.param_dtypes.most_common()),
        "grad_forwards": w.wasted_forwards(),
        "backward_calls": w.backward_calls,
        "optimizer_steps": w.optimizer_steps,
        "host_tensors": w.host_tensors(),
        "forward_bypass": w.forward_bypass,
    }
