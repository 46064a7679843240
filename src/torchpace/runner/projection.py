"""The whole job's length for a followed run stopped early (--epochs, --max-seconds, SIGTERM).

One epoch's wall time is measured: the last whole epoch (from one end of the training loader to
the next: its steps, evaluation, checkpoint and loader start) when two ended, else the time since
the first step over the epochs done (the current one counted by its batches over len(loader)), less
torchpace's own time. The script's epoch count is read from its own variables at its first
optimizer step: the nearest frame of the stack with a local, or an attribute of an `args`-like
object, named like an epoch count (timm's `args.epochs`, Lightning's `max_epochs`, a script's
`EPOCHS`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from torchpace.runner.sensors.whole_run import Projection, RunAccount

EPOCH_NAMES = ("epochs", "num_epochs", "n_epochs", "max_epochs", "num_train_epochs", "total_epochs")
HOLDERS = ("args", "cfg", "config", "opt", "opts", "hparams", "trainer", "self")
_OWN = ("torchpace", "/torch/", "\\torch\\")


def script_epochs() -> tuple[int, str] | None:
    """The script's epoch count and where it was read, from the caller's stack (None: unknown)."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        where = frame.f_code.co_filename
        if not any(part in where for part in _OWN):
            main = frame.f_globals.get("__name__") == "__main__"
            found = _epochs_in(frame.f_locals) or (_epochs_in(frame.f_globals) if main else None)
            if found is not None:
                name, value = found
                at = f"{frame.f_code.co_name}() ({where}:{frame.f_lineno})"
                return value, f"the script's {name} = {value} in {at}"
        frame = frame.f_back
    return None


def _epochs_in(scope: dict[str, Any]) -> tuple[str, int] | None:
    for name in EPOCH_NAMES:
        for key in (name, name.upper()):
            value = scope.get(key)
            if _count(value):
                return key, int(value)
    for holder in HOLDERS:
        obj = scope.get(holder)
        for name in EPOCH_NAMES if obj is not None else ():
            value = getattr(obj, name, None) if not isinstance(obj, dict) else obj.get(name)
            if _count(value):
                return f"{holder}.{name}", int(value)
    return None


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1_000_000


@dataclass
class EpochClock:
    """The training loader's epochs on the clock: what a projection needs, a few numbers."""

    first_step: float | None = None
    ends: list[float] = field(default_factory=list)  # the last two ends of the training loader
    ended: int = 0  # the training loader's ends
    batches: int = 0  # training batches since the last end
    length: int | None = None  # len(training loader)
    script_epochs: tuple[int, str] | None = None
    searched: bool = False  # the stack was read (once)

    def epoch_ended(self, now: float, length: int | None) -> None:
        self.ends = [*self.ends[-1:], now]
        self.ended += 1
        self.batches = 0
        self.length = length if length else self.length

    def project(self, account: RunAccount, now: float) -> Projection | None:
        """The whole job's length, with its method; None before the first step."""
        epoch_s, how = self._epoch_s(account, now)
        if epoch_s is None:
            return None
        fixed = account.seconds("start-up") + account.seconds("tear-down")
        if self.script_epochs is None:
            return Projection(epoch_s, None, None, f"{how}; the script's epoch count was not found")
        n, where = self.script_epochs
        method = f"start-up + {n} epochs x {epoch_s:.1f} s + tear-down; one epoch: {how}; {where}"
        return Projection(epoch_s, n, fixed + n * epoch_s, method)

    def _epoch_s(self, account: RunAccount, now: float) -> tuple[float | None, str]:
        if len(self.ends) == 2:
            return self.ends[1] - self.ends[0], "the last whole epoch (training loader end to end)"
        if self.first_step is None:
            return None, ""
        done = float(self.ended)
        if self.length and self.batches:
            done += min(1.0, self.batches / self.length)
        if not done:
            return None, ""
        spent = now - self.first_step - account.seconds("torchpace") - account.seconds("tear-down")
        return spent / done, (
            f"the time since the first step, less torchpace's own, over {done:.2f} epoch(s) done "
            "(the current one by its batches over len(loader))"
        )
