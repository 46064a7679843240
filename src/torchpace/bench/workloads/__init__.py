"""Built-in benchmark workloads (`vision`, `text`) and user workloads loaded from a file."""

from __future__ import annotations

from torchpace.bench.workloads import text, user, vision
from torchpace.bench.workloads.base import Workload
from torchpace.errors import UsageError

BUILTIN = {"vision": vision.build, "text": text.build}
SIZES = ("tiny", "small", "full")


def get_workload(name: str, size: str = "small", seed: int = 0) -> Workload:
    """A built-in workload by name at a size, or a user workload from a path to a .py file."""
    if size not in SIZES:
        raise UsageError(f"unknown workload size {size!r}; choose one of {', '.join(SIZES)}")
    if name in BUILTIN:
        return BUILTIN[name](size, seed)
    return user.load(name)


__all__ = ["BUILTIN", "SIZES", "Workload", "get_workload"]
