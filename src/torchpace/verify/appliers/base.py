"""What every applier shares: the fix it switches on, the run it plans for, and itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from torchpace.doctor.finding import Finding

ENV_FIXES = "TORCHPACE_VERIFY_FIXES"  # the child's fixes, a JSON list of Fix.spec()
Params = Mapping[str, Any]  # JSON-ready: it travels to the child in an environment variable
# How a child says its fix cannot be applied to what the script does (the last line of its
# stderr): the parent reports the finding as needing a code change, never as a failed fix.
NOT_APPLICABLE = "not applicable here: "


@dataclass(frozen=True)
class Context:
    """What the plan needs to know of the run: its device, cores and arithmetic."""

    device: str = "unknown"  # "cpu", "cuda", "rocm", "mps", "unknown"
    cores: int | None = None
    compute_capability: tuple[int, int] | None = None
    cpu_bf16: str | None = None  # "amx", "avx512_bf16", "none"; None: unknown


@dataclass(frozen=True)
class Fix:
    """One fix to switch on in a child run: its applier, parameters and what it does to the math.

    Args:
        numerics: "" when the fix keeps the math (same precision, same results up to the order of
            floating-point sums); else what changes (precision, TF32, reproducibility). Only
            fixes that keep the math are switched on together as "all safe fixes".
    """

    applier: str
    label: str
    params: Params = field(default_factory=dict)
    numerics: str = ""

    def spec(self) -> dict[str, Any]:
        """What the child reads: the applier's name and its parameters."""
        return {"applier": self.applier, **self.params}


@dataclass(frozen=True)
class Applier:
    """A fix the verifier can apply: which findings it answers and how it switches itself on."""

    name: str
    plan: Callable[[Finding, Context], list[Fix] | None]  # None: not this applier's finding
    apply: Callable[[Params], None]  # in the child, torch imported, before the script runs


class NotApplicable(RuntimeError):
    """Raised inside the script where a fix cannot be applied without wrong math (the run stops)."""


# The child's refusals: one process is one run of one arm, so this list lives as long as the run.
_refusals: list[str] = []


def refuse(why: str) -> NoReturn:
    """Stop the run: the fix cannot be applied to what the script does; the child reports `why`
    even if the script catches the exception."""
    _refusals.append(why)
    raise NotApplicable(f"torchpace --verify: {NOT_APPLICABLE}{why}")


def refusal() -> str | None:
    """Why this run's fix was refused (the first reason), or None."""
    return _refusals[0] if _refusals else None


def forget_refusals() -> None:
    """Clear the refusals (tests apply fixes in one process, one after another)."""
    _refusals.clear()
