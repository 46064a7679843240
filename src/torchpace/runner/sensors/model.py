"""Watch a few steps closely: modules in execution order, autograd use, and host-created tensors.

Active only during the inspected steps (the last warm-up steps, before profiling starts), so its
hooks never touch the profiled steps or the rest of the run.
"""

from __future__ import annotations

import math
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from torchpace.runner.patching import is_library, user_location
from torchpace.trace.stacks import SourceLocation

SMALL_NUMEL = 4096  # tensors up to this many elements count as "small" host-made values
_CALL_IMPL = ("_call_impl", "_wrapped_call_impl")


def _in_backward() -> bool:
    """Whether the autograd engine is running a backward in this thread: a module called now is
    recomputed by activation checkpointing (TRL's SFT runs Qwen2's RMSNorms again there, and
    their graphs, used only inside that backward, read as evaluation forwards with autograd on:
    a false grad-in-eval whose inference_mode fix would stop training)."""
    import torch

    return torch._C._current_autograd_node() is not None


_CREATORS = {"lift_fresh", "lift_fresh_copy", "scalar_tensor", "_to_copy", "copy_"}


@dataclass(frozen=True)
class ConvBnPair:
    """A convolution with a bias whose output goes straight into a BatchNorm (the bias is wasted)."""

    conv: str  # module path, e.g. "features.0"
    bn: str
    conv_type: str = "Conv2d"


@dataclass(frozen=True)
class GradForward:
    """Forward passes that recorded autograd graphs and had no backward pass (evaluation)."""

    module: str  # class name of the top-level module
    training: bool  # module.training at the time (False: model.eval() was called)
    count: int
    location: SourceLocation | None = None


@dataclass(frozen=True)
class HostTensor:
    """A small tensor created on the host and copied to the device, every inspected step."""

    location: SourceLocation
    count_per_step: float
    numel: int
    nbytes: int
    op: str = ""  # the aten op that created or copied it


@dataclass(frozen=True)
class ModelRecord:
    """What the watched steps (the last warm-up steps) showed of the model and its autograd use.

    None means "not observed"; `steps` is 0 when no step was watched."""

    steps: int = 0  # steps whose modules and ops were watched
    autocast_in_forward: bool | None = None
    autocast_dtype: str | None = None  # "bfloat16", "float16"
    data_parallel_devices: int | None = None  # nn.DataParallel in use, over this many devices
    conv_layers: int | None = None  # convolutions run per forward pass
    conv_bias_before_bn: tuple[ConvBnPair, ...] = ()
    conv_input_channels_last: bool | None = None
    input_shapes_static: bool | None = None  # the top-level input shapes did not change
    param_dtypes: tuple[tuple[str, int], ...] = ()  # (dtype, parameter count), largest first
    grad_forwards: tuple[GradForward, ...] = ()
    backward_calls: int | None = None
    optimizer_steps: int | None = None
    host_tensors: tuple[HostTensor, ...] = ()
    # The model was called as model.forward(...), which runs no nn.Module hooks: the watched
    # steps saw no module. Where the call was made.
    forward_bypass: SourceLocation | None = None
    # Softmaxes after a batched product in the watched ops, by shape: (those whose input is that
    # product's [.., L, S] output and whose output the next product takes, as attention's; the
    # others). None: no op was watched (torch.compile, several training threads).
    softmax_chains: tuple[int, int] | None = None

    def watched(self) -> bool:
        """Whether the watched steps saw the model's modules run (hooks fired)."""
        seen = bool(self.param_dtypes) or self.forward_bypass is None
        return self.steps > 0 and seen

    def unwatched_reason(self) -> str:
        """Why no model was seen in the watched steps, in words the rules' skip notes use."""
        if self.forward_bypass is not None:
            return (
                f"the model is called as .forward(...) at {self.forward_bypass}, which bypasses "
                "nn.Module hooks, so the doctor saw no module (call model(x) instead)"
            )
        if self.steps:
            return "the watched steps ran no nn.Module (a functional model, or TorchScript)"
        return "no step was watched (torch.compile, time-window steps or --warmup 0 skip the watch)"

    def unwatched_enable(self) -> str:
        """How a run would show the model: "" where only the script can (a .forward(...) call or
        no module: mnist_forward_forward was told "run with --warmup 1 or more" at 5)."""
        return (
            "" if self.forward_bypass is not None or self.steps else "run with --warmup 1 or more"
        )


@dataclass
class ModelFacts:
    """What the watched forward passes showed about the model."""

    device_type: str | None = None
    conv_layers: int = 0
    conv_bias_bn: dict[tuple[str, str], str] = field(default_factory=dict)
    conv_channels_last: bool | None = None
    data_parallel_devices: int | None = None
    shapes: set[tuple[int, ...]] = field(default_factory=set)
    param_dtypes: Counter[str] = field(default_factory=Counter)
    autocast_dtype: str | None = None
    forwards: int = 0
    autocast_forwards: int = 0


def _has_parameters(module: Any) -> bool:
    return next(iter(module.parameters()), None) is not None


def _first_tensor(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for v in value:
            t = _first_tensor(v)
            if t is not None:
                return t
    if isinstance(value, dict):
        return _first_tensor(list(value.values()))
    return None


# Outputs of a top-level forward watched for a backward reaching them: enough for a model output
# (loss, logits, metrics), bounded for one returning a list of many tensors.
MAX_WATCHED_OUTPUTS = 16


def _graph_outputs(value: Any) -> list[Any]:
    """The tensors of a forward's output that recorded a graph (a dict or ModelOutput's values, a
    tuple's items, nested), at most MAX_WATCHED_OUTPUTS."""
    import torch

    found: list[Any] = []
    stack = [value]
    while stack and len(found) < MAX_WATCHED_OUTPUTS:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            if item.requires_grad and item.grad_fn is not None:
                found.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
    return found


# The ops a softmax chain is read from, below autograd (matmul and softmax decompose to these).
_PRODUCTS = frozenset({"bmm", "baddbmm", "mm"})
_CHAINED = _PRODUCTS | {"_softmax"}


class SoftmaxChains:
    """Products and softmaxes in the watched ops, by shape: scores = A @ B, softmax(scores),
    softmax(...) @ V, as attention runs; what the profiler's CPU recording (no shapes) cannot
    tell. pytorch/examples' GAT softmaxes a broadcast sum of two thin products: unchained."""

    def __init__(self) -> None:
        self.watched = False  # the dispatch mode ran (one training thread, no torch.compile)
        self.chained = self.unchained = 0
        self._product: tuple[int, ...] | None = None  # the last product's output shape
        self._softmax: int | None = None  # a chained softmax's output size, awaiting its product

    def op(self, name: str, args: Any, out: Any) -> None:
        if name == "_softmax":
            x, product = args[0], self._product
            if product is not None:
                scores = x.numel() == math.prod(product) and tuple(x.shape[-2:]) == product[-2:]
                self.unchained += not scores
                self._softmax = x.numel() if scores else None
            self._product = None
            return
        first = args[1] if name == "baddbmm" else args[0]
        if self._softmax is not None:
            took = first.numel() == self._softmax
            self.chained += took
            self.unchained += not took
            self._softmax = None
        self._product = tuple(out.shape)

    def counts(self) -> tuple[int, int] | None:
        return (self.chained, self.unchained) if self.watched else None


class StepWatcher:
    """Global module hooks and a dispatch mode, installed for the inspected steps only."""

    def __init__(self) -> None:
        self.model = ModelFacts()
        self.steps = 0
        self.backward_calls = 0
        self.optimizer_steps = 0
        self._depth = 0
        self._names: dict[int, str] = {}
        self._seen_top: set[int] = set()
        self._conv_out: dict[int, tuple[Any, str, str]] = {}
        # Top-level forwards of this step that recorded a graph, each with a flag its grad_fn's
        # hook sets when a backward pass reaches it.
        self._step_grad: list[tuple[tuple[str, bool, SourceLocation | None], list[bool]]] = []
        self.grad_forwards: Counter[tuple[str, bool, SourceLocation | None]] = Counter()
        self._host: dict[SourceLocation, list[int]] = {}
        self._handles: list[Any] = []
        self._mode: Any = None
        self._profiling = False
        self._thread = 0
        self.active = False
        # model.forward(...) called directly: no module hook runs; where the call was made.
        self.forward_bypass: SourceLocation | None = None
        self.chains = SoftmaxChains()

    # --- life cycle -------------------------------------------------------------------------
    def start(self, *, dispatch: bool) -> None:
        """Install the hooks (and the dispatch mode unless torch.compile is in use)."""
        import torch.nn.modules.module as m

        self.active = True
        self._handles = [
            m.register_module_forward_pre_hook(self._pre),
            m.register_module_forward_hook(self._post),
        ]
        self._thread = threading.get_ident()
        if dispatch:
            self.chains.watched = True
            self._mode = _host_tensor_mode(self)
            self._mode.__enter__()
            # Only in the thread that entered the mode (`dispatch` means one training thread),
            # and only where no tool already profiles Python calls.
            if sys.getprofile() is None:
                sys.setprofile(self._on_call)
                self._profiling = True

    def stop(self) -> None:
        """Remove every hook; the watcher keeps what it saw."""
        self.active = False
        if threading.get_ident() != self._thread:
            # A dispatch mode and a profile function belong to the thread that set them: they
            # turn themselves off there (see _on_call; the mode does nothing once inactive).
            return
        if self._profiling and sys.getprofile() == self._on_call:
            sys.setprofile(None)
        self._profiling = False
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        for h in self._handles:
            h.remove()
        self._handles = []
        self._conv_out.clear()

    def step_done(self) -> None:
        """A watched step ended: forwards whose graph no backward reached were wasted."""
        self.steps += 1
        self.grad_forwards.update(key for key, used in self._step_grad if not used[0])
        self._step_grad.clear()
        self._depth = 0
        self._conv_out.clear()

    def _on_call(self, frame: FrameType, event: str, arg: Any) -> None:
        """sys.setprofile: a `forward` entered with no module hook around it is a bypass."""
        if not self.active:
            sys.setprofile(None)
            return
        if event != "call" or self._depth or frame.f_code.co_name != "forward":
            return
        caller = frame.f_back
        if caller is None or caller.f_code.co_name in _CALL_IMPL or self.forward_bypass:
            return
        if is_library(caller.f_code.co_filename):
            # A library calling a module's forward itself (Lightning's logging, TRL's trainer)
            # is not the user's code to change: the note blamed the user's `self.log(...)`.
            return
        import torch

        if isinstance(frame.f_locals.get("self"), torch.nn.Module):
            self.forward_bypass = user_location(caller)

    # --- module hooks -----------------------------------------------------------------------
    def _learn_model(self, module: Any) -> None:
        self._seen_top.add(id(module))
        for name, sub in module.named_modules():
            self._names.setdefault(id(sub), name or type(sub).__name__)
        for p in module.parameters():
            self.model.param_dtypes[str(p.dtype).removeprefix("torch.")] += p.numel()
            self.model.device_type = self.model.device_type or p.device.type
        if type(module).__name__ == "DataParallel":
            self.model.data_parallel_devices = len(getattr(module, "device_ids", []) or [])

    def _top_pre(self, module: Any, args: Any) -> None:
        import torch

        if id(module) not in self._seen_top:
            self._learn_model(module)
        x = _first_tensor(args)
        if x is not None:
            self.model.shapes.add(tuple(x.shape))
        device = self.model.device_type or "cpu"
        kind = "cuda" if device == "cuda" else "cpu"
        self.model.forwards += 1
        if torch.is_autocast_enabled(kind):
            self.model.autocast_forwards += 1
            self.model.autocast_dtype = str(torch.get_autocast_dtype(kind)).removeprefix("torch.")

    def _pre(self, module: Any, args: Any) -> None:
        if _in_backward():
            return  # recomputed by activation checkpointing: not a forward of the step's own
        if self._depth == 0:
            self._top_pre(module, args)
        self._depth += 1
        kind = type(module).__name__
        if kind.startswith("BatchNorm") and self._conv_out:
            x = _first_tensor(args)
            hit = self._conv_out.get(id(x))
            if hit is not None and hit[0] is x:
                name = self._names.get(id(module), kind)
                self.model.conv_bias_bn[(hit[1], name)] = hit[2]
        elif kind in ("Conv1d", "Conv2d", "Conv3d"):
            x = _first_tensor(args)
            if x is not None and x.dim() == 4 and self.model.conv_channels_last is None:
                import torch

                cl = x.is_contiguous(memory_format=torch.channels_last)
                self.model.conv_channels_last = bool(cl and not x.is_contiguous())

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if _in_backward():
            return
        self._depth = max(0, self._depth - 1)
        kind = type(module).__name__
        if kind in ("Conv1d", "Conv2d", "Conv3d"):
            self.model.conv_layers += 1
            if getattr(module, "bias", None) is not None and _first_tensor(output) is not None:
                out = _first_tensor(output)
                self._conv_out[id(out)] = (out, self._names.get(id(module), kind), kind)
        if self._depth == 0:
            # Wasted only if a backward reaches none of the outputs: TRL's SFT returns the loss's
            # log-probs beside an entropy it detaches for logging; the entropy alone read as a
            # forward no backward used.
            # A module without parameters (a torchmetrics metric fed the loss, a loss module)
            # computes no model's forward: Fabric's PPO example updates 3 MeanMetrics with its
            # losses each step, which read as 3 model forwards wasted, MEDIUM.
            outs = _graph_outputs(output) if _has_parameters(module) else []
            if outs:
                used = [False]
                for fn in {id(t.grad_fn): t.grad_fn for t in outs}.values():
                    fn.register_prehook(_mark_used(used))
                self._step_grad.append(((kind, bool(module.training), user_location()), used))

    # --- host tensors -----------------------------------------------------------------------
    def saw_host_tensor(self, numel: int, nbytes: int) -> None:
        """An op made a small value on the host (or copied one) that ends on the device."""
        loc = user_location()
        if loc is None:
            return
        entry = self._host.setdefault(loc, [0, numel, nbytes, 0])
        entry[0] += 1
        entry[3] |= 1 << self.steps  # which watched steps saw it

    def host_tensors(self) -> tuple[HostTensor, ...]:
        """Places that made a small host tensor bound for the device in every watched step."""
        every = (1 << max(self.steps, 1)) - 1
        found = [
            HostTensor(loc, count / max(self.steps, 1), numel, nbytes, "host->device")
            for loc, (count, numel, nbytes, mask) in self._host.items()
            if mask & every == every
        ]
        return tuple(sorted(found, key=lambda h: (-h.count_per_step, h.location.file)))

    def conv_bn_pairs(self) -> tuple[ConvBnPair, ...]:
        """Convolutions with a bias feeding a BatchNorm directly."""
        return tuple(ConvBnPair(c, b, k) for (c, b), k in sorted(self.model.conv_bias_bn.items()))

    def wasted_forwards(self) -> tuple[GradForward, ...]:
        """Forward passes that built autograd graphs no backward used."""
        return tuple(
            GradForward(kind, training, n, loc)
            for (kind, training, loc), n in self.grad_forwards.most_common()
        )


def _mark_used(flag: list[bool]) -> Any:
    def hook(grad_outputs: Any) -> None:
        flag[0] = True

    return hook


def _host_tensor_mode(watcher: StepWatcher) -> Any:
    """A TorchDispatchMode that spots small tensors built on the host and copied to a device."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class HostTensorMode(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            if not watcher.active:
                return out
            name = func.overloadpacket.__name__
            if name in _CHAINED:
                watcher.chains.op(name, args, out)
            if name in _CREATORS and isinstance(out, torch.Tensor):
                src = args[1] if name == "copy_" else args[0] if args else None
                src_host = isinstance(src, torch.Tensor) and src.device.type == "cpu"
                if name.startswith(("lift", "scalar")):
                    src_host = True
                small = out.numel() <= SMALL_NUMEL
                if small and src_host and out.device.type != "cpu":
                    watcher.saw_host_tensor(out.numel(), out.numel() * out.element_size())
            return out

    return HostTensorMode()


def model_record(w: StepWatcher | None, autocast_anywhere: bool) -> ModelRecord:
    """What the watched steps showed; `autocast_anywhere`: an enabled autocast region was entered
    for the model's device at some point of the run (the watch says whether in the forward)."""
    if w is None or w.steps == 0:
        # Without a watched forward: no autocast region at all means none in the forward either.
        return ModelRecord() if autocast_anywhere else ModelRecord(autocast_in_forward=False)
    m = w.model
    return ModelRecord(
        steps=w.steps,
        autocast_in_forward=m.autocast_forwards > 0 if m.forwards else None,
        autocast_dtype=m.autocast_dtype,
        data_parallel_devices=m.data_parallel_devices,
        conv_layers=m.conv_layers // max(w.steps, 1),
        conv_bias_before_bn=w.conv_bn_pairs(),
        conv_input_channels_last=m.conv_channels_last,
        input_shapes_static=len(m.shapes) <= 1 if m.shapes else None,
        param_dtypes=tuple(m.param_dtypes.most_common()),
        grad_forwards=w.wasted_forwards(),
        backward_calls=w.backward_calls,
        optimizer_steps=w.optimizer_steps,
        host_tensors=w.host_tensors(),
        forward_bypass=w.forward_bypass,
        softmax_chains=w.chains.counts(),
    )
