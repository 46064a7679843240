"""Checkpoints saved with torch.save in the training loop: the steps wait for every save."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.whole_run import Checkpoints

# Saves that, spread over the run's steps, cost under this share of a step are not reported.
MIN_SAVING_SHARE = 0.01
METHOD = (
    "the measured time of each torch.save, less the copy of its bytes to host memory that a "
    "background save still makes in the loop (this machine's copy rate, measured once), spread "
    "over the run's training steps"
)
# A checkpoint nests its tensors ({"model": model.state_dict(), "optimizer": ...}: torchvision's
# reference, the smell script): the copy walks dicts, lists and tuples (a test runs this code).
FIX = """\
import threading

def host_copy(obj):  # what the thread writes: the loop may change the tensors meanwhile
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: host_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [host_copy(v) for v in obj] if isinstance(obj, list) else tuple(map(host_copy, obj))
    return obj

def save_in_background(state, path):  # the loop waits only for the host copy
    thread = threading.Thread(target=torch.save, args=(host_copy(state), path))
    thread.start()
    return thread  # join() it before the next save and at the end
# or, with torch.distributed.checkpoint: dcp.async_save(state_dict, checkpoint_id=path)"""


def _copy_ms(c: Checkpoints) -> float:
    """What one save still costs in the loop from a background thread: copying its bytes."""
    if not c.copy_bytes_per_s:
        return 0.0
    return c.bytes / c.saves / c.copy_bytes_per_s * 1000.0


@rule("blocking-checkpoint", input="live")
def blocking_checkpoint(
    live: Inspection, *, min_saving_share: float = MIN_SAVING_SHARE
) -> list[Finding]:
    """Flag torch.save calls the training loop waits for, with their cost per epoch and run."""
    whole = live.whole_run
    if whole is None:
        raise NotApplicable("only a followed run sees its checkpoint saves", "run with --follow")
    c = whole.checkpoints
    if c is None or not whole.steps:
        return []
    per_save_ms = c.seconds * 1000.0 / c.saves
    saving_ms = max(0.0, per_save_ms - _copy_ms(c)) * c.saves / whole.steps
    if whole.step_ms and saving_ms < min_saving_share * whole.step_ms:
        return []
    epochs = max(1, whole.epochs)
    per_epoch_s = c.seconds / epochs
    return [
        Finding(
            rule="blocking-checkpoint",
            severity=Severity.MEDIUM,
            summary=f"{c.saves} torch.save checkpoint(s) block the training loop: "
            f"{per_save_ms:.0f} ms each, {per_epoch_s:.2f} s per epoch, {c.seconds:.1f} s over "
            "the run",
            evidence={
                "saves": c.saves,
                "save_ms": round(per_save_ms, 1),
                "saves_per_epoch": round(c.saves / epochs, 2),
                "checkpoint_ms_per_epoch": round(per_epoch_s * 1000.0, 1),
                "checkpoint_ms_per_run": round(c.seconds * 1000.0, 1),
                "bytes_per_save": c.bytes // c.saves,
                "host_copy_ms_per_save": round(_copy_ms(c), 1),
                "epochs": whole.epochs,
            },
            fix=FIX,
            saving_ms=round(saving_ms, 3),
            saving_method=METHOD,
            locations=(c.location,) if c.location is not None else (),
            caveat="A save the script must finish before going on (its last one, or one it "
            "reads back at once) gains nothing from a thread; keep one save in flight at a time.",
        )
    ]
