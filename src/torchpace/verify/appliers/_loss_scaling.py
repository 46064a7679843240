"""fp16 loss scaling without editing the script: one torch.amp.GradScaler driven by patches.

The fix the finding prints (fixes/policy.py, a GPU before Ampere) is, by hand,

    scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()

and the patches do the same for the script's own calls:
- backward: `torch.autograd.backward` (Tensor.backward calls it) runs on `scaler.scale(t)` for each
  output that requires grad, so gradients come out multiplied by the scale (also for a non-scalar
  output with explicit gradients: backward is linear in its seed); a backward started inside
  another (reentrant activation checkpointing) is left alone: it propagates scaled gradients.
- steps: each optimizer class's `step`, wrapped when its first optimizer is built (as torch's own
  profiling hook is, from Optimizer._patch_step_function), becomes `scaler.step(opt)`: the
  gradients are unscaled, and the step is skipped when they hold inf/NaN.
- scaler.update(): once per iteration, after every optimizer of the iteration has stepped. The
  patches cannot know which optimizer is the iteration's last, so the update is deferred to the
  next scaled backward, once some optimizer has stepped since the last update. Updating after each
  step would be wrong with two optimizers: a scale changed by the first one's skipped step would
  unscale the second one's gradients by a scale they were not made with. With two backward-and-step
  pairs per iteration (a GAN) the update falls between them: each pair's gradients are still
  unscaled by the scale they were made with.
- clipping: clip_grad_norm_, clip_grad_value_, get_total_norm and clip_grads_with_norm_ first
  `scaler.unscale_` each optimizer owning a parameter (or gradient) they are given, found in the
  optimizers' param_groups at the call, as `scaler.unscale_(optimizer)` before clipping does.
- what a GradScaler cannot drive stops the run as not applicable (base.refuse), never as a
  measurement of other math: `step(closure)` (LBFGS; GradScaler has no closure support), and a
  backward before any torch.optim optimizer exists (updates made by hand would apply scaled
  gradients).

Not covered: gradients read or changed by hand between backward and step see the scale (as they
would in the printed code before `scaler.unscale_`); clipping inside gradient accumulation (after
each micro-batch's backward) mixes unscaled and scaled gradients.
"""

from __future__ import annotations

import functools
import importlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

from torchpace.verify.appliers.base import refuse

# Where scripts reach the clipping functions (`torch.nn.utils.clip_grad_norm_`, or imported from
# torch.nn.utils.clip_grad); clip_grad.clip_grad_norm (deprecated) calls the patched name there.
_CLIPPING = (
    (
        "torch.nn.utils",
        ("clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"),
    ),
    ("torch.nn.utils.clip_grad", ("clip_grad_norm_", "clip_grad_value_")),
)
# The first parameter's name where a caller passes it by keyword.
_FIRST = ("parameters", "tensors")


def _closure(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return callable(kwargs.get("closure")) or (bool(args) and callable(args[0]))


def _params(opt: Any) -> list[Any]:
    return [p for group in opt.param_groups for p in group["params"]]


def _has_grads(opt: Any) -> bool:
    return any(p.grad is not None for p in _params(opt))


def _inside_backward() -> bool:
    """Whether autograd is running a backward now (torch.utils.checkpoint's reentrant variant
    calls torch.autograd.backward from inside the outer one, on the engine's thread)."""
    import torch

    task = getattr(torch._C, "_current_graph_task_id", None)  # what checkpoint.py itself reads
    return task is not None and task() != -1


class LossScaling:
    """One GradScaler and the patches that drive it (`install`); `undo` puts torch back."""

    def __init__(self, device: str) -> None:
        import torch

        self.scaler = torch.amp.GradScaler(device)
        self.optimizers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.scaled = False  # a scaled backward since the last update
        self.stage: dict[int, str] = {}  # id(optimizer): "unscaled" or "stepped" since the update
        self._classes: set[type] = set()
        self._local = threading.local()  # inside scaler.step, which calls opt.step again
        self._undo: list[tuple[Any, str, Any, bool]] = []

    def install(self) -> LossScaling:
        """Patch torch: optimizer steps, backward and the clipping functions."""
        import torch
        from torch.optim import Optimizer

        self._wrap(Optimizer, "_patch_step_function", self._on_optimizer)
        self._wrap(torch.autograd, "backward", self._backward)
        for module_name, names in _CLIPPING:
            module = importlib.import_module(module_name)
            for name in names:
                if hasattr(module, name):
                    self._wrap(module, name, self._clipping)
        return self

    def undo(self) -> None:
        """Put back everything `install` and the optimizers built since then patched."""
        for owner, name, original, had in reversed(self._undo):
            if had:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._undo.clear()
        self._classes.clear()

    def _wrap(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, name)
        self._undo.append((owner, name, original, name in vars(owner)))
        setattr(owner, name, make(original))

    def _on_optimizer(self, original: Any) -> Any:
        @functools.wraps(original)
        def _patch_step_function(opt: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(opt, *args, **kwargs)  # torch's profiling hook first: it marks `hooked`
            self.optimizers.add(opt)
            cls = type(opt)
            if cls not in self._classes:
                self._classes.add(cls)
                self._wrap(cls, "step", self._step)
            return out

        return _patch_step_function

    def _step(self, inner: Any) -> Any:
        @functools.wraps(inner)  # keeps `hooked`: torch must not wrap it again
        def step(opt: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(self._local, "stepping", False):  # scaler.step's own opt.step call
                return inner(opt, *args, **kwargs)
            if _closure(args, kwargs):
                refuse(
                    f"the script calls {type(opt).__name__}.step(closure), which a GradScaler "
                    "cannot drive (the closure recomputes the loss inside the step): fp16 + "
                    "GradScaler needs a code change"
                )
            if not self.scaled or self.stage.get(id(opt)) == "stepped" or not _has_grads(opt):
                return inner(opt, *args, **kwargs)  # no scaled gradient to unscale
            if "closure" in kwargs:  # None here; GradScaler.step refuses the keyword itself
                kwargs = {k: v for k, v in kwargs.items() if k != "closure"}
            self._local.stepping = True
            try:
                return self.scaler.step(opt, *args, **kwargs)
            finally:
                self._local.stepping = False
                self.stage[id(opt)] = "stepped"

        return step

    def _backward(self, inner: Any) -> Any:
        @functools.wraps(inner)
        def backward(*args: Any, **kwargs: Any) -> Any:
            if args:
                args = (self._scale(args[0]), *args[1:])
            elif "tensors" in kwargs:
                kwargs["tensors"] = self._scale(kwargs["tensors"])
            return inner(*args, **kwargs)

        return backward

    def _scale(self, tensors: Any) -> Any:
        """`tensors` multiplied by the scale (GradientEdges and tensors without grad as given)."""
        import torch

        single = isinstance(tensors, torch.Tensor)
        outputs = [tensors] if single else tensors
        if not isinstance(outputs, (list, tuple)) or not all(
            isinstance(t, torch.Tensor) for t in outputs
        ):
            return tensors
        if not any(t.requires_grad for t in outputs):
            return tensors  # torch raises its own error
        if _inside_backward():
            return tensors  # reentrant checkpointing: its seeds are already scaled gradients
        if not self.optimizers:
            refuse(
                "the script calls backward before it builds any torch.optim optimizer, so its "
                "updates cannot go through a GradScaler: fp16 + GradScaler needs a code change"
            )
        self._update_if_due()
        self.scaled = True
        scaled = [self.scaler.scale(t) if t.requires_grad else t for t in outputs]
        return scaled[0] if single else type(outputs)(scaled)

    def _update_if_due(self) -> None:
        """scaler.update() once some optimizer stepped since the last one: the previous
        iteration's steps are all done when its next backward starts."""
        if "stepped" in self.stage.values():
            self.scaler.update()
            self.stage.clear()
            self.scaled = False

    def _clipping(self, inner: Any) -> Any:
        @functools.wraps(inner)
        def clip(*args: Any, **kwargs: Any) -> Any:
            key = next((k for k in _FIRST if k in kwargs), None)
            if args:
                first = self._unscale_owners(args[0])
                args = (first, *args[1:])
            elif key is not None:
                kwargs[key] = self._unscale_owners(kwargs[key])
            return inner(*args, **kwargs)

        return clip

    def _unscale_owners(self, given: Any) -> Any:
        """scaler.unscale_ each optimizer that owns a parameter (or gradient) in `given`;
        `given` back, an iterator read into a list."""
        import torch

        items = [given] if isinstance(given, torch.Tensor) else list(given)
        if self.scaled:
            ids = {id(t) for t in items}
            for opt in list(self.optimizers):
                if id(opt) in self.stage or not _has_grads(opt):
                    continue
                if any(
                    id(p) in ids or (p.grad is not None and id(p.grad) in ids) for p in _params(opt)
                ):
                    self.scaler.unscale_(opt)
                    self.stage[id(opt)] = "unscaled"
        return given if isinstance(given, torch.Tensor) else items


def install(device: str) -> LossScaling:
    """A GradScaler on `device` ("cuda"; "cpu" in tests) switched on for the script's loop."""
    return LossScaling(device).install()
