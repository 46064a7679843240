"""What the training-framework callbacks share: a profiled window of steps and its report, and the
throughput figures they hand to the framework's logger.

Like `cli/`, this is an application of the library (it renders reports), not a part of it. Nothing
here raises into the training loop: a run must never fail because of its profiler. A failure is
warned about once and the window is given up; bad arguments are the only errors, at construction.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import torch

from torchpace.data._tree import iter_tensors
from torchpace.monitor.throughput import Count, Throughput, ThroughputStats
from torchpace.policy.window import check_window


class ProfileWindow:
    """Profile steps `warmup + 1` to `warmup + steps` of a training loop, then write the report.

    Call `begin()` when training starts, `step_end()` after every optimizer step and `finish()`
    when training ends (a window cut short still gets its report). The trace goes to
    `out_dir/rank<R>.pt.trace.json`; rank 0 writes `report` there too (format from its extension:
    .txt, .md, .json or .html), titled `title`, with the rules `only`, `ignore` and `thresholds`
    choose (as `torchpace analyze` takes them).
    """

    def __init__(
        self,
        *,
        warmup: int = 5,
        steps: int = 10,
        out_dir: str | Path | None = None,
        report: str = "report.md",
        title: str = "",
        only: Collection[str] | None = None,
        ignore: Collection[str] | None = None,
        thresholds: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        check_window(warmup, steps)
        from torchpace.doctor.registry import check_choice
        from torchpace.errors import UsageError
        from torchpace.report import choose_format

        check_choice(only, ignore, thresholds)  # a ValueError naming what is wrong, now

        try:
            self.format = choose_format(report, None)
        except UsageError as exc:  # an unknown extension: said now, not after the window
            raise ValueError(str(exc)) from None
        self.warmup, self.steps = warmup, steps
        self.out_dir = Path(out_dir or Path("torchpace-out") / time.strftime("%Y%m%d-%H%M%S"))
        self.report_name, self.title = report, title
        self.only, self.ignore, self.thresholds = only, ignore, thresholds
        self.rank, self.writes_report = 0, True
        self.completed = 0  # training steps seen
        self.profiled = 0  # steps inside the window so far
        self.report_path: Path | None = None  # set once written
        self._prof: Any = None
        self._done = False

    def begin(self, *, rank: int = 0, writes_report: bool = True) -> None:
        """Training starts; with no warm-up the window opens now."""
        self.rank, self.writes_report = rank, writes_report
        if self.warmup == 0:
            self._start()

    @property
    def active(self) -> bool:
        """Whether the profiler is recording (step times then carry its overhead)."""
        return self._prof is not None

    def step_end(self) -> bool:
        """One optimizer step ended: open the window, mark a step in it, or close it.

        Returns whether the window opened or closed here: throughput measured across that point
        mixes profiled and plain steps (and the time the report took).
        """
        self.completed += 1
        if self._prof is None:
            if not self._done and self.completed == self.warmup:
                self._start()
                return True
            return False
        self.profiled += 1
        if self.profiled >= self.steps:
            self.finish()
            return True
        self._guard(self._prof.step)  # closes ProfilerStep#k, opens the next
        return False

    def finish(self) -> None:
        """Close the window if it is open: stop profiling, export the trace, write the report."""
        prof, self._prof, self._done = self._prof, None, True
        if prof is None:
            return
        trace = self.out_dir / f"rank{self.rank}.pt.trace.json"
        if not self._guard(prof.stop) or not self._guard(self._export, prof, trace):
            return
        if self.writes_report and self.profiled > 0:
            self._guard(self._write_report, trace)

    def _start(self) -> None:
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        # The same recording as `torchpace doctor`: shapes, memory and stacks for the rules. A
        # schedule (always record) is what makes step() write the ProfilerStep#N markers.
        prof = profile(
            activities=activities,
            schedule=lambda step: ProfilerAction.RECORD,
            record_shapes=True,
            profile_memory=True,
            with_stack=True,
        )
        if self._guard(prof.start):  # another profiler already running: warned, given up
            self._prof = prof
        else:
            self._done = True

    def _export(self, prof: Any, trace: Path) -> None:
        trace.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace))

    def _write_report(self, trace: Path) -> None:
        from torchpace.analysis import analyze
        from torchpace.doctor.recording import Recording
        from torchpace.report import render

        found = analyze(
            trace,
            only=self.only,
            ignore=self.ignore,
            thresholds=self.thresholds,
            top=self.format == "html",
            jobs=1,  # decoded in this process: the training run's cores are not ours to take
            # The callback owns the profiler as the doctor does: no advice to change its options.
            recording=Recording(self.title),
        )
        text = render(found, self.format)
        path = self.out_dir / self.report_name
        path.write_text(text, encoding="utf-8")
        self.report_path = path

    def _guard(self, fn: Any, *args: Any) -> bool:
        try:
            fn(*args)
        except Exception as exc:  # the training run matters more than its profile
            warnings.warn(
                f"torchpace: profiling stopped ({type(exc).__name__}: {exc}); training goes on "
                "without the report",
                RuntimeWarning,
                stacklevel=2,
            )
            self._prof, self._done = None, True
            return False
        return True


def count_batch(batch: Any) -> tuple[Count, Count | None]:
    """(samples, tokens) in a batch: the first tensor's length, and the attention mask's sum (or
    the input ids' count) for text batches; tokens stay on the device (no sync)."""
    if isinstance(batch, Mapping):
        mask, ids = batch.get("attention_mask"), batch.get("input_ids")
        if isinstance(mask, torch.Tensor):
            return mask.shape[0], mask.sum()
        if isinstance(ids, torch.Tensor):
            return ids.shape[0], ids.numel()
    first = next(iter_tensors(batch), None)
    samples = first.shape[0] if first is not None and first.dim() > 0 else 1
    return samples, None


def metrics(stats: ThroughputStats | None, prefix: str = "torchpace/") -> dict[str, float]:
    """The throughput figures worth logging, by name (those not measured are left out)."""
    if stats is None:
        return {}
    values = {
        "samples_per_s": stats.samples_per_s,
        "tokens_per_s": stats.tokens_per_s,
        "step_ms": stats.step_ms,
        "data_wait_fraction": stats.data_wait_fraction,
        "mfu": stats.mfu,
    }
    return {f"{prefix}{k}": float(v) for k, v in values.items() if v is not None}


class WindowCallback:
    """What both framework callbacks hold: the window, the throughput meter, the data wait.

    Args:
        warmup: steps run before the profiled window opens.
        steps: steps profiled.
        report: the report's file name inside `out_dir` (.md, .txt, .json or .html).
        out_dir: where the trace and the report go (default ./torchpace-out/<time>/).
        flops_per_step: FLOPs of one optimizer step (torchpace.monitor.count_flops), for MFU.
        only, ignore, thresholds: which rules run and their thresholds, as `torchpace analyze`.
    """

    def __init__(
        self,
        *,
        warmup: int = 5,
        steps: int = 10,
        report: str = "report.md",
        out_dir: str | Path | None = None,
        flops_per_step: float | None = None,
        only: Collection[str] | None = None,
        ignore: Collection[str] | None = None,
        thresholds: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        super().__init__()  # the framework's callback class, next in the subclass's bases
        self.window = ProfileWindow(
            warmup=warmup,
            steps=steps,
            out_dir=out_dir,
            report=report,
            only=only,
            ignore=ignore,
            thresholds=thresholds,
        )
        self.flops_per_step = flops_per_step
        self.meter: Throughput | None = None
        self._free_since: float | None = None  # when the last step ended: the data wait begins

    @property
    def report_path(self) -> Path | None:
        """The report, once written (rank 0 only)."""
        return self.window.report_path

    def _begin(self, device: Any, title: str, steps: str, rank: int, writes_report: bool) -> None:
        """Training starts: the meter on `device`, the report titled "`title`, `steps` 6-15", and
        the window open now if there is no warm-up."""
        self.meter = Throughput(device=device, flops_per_step=self.flops_per_step)
        first = self.window.warmup + 1
        self.window.title = f"{title}, {steps} {first}-{first + self.window.steps - 1}"
        self.window.begin(rank=rank, writes_report=writes_report)

    def _wait_ends(self) -> None:
        """A step begins: the time since the last one ended was spent waiting for its data."""
        if self.meter is not None and self._free_since is not None:
            self.meter.add_wait(self.meter.clock() - self._free_since)

    def _wait_begins(self) -> None:
        """A step ended (or work that is not data wait did: evaluation, a checkpoint)."""
        if self.meter is not None:
            self._free_since = self.meter.clock()
