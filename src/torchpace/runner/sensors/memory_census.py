"""What the training state holds, tensor by tensor: parameters, gradients, optimizer state,
buffers, activations saved for backward, and any other tensor alive.

One pass over the garbage collector's objects (tensors, modules and optimizers are all tracked by
it) names every live storage once, by its address: the same address the profiler's `[memory]`
events and the CUDA allocator's snapshot give a block, so the memory view can say what each block
of a step's peak was. Activations saved for backward are held by autograd's C++ nodes, which the
collector does not see: they are found by walking the graphs of the tensors that have one.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, compress, repeat
from typing import Any

from torchpace.policy.memory import CATEGORIES, Category

_SAVED = "_saved_"


@dataclass(frozen=True)
class HeldBlock:
    """One live storage: its address, size, what it is and a name a user recognises."""

    addr: int
    bytes: int
    category: Category
    name: str  # "h.0.attn.weight", "exp_avg of h.0.attn.weight", "saved by AddmmBackward0"
    dtype: str = ""  # "float32": activations in fp32 are what bf16 autocast would halve
    shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class Census:
    """Every live storage on one device type, once each (largest first)."""

    device: str  # "cpu" or "cuda"
    blocks: tuple[HeldBlock, ...]
    # A graph kept alive at a step boundary (`losses.append(loss)`): its root's name and the
    # bytes its saved tensors hold; empty when no graph outlived its step.
    kept_graphs: tuple[tuple[str, int], ...] = ()

    def bytes_of(self, category: Category) -> int:
        """Bytes held by one category."""
        return sum(b.bytes for b in self.blocks if b.category == category)

    def by_category(self) -> dict[Category, int]:
        """Bytes per category, every category present (0 when none)."""
        return {c: self.bytes_of(c) for c in CATEGORIES}


def _storage(t: Any) -> tuple[int, int] | None:
    """(address, bytes) of a tensor's storage; None for one without (meta, sparse, subclasses).
    torch.compile's fake tensors hold none, and asking warns on the user's stderr (nanoGPT with
    compile=True under the doctor: "Accessing the data pointer of FakeTensor is deprecated")."""
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    if fake is not None and isinstance(t, fake.FakeTensor):
        return None
    try:
        s = t.untyped_storage()
        return int(s.data_ptr()), int(s.nbytes())
    except Exception:  # fake, functional or sparse tensors have no plain storage to count
        return None


def _device_of(t: Any) -> str:
    try:
        return str(t.device.type)
    except Exception:
        return ""


class _Namer:
    """Collects storages in priority order: the first category that names one keeps it."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.blocks: dict[int, HeldBlock] = {}

    def add(self, t: Any, category: Category, name: str) -> None:
        if _device_of(t) != self.device:
            return
        found = _storage(t)
        if found is None or found[0] == 0 or found[0] in self.blocks:
            return
        addr, size = found
        dtype = str(getattr(t, "dtype", "")).removeprefix("torch.")
        self.blocks[addr] = HeldBlock(addr, size, category, name, dtype, tuple(t.shape))


def _roots(modules: list[Any]) -> list[Any]:
    """The modules no other module holds as a child (the models), largest first."""
    children = {id(c) for m in modules for c in m.children()}
    roots = [m for m in modules if id(m) not in children]
    return sorted(roots, key=lambda m: -sum(p.numel() for p in m.parameters()))


def _model_state(namer: _Namer, roots: list[Any]) -> dict[int, str]:
    """Parameters, their gradients and buffers; returns each parameter's name by id."""
    names: dict[int, str] = {}
    for root in roots:
        for name, p in root.named_parameters():
            names.setdefault(id(p), name)
            namer.add(p, "parameters", name)
        for name, b in root.named_buffers():
            namer.add(b, "buffers", name)
    for root in roots:
        for name, p in root.named_parameters():
            if p.grad is not None:
                namer.add(p.grad, "gradients", f"grad of {name}")
    return names


def _optimizer_state(namer: _Namer, optimizers: list[Any], names: dict[int, str]) -> None:
    import torch

    for opt in optimizers:
        for p, state in getattr(opt, "state", {}).items():
            if p.grad is not None:  # a parameter only the optimizer knows (no model found)
                namer.add(p.grad, "gradients", f"grad of {names.get(id(p), 'a parameter')}")
            for key, value in state.items() if isinstance(state, dict) else ():
                if isinstance(value, torch.Tensor):
                    namer.add(value, "optimizer state", f"{key} of {names.get(id(p), 'a param')}")


def saved_tensors(roots: Iterable[Any]) -> Iterator[tuple[Any, str]]:
    """(tensor, node name) for every tensor the autograd graphs below `roots` saved for backward."""
    seen: set[int] = set()
    stack = [r for r in roots if r is not None]
    attrs: dict[type, list[str]] = {}  # a node class's saved slots, read once per class
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        kind = type(node)
        if kind not in attrs:
            attrs[kind] = [a for a in dir(node) if a.startswith(_SAVED)]
        for attr in attrs[kind]:
            try:
                value = getattr(node, attr)
            except Exception:  # freed by a backward already run (retain_graph=False)
                continue
            for item in value if isinstance(value, tuple | list) else (value,):
                if hasattr(item, "untyped_storage"):
                    yield item, node.name()
        stack.extend(n for n, _ in getattr(node, "next_functions", ()) if n is not None)


def live_objects(kinds: tuple[type, ...]) -> list[Any]:
    """The live objects of `kinds` (or their subclasses), from gc, picked inside one C call.

    gc's list of every object also holds any tuple another thread is still building
    (`tuple(genexpr)`), whose final resize fails while a second reference exists: a DataLoader's
    prefetch thread died with "SystemError: Objects/tupleobject.c:927: bad argument to internal
    function". So the list must be gone before any bytecode runs again (only bytecode lets another
    thread in): it is made, read and freed by the C iterators below, which see each object twice
    (the copy `compress` keeps, and the copy whose type it tests) instead of buffering it as
    `tee` would (tee's first buffer is in the list it buffers: a cycle that outlived the call).
    The collector waits meanwhile: a finalizer it ran would be bytecode. Reproduced without torch:
    a thread building tuples died within 1-154 calls of the former pick; with this, none in 418."""
    ids = set(map(id, _subclasses(kinds)))
    collecting = gc.isenabled()
    gc.disable()
    try:
        objects = chain.from_iterable(map(gc.get_objects, (None,)))
        twice = chain.from_iterable(map(repeat, objects, repeat(2)))
        return list(compress(twice, map(ids.__contains__, map(id, map(type, twice)))))
    finally:
        if collecting:
            gc.enable()


def _subclasses(kinds: tuple[type, ...]) -> set[type]:
    """`kinds` and every class derived from them (what `issubclass` answers, without reading
    each live object's type)."""
    seen: set[type] = set()
    stack = list(kinds)
    while stack:
        kind = stack.pop()
        if kind not in seen:
            seen.add(kind)
            stack.extend(type.__subclasses__(kind))
    return seen


# complex: one pass over gc's objects, naming storages in the order names take precedence (model,
# optimizer, graphs, the rest).
def take_census(device: str, *, step_boundary: bool = False) -> Census:
    """Every live storage on `device` ("cpu"/"cuda"), named by what holds it.

    At a step boundary (`step_boundary`), any autograd graph still alive outlived its step: its
    root tensors and their saved bytes are listed as kept graphs."""
    import torch

    picked = live_objects((torch.Tensor, torch.nn.Module, torch.optim.Optimizer))
    tensors: list[Any] = [o for o in picked if isinstance(o, torch.Tensor)]
    roots = _roots([o for o in picked if isinstance(o, torch.nn.Module)])
    optimizers = [o for o in picked if isinstance(o, torch.optim.Optimizer)]
    namer = _Namer(device)
    names = _model_state(namer, roots)
    _optimizer_state(namer, optimizers, names)
    graphs = [t for t in tensors if getattr(t, "grad_fn", None) is not None]
    kept = _kept_graphs(namer, graphs) if step_boundary else ()
    for t, node in saved_tensors(t.grad_fn for t in graphs):
        namer.add(t, "activations", f"saved by {node}")
    for t in graphs:  # a forward's results still referenced (by the forward running, mid-step)
        namer.add(t, "activations", f"output of {type(t.grad_fn).__name__}")
    for t in tensors:
        namer.add(t, "other", "tensor")
    blocks = sorted(namer.blocks.values(), key=lambda b: -b.bytes)
    return Census(device, tuple(blocks), kept)


def _kept_graphs(namer: _Namer, graphs: list[Any]) -> tuple[tuple[str, int], ...]:
    """Graphs alive at a step boundary, each root's saved bytes (not yet named elsewhere)."""
    out = []
    for t in graphs:
        seen = {}
        for saved, _ in saved_tensors([t.grad_fn]):
            found = _storage(saved)
            if found is not None and found[0] not in namer.blocks:
                seen[found[0]] = found[1]
        out.append((f"{type(t.grad_fn).__name__} output {tuple(t.shape)}", sum(seen.values())))
    return tuple(sorted(out, key=lambda x: -x[1])[:5])
