"""The session's patches on torch: optimizer steps, DataLoader batches, backward calls, profilers.

Every wrapper takes `*args, **kwargs` and hands them on unchanged: torch adds parameters between
versions (torch 2.13's tensorboard_trace_handler passes `use_python_export=` to
export_chrome_trace), and a patch that drops one breaks the script. tests/doctor/test_patches.py
checks every patch against the installed torch's signatures.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from threading import get_ident
from typing import TYPE_CHECKING, Any, Protocol

from torchpace.runner.sensors.loader import FirstSteps
from torchpace.runner.steps import Event, StepDetector
from torchpace.trace.names import CLOSURE_PREFIX

if TYPE_CHECKING:
    from torchpace.runner.follow import Follow
    from torchpace.runner.options import DoctorOptions, SessionState
    from torchpace.runner.patching import Patcher
    from torchpace.runner.sensors.inspector import Inspector
    from torchpace.runner.sensors.loader import LoaderRecord


class Session(Protocol):
    """What the hooks need of the doctor's session (runner/session.py), which installs them."""

    options: DoctorOptions
    state: SessionState
    patcher: Patcher
    inspector: Inspector
    inert: bool  # a forked child: every hook passes straight through
    pid: int
    local: threading.local  # optimizer-step depth, per thread
    follow: Follow | None  # doctor --follow: the whole run's light watch
    quiet_thread: int | None  # its batches and backward calls can end no step (session.py)
    fed: LoaderRecord | None  # the loader of the last profiled batch, until a backward pass
    last_loader: LoaderRecord | None  # the loader of the last batch, in any phase

    def on(self, decide: Callable[[StepDetector], Event]) -> None: ...
    def settled_step(self, opt_id: int) -> None: ...
    def signal_seen(self) -> None: ...
    def owns_profiler(self, prof: Any) -> bool: ...
    @property
    def timing_math(self) -> bool: ...
    def step_aside(self) -> None: ...
    def give_up(self, reason: str, status: int) -> None: ...


def install(session: Session) -> None:
    """Patch torch (and os._exit) so steps, batches and backward calls reach the session."""
    import torch
    import torch.autograd.profiler as legacy
    import torch.profiler.profiler as kineto
    import torch.utils.data.dataloader as dl
    from torch.optim import Optimizer

    wrap = session.patcher.wrap
    wrap(Optimizer, "_patch_step_function", lambda f: _patch_step_function(session, f))
    wrap(dl._BaseDataLoaderIter, "__next__", lambda f: _next(session, f))
    wrap(torch.autograd, "backward", lambda f: _backward(session, f))
    wrap(kineto._KinetoProfile, "prepare_trace", lambda f: _foreign_profiler(session, f))
    wrap(legacy.profile, "__enter__", lambda f: _foreign_profiler(session, f))
    wrap(kineto._KinetoProfile, "export_chrome_trace", lambda f: _export(session, f))
    wrap(os, "_exit", lambda f: _os_exit(session, f))


def _patch_step_function(session: Session, original: Any) -> Any:
    def _patch_step_function(opt: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(opt, *args, **kwargs)
        cls = type(opt)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_torchpace", False):
            session.patcher.wrap(cls, "step", lambda f: _step(session, f))
        return out

    return _patch_step_function


def _step(session: Session, inner: Any) -> Any:
    # Outside torch's own record_function("Optimizer.step#..."), so a step boundary never splits
    # that span in the trace.
    def step(opt: Any, *args: Any, **kwargs: Any) -> Any:
        if session.inert:
            return inner(opt, *args, **kwargs)
        if session.state.phase == "profile":
            args, kwargs = _mark_closure(opt, args, kwargs)
        local = session.local
        local.opt_depth = depth = getattr(local, "opt_depth", 0) + 1
        try:
            # A call without arguments is the common one: forwarding empty *args and **kwargs
            # costs ~0.2 us a call, more in a real step (docs/doctor.md).
            out = inner(opt, *args, **kwargs) if args or kwargs else inner(opt)
        finally:
            local.opt_depth = depth - 1
        if depth > 1:  # an optimizer stepping inside another's step: the outer one counts
            return out
        if session.quiet_thread == get_ident():
            session.settled_step(id(opt))  # every step of a settled run after its window
            return out
        if session.follow is not None:
            session.follow.optimizer_step()
        session.signal_seen()
        watcher = session.inspector.watcher
        if watcher is not None and watcher.active:
            watcher.optimizer_steps += 1
        session.on(lambda det: det.optimizer_step(id(opt)))
        return out

    step._torchpace = True  # type: ignore[attr-defined]
    step.hooked = True  # type: ignore[attr-defined]  # torch must not wrap it again
    return step


def _mark_closure(opt: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Wrap step(closure)'s closure in a named range: the trace then tells the forward and
    backward the optimizer runs from the optimizer's own work (runner/steps.py: LBFGS)."""
    positional = bool(args) and callable(args[0])
    closure = args[0] if positional else kwargs.get("closure")
    if not callable(closure):
        return args, kwargs
    from torch.autograd.profiler import record_function

    name = f"{CLOSURE_PREFIX}{type(opt).__name__}.step"

    def marked(*a: Any, **k: Any) -> Any:
        with record_function(name):
            return closure(*a, **k)

    if positional:
        return (marked, *args[1:]), kwargs
    return args, {**kwargs, "closure": marked}


def _next(session: Session, inner: Any) -> Any:
    # complex: the loader's __next__ wrapper: each phase's work in the order a batch meets it.
    def __next__(it: Any, *args: Any, **kwargs: Any) -> Any:
        if session.inert:
            return inner(it, *args, **kwargs)
        if session.quiet_thread != get_ident():
            session.signal_seen()
            session.on(StepDetector.loader_batch)
        record = getattr(it, "_torchpace_loader", None)
        if record is None:
            return inner(it, *args, **kwargs)
        phase = session.state.phase
        # iter(loader)'s time until the first batch; a restarted epoch's first steps after it
        started = getattr(it, "_torchpace_started", None)
        follow = session.follow
        if started is not None and started.__class__ is FirstSteps:
            alone = session.last_loader is record and (follow is None or not follow.slow.busy)
            extra = record.first_steps(it, started, alone, phase)
            if extra is not None and follow is not None:
                follow.first_step_extra(extra)
        session.last_loader = record
        if follow is not None:
            follow.batch(record)  # whose batch it is (training or evaluation)
        try:
            if phase == "profile":  # timed in wall and thread CPU time (runner/sensors/loader.py)
                batch = record.timed(lambda i: inner(i, *args, **kwargs), it)
            elif phase == "probe" and not session.timing_math:
                # steps at fewer torch threads, unprofiled: their loading, timed
                batch = record.probed(lambda i: inner(i, *args, **kwargs), it)
            else:
                batch = inner(it, *args, **kwargs) if args or kwargs else inner(it)  # as in step
        except StopIteration:
            if follow is not None:
                follow.exhausted(record, it)  # the end of an epoch
            raise
        if started is not None:  # an epoch's first batches, in any phase: what starting it cost
            record.came(it, started, phase)
            if follow is not None:
                follow.first_batch(it, record)
        if phase == "profile":
            record.measure_padding(batch)
            session.fed = record  # a backward pass before the next batch: it trains
        elif phase == "warmup" and record.dataset is not None and session.options.profile:
            # Unwatched, unprofiled, and never in --verify's timed runs (no profile): the
            # probe's reads count in no measured step.
            record.probe_samples()
        if record.hashing:
            record.hash_batch(batch)
        return batch

    return __next__


def _backward(session: Session, inner: Any) -> Any:
    def backward(*args: Any, **kwargs: Any) -> Any:
        out = inner(*args, **kwargs)
        if session.inert:
            return out
        follow = session.follow
        if follow is not None and (follow.eval_pass is not None or follow.resumable):
            follow.training_signal()
        if session.quiet_thread == get_ident():
            return out
        fed = session.fed
        if fed is not None and session.state.phase == "profile":
            # The profiled batch this backward pass trains on; after the window, the batch
            # before it may be an evaluation loader's last profiled one (the next was unseen).
            fed.trained += 1
            session.fed = None
        session.signal_seen()
        watcher = session.inspector.watcher
        if watcher is not None and watcher.active:
            watcher.backward_calls += 1
        inside = getattr(session.local, "opt_depth", 0) > 0
        session.on(_backward_in_step if inside else StepDetector.backward_done)
        return out

    return backward


def _backward_in_step(det: StepDetector) -> Event:
    return det.backward_done(inside_optimizer=True)  # a closure's: the optimizer step delimits


def _foreign_profiler(session: Session, inner: Any) -> Any:
    def start(prof: Any, *args: Any, **kwargs: Any) -> Any:
        if not session.inert and not session.owns_profiler(prof):
            session.step_aside()
        return inner(prof, *args, **kwargs)

    return start


def _export(session: Session, inner: Any) -> Any:
    def export_chrome_trace(prof: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        out = inner(prof, path, *args, **kwargs)
        if not session.inert and not session.owns_profiler(prof):
            session.state.script_traces.append(_absolute(str(path)))
        return out

    return export_chrome_trace


def _os_exit(session: Session, inner: Any) -> Any:
    def _exit(status: Any, *args: Any, **kwargs: Any) -> Any:
        # A forked child (multiprocessing, DataLoader workers) ends this way: not the script.
        if not session.inert and os.getpid() == session.pid:
            session.give_up(f"the script called os._exit({status})", _status(status))
        return inner(status, *args, **kwargs)

    return _exit


def _status(status: Any) -> int:
    return status if isinstance(status, int) else 1


def _absolute(path: str) -> str:
    try:
        return os.path.abspath(path)
    except OSError:  # the working directory is gone
        return path
