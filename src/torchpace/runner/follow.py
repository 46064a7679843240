"""`torchpace doctor --follow`: a light watch of the whole run, and its account by phase.

Every moment from the process's start to the script's end is counted once (runner/sensors/
whole_run.py: PRIORITY): activities are intervals opened and closed by cheap hooks (an eval pass,
a torch.save, iter(loader) to its first batch, a GC pause, the doctor's own trace writing), and
time none of them owns is start-up, a training step or tear-down. The ledger adds each stretch to
one running total as it passes, so memory stays flat however long the run: per-step figures go
to a bounded ring buffer (the running median that slow steps are judged against).
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import sys
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from torchpace.runner import autograd_cost, projection
from torchpace.runner.capture_reading import read_captures
from torchpace.runner.ledger import Ledger
from torchpace.runner.patching import Patcher, user_location
from torchpace.runner.saves import copy_rate, tell, written
from torchpace.runner.sensors.compile import recompile_guards
from torchpace.runner.sensors.whole_run import (
    PHASES,
    RAN_TO_END,
    AccountPhase,
    Checkpoints,
    EvalPasses,
    RunAccount,
    WholeRun,
)
from torchpace.runner.slow_steps import RESTARTED, SlowSteps
from torchpace.trace.stacks import SourceLocation

RING = 2048  # per-step figures kept (the running median's window)
MIN_STEPS_FOR_SLOW = 8  # steps kept before any step is judged slow
RECENT = 16  # the last steps a slow step is also judged against (`_recent_median`)
MEDIAN_EVERY = 256  # steps between refreshes of the running median (and at 8, 16, 32, 64...)
# A pass in eval mode before any optimizer step or loader (start-up): nanoGPT's estimate_loss at
# iteration 0 (40 forwards of hand-sliced batches, then model.train()) is an evaluation; a shape
# probe of one forward is start-up.
PROBE = "before training"
TRAIN_DATA = "training loader"  # an eval pass over the training loader's batches (batch())
STEADY = frozenset(("timed", "done", "aside"))  # the session's phases whose steps are judged


def process_start() -> float:
    """The process's start on time.perf_counter()'s clock (Linux /proc); now where unreadable."""
    now = time.perf_counter()
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # s after boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - age if 0 <= age < 86400 * 365 else now


def _forward_interval(opened: dict[str, Any]) -> float | None:
    """The mean time from one of a pass's forwards to the next (s); None under two."""
    n = opened["forwards"]
    return (opened["last"] - opened["t"]) / (n - 1) if n > 1 else None


def _restarted_workers(record: Any) -> bool:
    """Whether a loader's epoch started its workers again (not its first epoch's start)."""
    static = record.static
    return (
        bool(static.num_workers) and not static.persistent_workers and len(record.first_batch_s) > 1
    )


def _no_evaluation(opened: dict[str, Any]) -> bool:
    """A pass that evaluated nothing: one forward before training (a probe: start-up), or the
    training loader's batch read with the model still in eval mode and no forward before
    training resumed (HF Trainer reads the next batch before training_step's model.train():
    each evaluation counted twice)."""
    if opened["how"] == PROBE:
        return opened["forwards"] < 2
    return opened["how"] == TRAIN_DATA and opened["hooked"] and not opened["forwards"]


class Follow:
    """The hooks' side of --follow: classify batches, forwards and saves; keep the ledger."""

    def __init__(self, out_dir: Path | None = None, rank: int | None = None) -> None:
        self.ledger = Ledger(process_start())
        self.slow = SlowSteps(out_dir, self.own, rank)
        self.clock = projection.EpochClock()
        # The model and one eval batch it ran with autograd on, kept to the script's end (the
        # script's namespace may be gone by then): autograd_cost.py times it both ways.
        self._eval_input: tuple[Any, Any, Any] | None = None
        self._hook: Any = None
        self.inert = False  # a forked child
        self.steps = array("d", bytes(8 * RING))  # a ring: training seconds of the last steps
        self._kept = 0  # steps kept in the ring over the run
        self._refresh_at = MIN_STEPS_FOR_SLOW  # steps kept at the next refresh of the median
        self._median = 0.0  # of the ring, seconds (refreshed as steps are kept)
        self._slow_s = math.inf  # a step's wall time above which it may be slow
        # The training loader's record: of the loaders whose batches an optimizer step
        # followed, the one it followed most often (its count; the others' by id(record)).
        self.train: Any = None
        self.train_votes = 0
        self.votes: dict[int, int] = {}
        # Another loader's steps in a row: (its id, how many, train_votes when they began).
        self._run: tuple[int, int, int] = (0, 0, 0)
        self.stepped = False  # an optimizer has stepped (eval-mode forwards then evaluate)
        self.trains_in_eval = False  # a backward followed an eval-mode forward (training_signal)
        self.model_eval = False  # the model, once found, is in eval mode (Module.train watched)
        self.epochs = 0  # the training loader's epochs ended
        self._train_open = False  # a training batch came since its last epoch ended
        self._steps_at_epoch_end = 0  # the ledger's steps when the last epoch ended
        self.started_iters = 0
        self._last_record: Any = None
        self._opening: set[int] = set()  # iterators between iter() and their first batch
        # The step under way began an epoch whose loader's workers started again: the cause of
        # its excess when slow (SlowSteps.judge). Read at its end.
        self._restarted = ""
        self.eval_pass: dict[str, Any] | None = None  # the eval pass under way
        self.resumable = False  # an eval pass just ended with its loader: a forward goes on
        self._interval: float | None = None  # between the forwards of the last closed pass (s)
        self._eval_totals = {
            "passes": 0, "seconds": 0.0, "grad_passes": 0, "grad_seconds": 0.0, "grad_forwards": 0
        }  # fmt: skip
        self._eval_where: SourceLocation | None = None
        self.module = ""
        self._saves = {"saves": 0, "seconds": 0.0, "bytes": 0}
        self._save_where: SourceLocation | None = None
        self._gc: tuple[float, str] | None = None
        self._gc_full = [0, 0.0]  # full collections (generation 2): count, seconds
        self._root_hook: Any = None
        self._model: Callable[[], Any] = lambda: None  # the model, once found (a weak reference)
        self._model_ids: set[int] = set()
        self._compiles: Any = None  # dynamo's callback handler, once listened to
        self._grad_on: Callable[[], bool] = bool  # torch's, once the model is found
        self._inference: Callable[[], bool] = bool
        self.profiling = False  # the session's profiled window runs (its steps are not judged)
        # --epochs N: the script stops as the training loader starts epoch N+1 (its iter() or
        # first batch), so epoch N's evaluation and checkpoint, which follow its last batch, count.
        self.epoch_limit: int | None = None
        self.on_limit: Callable[[], None] | None = None  # the session's stop: raises StopScript
        self._facts: WholeRun | None = None

    # --- installing ----------------------------------------------------------------------------
    def install(self, patcher: Patcher, inspector: Any) -> None:
        """Wrap torch.save, listen to the collector, to iter(loader) and to torch.compile (the
        inspector's sensors), find the model."""
        import torch
        import torch.serialization
        from torch.nn.modules.module import register_module_forward_pre_hook

        patcher.wrap(torch, "save", self._wrap_save)
        patcher.wrap(torch.serialization, "save", self._wrap_save)
        patcher.wrap(torch.nn.Module, "train", self._wrap_train)
        told = inspector.flags.on_compile  # the script calls torch.compile

        def compiling(compiled: Any) -> None:
            if told is not None:
                told(compiled)
            self.watch_compiles(load=True)
            if isinstance(compiled, torch.nn.Module):
                # The model, found now: the global hook that would find it at its first call
                # made torch warn the user of global hooks on a compiled module.
                self._first_module(compiled, ())

        inspector.flags.on_compile = compiling
        self.watch_compiles()
        gc.callbacks.append(self._on_gc)
        inspector.loader.on_iter = self.iter_started
        inspector.loader.before_iter = self.next_epoch
        self._root_hook = register_module_forward_pre_hook(self._first_module)

    def uninstall(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        handler, self._compiles = self._compiles, None
        if handler is not None:
            with contextlib.suppress(ValueError):
                handler.remove_start_callback(self._compile_started)
                handler.remove_end_callback(self._compile_ended)
        self._drop_root_hook()
        hook, self._hook = self._hook, None
        if hook is not None:
            hook.remove()
        self.slow.close()

    def owns(self, prof: Any) -> bool:
        """Whether a profiler object is a slow-step capture's."""
        return self.slow.owns(prof)

    def _drop_root_hook(self) -> None:
        hook, self._root_hook = self._root_hook, None
        if hook is not None:
            hook.remove()

    def _first_module(self, module: Any, args: Any) -> None:
        """The first module called is the model (its forward calls the others): watch its
        forwards alone (a global hook would slow every submodule call), and only while it is
        in eval mode (a module with a hook takes torch's slower call path: ~1.5 us a forward).
        One without parameters is not the model: torchvision's transforms are modules, and
        MNIST's Normalize, called as the first batch was read in the main process, was taken
        for ignite's model: its evaluations went unseen (ignite's mnist_save_resume_engine.py)."""
        import torch

        if next(iter(module.parameters()), None) is None:
            return  # a transform, a loss: wait for the model
        self._drop_root_hook()
        self.watch_compiles()  # a model compiled without torch.compile (torch._dynamo.optimize)
        self.module = type(module).__name__
        self._grad_on, self._inference = torch.is_grad_enabled, torch.is_inference_mode_enabled
        # torch.compile's wrapper and the module it compiled: either one's train()/eval() counts
        self._model_ids = {id(module), id(getattr(module, "_orig_mod", module))}
        try:
            self._model = weakref.ref(module)
        except TypeError:  # no weak references: hooked for good, whatever its mode
            with contextlib.suppress(Exception):
                self._hook = module.register_forward_pre_hook(self._forward, with_kwargs=True)
            return
        self._mode_set()

    def _mode_set(self) -> None:
        """The model went to train or eval mode (Module.train, patched): hook its forwards in
        eval mode, none in training. Back in training mode, an evaluation under way is over:
        nanoGPT's estimate_loss slices its own batches (no DataLoader to end the pass), and the
        next step's backward read its pass as a model trained in eval mode, so every later
        evaluation counted as training."""
        model = self._model()
        if model is None:
            return
        self.resumable = False
        self.model_eval = not model.training
        if not model.training:
            if self._hook is None:
                with contextlib.suppress(Exception):
                    self._hook = model.register_forward_pre_hook(self._forward, with_kwargs=True)
            return
        if self._hook is not None:
            hook, self._hook = self._hook, None
            hook.remove()
        if self.eval_pass is not None:
            self._close_eval()

    def _wrap_train(self, original: Any) -> Any:
        follow = self

        def train(module: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(module, *args, **kwargs)
            if id(module) in follow._model_ids:
                follow._mode_set()
            return out

        return train

    def watch_compiles(self, *, load: bool = False) -> None:
        """Count torch.compile's compiling as its own phase, from dynamo's callbacks around each
        compile (the outermost: a compile inside another is one). Once dynamo is imported, or
        `load`: the script calls torch.compile, which imports it (a script that never compiles
        would pay a second for the import)."""
        if self._compiles is not None or not (load or "torch._dynamo" in sys.modules):
            return
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:  # a torch without compile callbacks: compiling stays in its phase
            return
        callback_handler.register_start_callback(self._compile_started)
        callback_handler.register_end_callback(self._compile_ended)
        self._compiles = callback_handler

    def _compile_started(self, args: Any) -> None:
        if not self.inert:
            self.ledger.enter("compile", time.perf_counter())

    def _compile_ended(self, args: Any) -> None:
        if not self.inert:
            self.ledger.leave("compile", time.perf_counter())

    # --- hooks ---------------------------------------------------------------------------------
    def signal(self) -> None:
        """An optimizer step, batch or backward call (the first one starts the first step)."""
        if self.ledger.base == "start-up":
            now = time.perf_counter()
            self.ledger.first_signal(now)
            self.clock.first_step = now

    def iter_started(self, it: Any, started: float) -> None:
        if self.inert:
            return
        self.started_iters += 1
        self._opening.add(id(it))
        self.ledger.enter("epoch-start", started)

    def first_batch(self, it: Any, record: Any = None) -> None:
        """The iterator's first batch came (or none did): its epoch has started."""
        if id(it) in self._opening:
            self._opening.discard(id(it))
            self.ledger.leave("epoch-start", time.perf_counter())
            if record is not None and _restarted_workers(record):
                self._restarted = RESTARTED

    def first_step_extra(self, seconds: float) -> None:
        """How much longer a restarted epoch's first step took than its second (the loader
        sensor's measure, runner/sensors/loader.py): the epoch's start, not training. An
        evaluation loader's stays in its pass (the pass's cost is grad-in-eval's too)."""
        if not self.inert and seconds > 0 and self.ledger.top() == "training":
            self.ledger.credit("epoch-start", "training", seconds, ended=True, counted=False)

    def next_epoch(self, record: Any, *, starting: bool = True) -> None:
        """A loader starts an epoch (`starting`: its iter()) or gives a batch. For the training
        loader an iter() while its last epoch is open ends that epoch (the script left it early:
        a `break`, Lightning's limit_train_batches); past --epochs, the session stops the script
        here."""
        if self.inert or record is not self.train:
            return
        if starting and self._train_open:
            self._epoch_ended(record)
        limit = self.epoch_limit
        evaluating = self.model_eval and not self.trains_in_eval  # read in eval: no epoch starts
        if limit is not None and self.epochs >= limit and self.on_limit and not evaluating:
            self.on_limit()

    def _epoch_ended(self, record: Any) -> None:
        self._train_open = False
        self.epochs += 1
        self._steps_at_epoch_end = self.ledger.steps
        self.clock.epoch_ended(time.perf_counter(), record.static.batches_per_epoch)

    def batch(self, record: Any) -> None:
        """A loader is asked for a batch."""
        self._last_record = record
        self.resumable = False
        if self.train is None and self.eval_pass is not None and self.eval_pass["record"] is record:
            return  # the next batch of an evaluation before any optimizer step (a sanity check)
        if self.train is None or record is self.train:
            if self.model_eval and self.stepped and not self.trains_in_eval:
                # The training loader read with the model in eval mode: an evaluation over the
                # training data (PyG's examples test on train_loader every epoch), no training.
                if self.eval_pass is None:
                    self._open_eval(TRAIN_DATA)
                return
            if self.epoch_limit is not None:  # an iterator made before its iter() was seen
                self.next_epoch(record, starting=False)
            self._train_open = True
            self.clock.batches += 1
            if self.eval_pass is not None:
                self._close_eval()
        elif self.eval_pass is None:
            self._open_eval("loader")
        elif self._another_pass(record):
            self._close_eval()
            self._open_eval("loader")

    def _another_pass(self, record: Any) -> bool:
        """Another loader's first batch, after the open pass's forwards, begins a pass of its
        own. Lightning's limit_val_batches leaves a validation before its loader's end, and its
        test and predict loaders then read on: 3 passes counted as 1. (Two loaders read side by
        side start together, before any forward.)"""
        opened = self.eval_pass
        assert opened is not None
        return bool(self._opening) and opened["forwards"] > 0 and opened["record"] is not record

    def exhausted(self, record: Any, it: Any) -> None:
        """A loader's iterator ended (StopIteration). The training loader read to its end in
        an evaluation pass, the model in eval mode, ends that pass, not an epoch: ignite's
        evaluator takes its first batch before it calls model.eval(), so its pass over the
        training data (ignite's mnist_save_resume_engine.py, every epoch) was opened by the
        eval-mode forward, and each of its ends counted an epoch more (5 of 3)."""
        self.first_batch(it)
        opened = self.eval_pass
        over_train_data = opened is not None and (opened["how"] == TRAIN_DATA or self.model_eval)
        if record is self.train and not over_train_data:
            self._epoch_ended(record)
        elif opened is not None:
            if record is self.train:
                self._train_open = False  # its training epoch ended at this pass's iter()
            self._close_eval()
            # accelerate's loader reads one batch ahead: HF Trainer's last eval batch runs after
            # the end, and its forward opened a second pass (10 passes for 5 evaluations). An
            # eval-mode forward before anything else happens continues this pass (`_forward`).
            self.resumable = True

    def optimizer_step(self) -> None:
        self.stepped, self.resumable = True, False
        record = self._last_record
        if record is not None:
            if record is self.train:
                self.train_votes += 1
            else:
                self._vote(record)
        if self.eval_pass is not None:
            self._close_eval()
        if not self.clock.searched:  # once: a walk of the stack
            self.clock.searched = True
            self.clock.script_epochs = projection.script_epochs()

    def _vote(self, record: Any) -> None:
        """An optimizer step followed a batch of a loader that is not the training loader: it
        becomes that loader once more steps followed its batches than the training loader's,
        or once two steps in a row did. Lightning's k-fold example makes new loaders (and a new
        model) for each fold: each fold's 75 steps never outvoted the first fold's, and every
        later step read as an evaluation pass (309 passes, 64% of the run)."""
        key = id(record)
        votes = self.votes[key] = self.votes.get(key, 0) + 1
        last, run, at = self._run
        run = run + 1 if last == key and at == self.train_votes else 1
        self._run = (key, run, self.train_votes)
        if votes <= self.train_votes and run < 2:
            return
        if self.train is not None:
            self.votes[id(self.train)] = self.train_votes
        del self.votes[key]
        self.train, self.train_votes = record, votes
        self.clock.length = record.static.batches_per_epoch

    def training_signal(self) -> None:
        """A backward call: a pass under way was no evaluation (passes end as training resumes:
        the training loader's batch, model.train()). One that an eval-mode forward (or the
        training loader in eval mode) opened: the model trains in eval mode (a frozen
        BatchNorm), and its eval-mode forwards open no pass from now on (another loader's
        batches still do)."""
        opened, self.resumable = self.eval_pass, False
        if opened is None:
            return
        if opened["how"] not in ("forward", TRAIN_DATA, PROBE):
            # Another loader's batch, trained on (the model still in eval mode: nothing closed
            # the pass): a new fold's loader before it becomes the training loader (`_vote`).
            self.eval_pass = None
            self._undo_eval(opened, time.perf_counter())
            return
        self.eval_pass = None
        self.trains_in_eval = True
        self._undo_eval(opened, time.perf_counter())

    def _forward(self, module: Any, args: Any, kwargs: Any) -> None:
        # Every forward of the model: a training one returns at the first test.
        if self.eval_pass is None:
            # Eval mode is an evaluation pass once an optimizer has stepped, and before that
            # when a DataLoader fed it (Lightning's sanity check: validation batches before
            # fit's first training batch); unfed, a pass that may be a probe (`_close_eval`).
            if module.training or self.inert or self.trains_in_eval:
                return
            how = "forward" if self.stepped or self._last_record is not None else PROBE
            self._open_eval(how, continues=self.resumable)
        elif self.inert:
            return
        opened = self.eval_pass
        assert opened is not None
        opened["forwards"] += 1
        opened["last"] = time.perf_counter()
        if self._grad_on() and not self._inference():
            self._recording(module, args, kwargs)

    def _recording(self, module: Any, args: Any, kwargs: Any) -> None:
        """An eval forward with autograd on."""
        assert self.eval_pass is not None
        self._eval_totals["grad_forwards"] += 1
        if not self.eval_pass["grad"]:
            self.eval_pass["grad"] = True
            self._eval_where = self._eval_where or self.eval_pass["where"]
            if self._eval_input is None:
                self._eval_input = (module, args, kwargs)

    def _open_eval(self, how: str, *, continues: bool = False) -> None:
        """An evaluation pass begins; `continues`: the pass whose loader just ended goes on."""
        where = user_location()
        self.eval_pass = {"t": time.perf_counter(), "grad": False, "where": where, "how": how}
        self.eval_pass["forwards"] = 0
        self.eval_pass["hooked"] = self._hook is not None  # its eval-mode forwards are counted
        self.eval_pass["record"] = self._last_record  # the loader that feeds it
        self.eval_pass["continues"], self.resumable = continues, False
        self.ledger.enter("evaluation", self.eval_pass["t"], counted=not continues)

    def _undo_eval(self, opened: dict[str, Any], now: float) -> None:
        """A pass that was no evaluation: its time back to the base, its count taken back."""
        self.ledger.undo("evaluation", opened["t"], now, counted=not opened["continues"])

    def _close_eval(self) -> None:
        opened, self.eval_pass = self.eval_pass, None
        if opened is None:
            return
        now = time.perf_counter()
        if _no_evaluation(opened):
            self._undo_eval(opened, now)
            return
        self._interval = _forward_interval(opened) or self._interval
        self.ledger.leave("evaluation", now)
        if not self.stepped:  # an evaluation before training: the first step starts after it
            self.clock.first_step = now
        seconds = now - opened["t"]
        totals = self._eval_totals
        if not opened["continues"]:  # the forwards after its loader's end: the same pass
            totals["passes"] += 1
            if opened["grad"]:
                totals["grad_passes"] += 1
        totals["seconds"] += seconds
        if opened["grad"]:
            totals["grad_seconds"] += seconds

    def _end_last_pass(self) -> None:
        """Close a pass that only the script's end closes, its time after its work going to
        tear-down: from its last forward's start plus its forwards' mean interval. HF Trainer's
        final evaluation and Lightning's predict have no event after them, so what the script
        did next (a save_model, an export) read as evaluation."""
        opened, tail = self.eval_pass, 0.0
        if opened is not None and opened["forwards"] and not _no_evaluation(opened):
            # A pass continued after its loader's end (accelerate's read-ahead) ran one forward:
            # the interval of the pass it continues.
            interval = _forward_interval(opened)
            interval = self._interval if interval is None else interval
            if interval is not None:
                tail = time.perf_counter() - opened["last"] - interval
        self._close_eval()
        if opened is not None and tail > 0:
            self.ledger.credit("tear-down", "evaluation", tail)
            self._eval_totals["seconds"] -= tail
            if opened["grad"]:
                self._eval_totals["grad_seconds"] -= tail

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        # Start to stop: the collection and the finalizers it runs. Most are young-generation
        # collections (hundreds in a short script); full ones take most of the time: noted apart.
        if self.inert:
            return
        if phase == "start":
            self._gc = (time.perf_counter(), self.ledger.top())
        elif self._gc is not None:
            began, under = self._gc
            self._gc = None
            if under == "torchpace":
                return  # the doctor's own allocations set it off: its own time
            seconds = time.perf_counter() - began
            self.ledger.credit("gc", under, seconds)
            if info.get("generation") == 2:
                self._gc_full[0] += 1
                self._gc_full[1] += seconds

    @contextlib.contextmanager
    def own(self) -> Iterator[None]:
        """The doctor's own work (the profiler's start, its trace written)."""
        self.ledger.enter("torchpace", time.perf_counter())
        try:
            yield
        finally:
            self.ledger.leave("torchpace", time.perf_counter())

    def _wrap_save(self, original: Any) -> Any:
        follow = self

        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            if follow.inert or threading.current_thread() is not threading.main_thread():
                return original(obj, f, *args, **kwargs)  # a background save blocks no step
            began = time.perf_counter()
            at = tell(f)
            follow.ledger.enter("checkpoint", began)
            try:
                return original(obj, f, *args, **kwargs)
            finally:
                follow._saved(f, at, began)

        return save

    def _saved(self, f: Any, at: int | None, began: float) -> None:
        now = time.perf_counter()
        self.ledger.leave("checkpoint", now)
        saves = self._saves
        saves["saves"] += 1
        saves["seconds"] += now - began
        saves["bytes"] += written(f, at)
        if self._save_where is None:
            self._save_where = user_location()

    # --- steps ---------------------------------------------------------------------------------
    def boundary(self, phase: str, steps_ended: Callable[[bool], int] | None = None) -> None:
        """A step ended (the session's phase now): close what cannot outlive it, keep its time,
        judge whether it was slow, start or go on with a slow-step capture. Every step passes
        here: a few comparisons and one float in a ring unless the step was slow.
        `steps_ended(first)`: how many steps it ends (StepDetector.steps_ended: the first ends
        those its signal took to settle: HF Trainer's 50 steps were counted 49, nanoGPT's 301 as
        300)."""
        now = time.perf_counter()
        if self._opening:
            for _ in range(len(self._opening)):
                self.ledger.leave("epoch-start", now)  # an iterator that never gave a batch
            self._opening.clear()
        first = self.ledger.steps == 0
        step, inside = self.ledger.boundary(now)
        if steps_ended is not None:
            self.ledger.steps += max(0, steps_ended(first) - 1)
        if self.profiling or phase not in STEADY:  # no typical step: never judged
            self._restarted = ""
            return
        self._ended(step, inside, now, phase)

    def settled_step(self, phase: str) -> bool:
        """An optimizer step of a settled run's counting thread that ends its step (the
        session's short path; every step of a long run passes here): `optimizer_step` and
        `boundary` in one for the step that needs neither's other work. False, having done
        nothing, for any other: an evaluation or an iterator's start open, the batch from
        another loader, a slow-step capture under way or due, the first step."""
        record, slow = self._last_record, self.slow
        if (
            record is None
            or record is not self.train
            or self.eval_pass is not None
            or self._opening
            or slow.capture is not None
            or slow.next_step is not None
            or not self.clock.searched
        ):
            return False
        self.train_votes += 1  # `profiling` went false at the first settled boundary, for good
        now = time.perf_counter()
        step, inside = self.ledger.boundary(now)
        if inside or step > self._slow_s:
            self._ended(step, inside, now, phase)
            return True
        kept = self._kept  # _keep's, inline: a call costs ~1 us in a real step
        self.steps[kept % RING] = step
        self._kept = kept = kept + 1
        if kept == self._refresh_at:
            self._refresh()
        return True

    def _ended(self, step: float, inside: dict[str, float], now: float, phase: str) -> None:
        """A typical step ended: judge whether it was slow, go on with or start a slow-step
        capture, keep its time."""
        wall = step + sum(inside.values()) if inside else step
        restarted, self._restarted = self._restarted, ""
        if wall > self._slow_s:  # possibly slow: judged against the running median
            n, median = self.ledger.steps, max(self._median, self._recent_median())
            at = now - self.ledger.start
            if self.slow.judge(n, at, wall, inside, median, restarted) and step > median:
                self.ledger.credit("unexplained", "training", step - median, ended=True)
        slow = self.slow
        if slow.capture is not None or slow.next_step is not None:  # a capture records or may
            slow.boundary(self.ledger.steps, may_start=phase == "done")
        if slow.capture is None:  # a profiled step is no typical one
            self._keep(step)

    def _keep(self, step: float) -> None:
        """Keep a step's training time (s) in the ring; the running median is refreshed when
        the steps kept double, then every MEDIAN_EVERY (a partition of RING floats: ~40 us)."""
        kept = self._kept
        self.steps[kept % RING] = step
        self._kept = kept = kept + 1
        if kept == self._refresh_at:
            self._refresh()

    def _refresh(self) -> None:
        kept = self._kept
        self._refresh_at = kept * 2 if kept < MEDIAN_EVERY else kept + MEDIAN_EVERY
        self._median = self._ring_median()
        self._slow_s = self.slow.threshold(self._median)

    def _recent_median(self) -> float:
        """The median of the last RECENT steps kept (s): a step is slow against its neighbours
        too. Steps whose work grows (ignite's actor-critic: an episode a step, 10 to 2,285 env
        steps) read the run's median as ever more slow steps: 72% of the run 'unexplained'."""
        kept = self._kept
        recent = sorted(self.steps[i % RING] for i in range(max(0, kept - RECENT), kept))
        return recent[len(recent) // 2] if recent else 0.0

    def _ring_median(self) -> float:
        """The median of the steps kept (s)."""
        return float(np.median(np.frombuffer(self.steps, count=min(self._kept, RING))))

    # --- the record ----------------------------------------------------------------------------
    def facts(self, ended: str) -> WholeRun:
        """The whole run as plain data, its account closed now (at the first call)."""
        if self._facts is None:
            self._facts = self._close(ended)
        return self._facts

    def _close(self, ended: str) -> WholeRun:
        self._end_last_pass()
        now = time.perf_counter()
        totals = self.ledger.close(now)
        counts = dict(self.ledger.counts, **{"tear-down": 0, "start-up": 0})
        counts["epoch-start"] = self.started_iters
        steps = self.ledger.steps
        epochs = self.epochs
        if self._train_open and ended == RAN_TO_END and steps > self._steps_at_epoch_end:
            # Its last epoch left early (Lightning's limit_train_batches: no StopIteration, no
            # iter() after it), then the script's end: 2 epochs read as 1. Only one that trained:
            # ignite's evaluator reads the training loader's first batch in training mode, and
            # its engines stop at the loader's length (no StopIteration): 1 epoch read as 2.
            epochs += 1
        epochs = epochs or self._train_epochs_started()
        self.slow.close()
        slow, notes = read_captures(self.slow.kept(), self.slow.captures, recompile_guards())
        account = RunAccount(
            wall_s=now - self.ledger.start,
            phases=tuple(AccountPhase(p, max(0.0, totals[p]), counts[p]) for p in PHASES),
            steps=steps,
            epochs=epochs,
            ended=ended,
            slow_steps=tuple(slow),
            slow_seen=self.slow.seen,
            timeline=self.ledger.timeline(),
            notes=(*notes, *self._gc_note(totals["gc"], counts["gc"])),
        )
        if ended != RAN_TO_END:
            account = replace(account, projection=self.clock.project(account, now))
        return WholeRun(
            account=account,
            epochs=epochs,
            steps=steps,
            step_ms=self._ring_median() * 1000.0 if self._kept else None,
            evaluation=self._evaluation(),
            checkpoints=self._checkpoints(),
        )

    def _gc_note(self, seconds: float, pauses: int) -> tuple[str, ...]:
        full, full_s = self._gc_full
        if not full:
            return ()
        return (
            f"GC: {full} of the {pauses} pauses were full collections (every object walked), "
            f"{full_s:.2f} s of the {seconds:.2f} s",
        )

    def _train_epochs_started(self) -> int:
        return 1 if self.ledger.steps else 0

    def _evaluation(self) -> EvalPasses | None:
        t = self._eval_totals
        if not t["passes"]:
            return None
        measured, method = self._forward_ms() if t["grad_passes"] else (None, "")
        return EvalPasses(
            passes=int(t["passes"]),
            seconds=t["seconds"],
            grad_passes=int(t["grad_passes"]),
            grad_seconds=t["grad_seconds"],
            module=self.module,
            location=self._eval_where,
            grad_forwards=int(t["grad_forwards"]),
            forward_ms=measured,
            forward_method=method,
        )

    def _forward_ms(self) -> tuple[tuple[float, float] | None, str]:
        """An eval forward's time with and without autograd, on the eval batch kept (the script
        has ended: the extra forwards change nothing it reads)."""
        kept, self._eval_input = self._eval_input, None
        if kept is None:
            return None, "no eval batch was kept"
        self.inert = True  # the measurement's own forwards are no evaluation pass
        return autograd_cost.forward_ms(*kept)

    def _checkpoints(self) -> Checkpoints | None:
        s = self._saves
        if not s["saves"]:
            return None
        return Checkpoints(
            saves=int(s["saves"]),
            seconds=s["seconds"],
            bytes=int(s["bytes"]),
            location=self._save_where,
            copy_bytes_per_s=copy_rate(int(s["bytes"]) // int(s["saves"])),
        )
