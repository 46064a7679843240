"""What `torchpace doctor --follow` saw of the whole run: plain records, no torch import.

Built by runner/follow.py; the account is shown at the top of the report (report/), the rest is
read by the whole-run rules (grad-in-eval, loader-config, blocking-checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchpace.trace.stacks import SourceLocation

# How overlapping activities are counted once: the first in this order that is under way owns
# the moment; time no activity owns belongs to start-up, training steps or tear-down.
PRIORITY = ("gc", "torchpace", "compile", "checkpoint", "epoch-start", "evaluation")
RAN_TO_END = "the script ran to its end"  # how a run ended, when it did

PHASES = (
    "start-up",  # process start to the first step's first signal
    "compile",  # torch.compile compiling: the first compiles (in start-up or step 1), recompiles
    "training",  # steps, less the activities inside them
    "evaluation",
    "checkpoint",
    "epoch-start",  # iter(loader) to its first batch: workers started again
    "gc",
    "torchpace",  # the doctor's own: starting the profiler, writing its trace
    "unexplained",  # steps over SLOW_STEP x the running median that no activity explains: the excess
    "tear-down",  # last step to the script's end
)


@dataclass(frozen=True)
class AccountPhase:
    """One line of the account: where `seconds` of the run went, over `count` events."""

    name: str
    seconds: float
    count: int = 0  # steps, passes, saves, epochs started, pauses; 0 where not counted


@dataclass(frozen=True)
class SlowStep:
    """A step far slower than the running median, and what took its time."""

    step: int  # its number, counted from the run's first step (1)
    at_s: float  # when it ended, seconds after the process's start
    ms: float  # its wall time, the activities in it included
    median_ms: float  # the running median step then
    cause: str  # what the hooks or the profiled capture show took the time
    evidence: str = ""  # the figures behind the cause
    trace: str = ""  # the profiled capture's trace, where one was taken


@dataclass(frozen=True)
class Timeline:
    """The run's wall time by phase in equal bins from the process's start (a picture's data)."""

    bin_s: float
    bins: tuple[tuple[float, ...], ...]  # seconds per phase, in PHASES order, per bin


@dataclass(frozen=True)
class Projection:
    """The whole job's length, for a run stopped early (--epochs, --max-seconds)."""

    epoch_s: float  # one epoch's wall time, measured
    epochs: int | None  # the script's own epoch count, when found
    wall_s: float | None  # the whole job: start-up + epochs x epoch_s + tear-down
    method: str


@dataclass(frozen=True)
class RunAccount:
    """The whole run's wall time by phase; the phases partition it (they add up to `wall_s`)."""

    wall_s: float  # process start to the script's end
    phases: tuple[AccountPhase, ...]
    steps: int
    epochs: int  # the training loader's epochs ended (started, when none ended)
    ended: str = RAN_TO_END
    slow_steps: tuple[SlowStep, ...] = ()  # the slowest of them, in step order
    slow_seen: int = 0  # slow steps over the run (more than are kept)
    timeline: Timeline | None = None
    projection: Projection | None = None
    notes: tuple[str, ...] = ()  # captures that saw no slow step, and the like

    def seconds(self, name: str) -> float:
        """Seconds of one phase (0 when absent)."""
        return next((p.seconds for p in self.phases if p.name == name), 0.0)


@dataclass(frozen=True)
class EvalPasses:
    """Evaluation passes: batches of a loader that is not the training loader, or forwards of
    the model in eval mode, between training steps."""

    passes: int
    seconds: float
    grad_passes: int  # passes whose forwards recorded autograd graphs and ran no backward
    grad_seconds: float
    module: str = ""  # the model's class
    location: SourceLocation | None = None  # where the first pass with autograd on asked a batch
    grad_forwards: int = 0  # the model's forwards in those passes
    # One eval forward's time (ms) with autograd on and under no_grad, measured on a batch of
    # the run's own (runner/autograd_cost.py); None when it could not be measured, and why.
    forward_ms: tuple[float, float] | None = None
    forward_method: str = ""


@dataclass(frozen=True)
class Checkpoints:
    """torch.save calls over the run."""

    saves: int
    seconds: float
    bytes: int
    location: SourceLocation | None = None  # the user's line of the first save
    copy_bytes_per_s: float | None = None  # this machine's host memory copy rate (bytes/s)


@dataclass(frozen=True)
class WholeRun:
    """The followed run: its account and what the whole-run rules judge."""

    account: RunAccount
    epochs: int
    steps: int
    step_ms: float | None  # median step over the last steps kept (training time only)
    evaluation: EvalPasses | None = None
    checkpoints: Checkpoints | None = None
