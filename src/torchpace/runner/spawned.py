"""Training the script starts itself with torch.multiprocessing.spawn: the doctor runs in each
spawned process, as in each rank of a torchrun job.

`mp.spawn(main_worker, nprocs=N)` is how pytorch/examples' imagenet (and many tutorials) launch
DDP: the parent only waits in join(). Under the doctor the parent saw no step, and a run of that
example on the CPU trained for minutes, to the end of its epochs, before the report said that the
training ran elsewhere. Here the first `start_processes` call (mp.spawn's too) runs its function
in each child under a doctor session of its own (`SpawnedRank`), which leaves
`rank{i}.result.json` in the out folder, as a torchrun rank does; the report is theirs. The
children of one job agree their stop through the job's store (runner/ranks.py), return from the
function when stopped, and the parent, whose children all returned, is stopped there too.

Hogwild training (pytorch/examples' mnist_hogwild, A3C) starts its trainers one by one with
`multiprocessing.Process(target=train, args=(..., model, ...))` after `model.share_memory()`.
A Process started with the spawn or forkserver method whose target is the script's own function
and whose arguments hold a model with its parameters in shared memory runs under the doctor in
the same way (`SpawnedProcess`); the script is stopped at the join() after which every such
process has ended, stopped after its window. The processes wait for none of the others, so the
cross-rank rules are not applied (Recording.apart). Other processes the script starts (a
helper, a forked child) are left as they are: a doctor stopping a helper after a window could
leave the script waiting for work it no longer does.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from torchpace.runner import recorder
from torchpace.runner.launch import (
    decode_options,
    encode_options,
    read_outcomes,
    save,
    save_and_exit,
)
from torchpace.runner.load import SPAWNED_BY
from torchpace.runner.options import DoctorOptions, StopScript, Terminated
from torchpace.runner.patching import Patcher, user_location
from torchpace.runner.run import RunHooks, RunResult, Target, run_target
from torchpace.trace.stacks import is_user_file


@dataclasses.dataclass(frozen=True)
class SpawnedRank:
    """The script's function, run in a spawned process under the doctor (pickled by reference,
    as the function itself is)."""

    fn: Callable[..., Any]
    target: Target
    options: str  # the parent's DoctorOptions, encoded
    nprocs: int
    where: str  # the script's line that spawned it

    def __call__(self, i: int, *args: Any) -> None:
        options = decode_options(self.options)
        how = f"torch.multiprocessing at {self.where}"
        _doctored(lambda: self.fn(i, *args), self.target, options, i, lambda: self.nprocs, how)


@dataclasses.dataclass(frozen=True)
class SpawnedProcess:
    """The target of a `multiprocessing.Process` the script started with the spawn (or
    forkserver) method, run under the doctor in that process: Hogwild training
    (pytorch/examples' mnist_hogwild, A3C) starts one such process per trainer, all stepping
    one model whose parameters they share in memory."""

    fn: Callable[..., Any]
    target: Target
    options: str  # the parent's DoctorOptions, encoded
    index: int  # the order the script started it in, among the processes doctored
    where: str  # the script's line that started it
    apart: str  # why the processes wait for none of the others

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        # The script starts its processes one after another: by the time this one's doctor
        # begins (torch imported again, ~1 s), the others of its loop have most likely
        # started, and by its end surely; the count is read at each.
        options = decode_options(self.options)
        count = lambda: max(self.index + 1, _started(options.out_dir))  # noqa: E731
        how = f"multiprocessing at {self.where}"
        call = lambda: self.fn(*args, **kwargs)  # noqa: E731
        _doctored(call, self.target, options, self.index, count, how, apart=self.apart)


def _doctored(
    call: Callable[[], Any],
    target: Target,
    options: DoctorOptions,
    i: int,
    count: Callable[[], int],
    how: str,
    *,
    apart: str = "",
) -> None:
    """Run `call` (the script's function, in process `i` of the `count()` it started) under a
    doctor session of its own; its result goes to the out folder as rank{i}'s."""
    os.environ[SPAWNED_BY] = str(os.getppid())  # its siblings are not "other processes"
    options = dataclasses.replace(options, rank=i, world_size=count())
    out = options.out_dir / f"rank{i}.result.json"
    raised: list[BaseException] = []

    def guarded() -> None:
        try:
            call()
        except StopScript:
            raise
        except BaseException as exc:  # sent on to the parent as without the doctor
            raised.append(exc)
            raise

    result = run_target(
        dataclasses.replace(target, call=guarded),
        options,
        RunHooks(give_up=save_and_exit(out)),
    )
    n = count()
    note = f"this is process {i} of {n} the script started with {how}; the doctor ran inside it"
    result = dataclasses.replace(result, notes=(*result.notes, note), spawned=True, apart=apart)
    save(out, _as_process(result, f"in process {i} of {n} the script spawned"))
    if raised:
        raise raised[0]


STARTED = "processes.started"  # in the out folder: how many processes the doctor started so far


def _started(out_dir: Any) -> int:
    try:
        return int((out_dir / STARTED).read_text())
    except (OSError, ValueError):
        return 0


def _as_process(result: RunResult, which: str) -> RunResult:
    """A followed run's account says whose run it is: this process's, from its own start."""
    live = result.inspection
    whole = live.whole_run
    if whole is None:
        return result
    account = dataclasses.replace(whole.account, ended=f"{which}: {whole.account.ended}")
    whole = dataclasses.replace(whole, account=account)
    return dataclasses.replace(result, inspection=dataclasses.replace(live, whole_run=whole))


# How long the processes get to write their reports once the script is stopped (a deadline,
# SIGTERM): their sessions end them as they would end the script.
GRACE_S = 30.0


def _end(processes: list[Any]) -> None:
    for p in processes:
        if p.is_alive():
            p.terminate()


class SpawnedRanks:
    """Around a single-process doctor run: patch torch.multiprocessing's start_processes so that
    its first call's processes run under the doctor; `results()` then gives theirs."""

    def __init__(self, target: Target, options: DoctorOptions) -> None:
        self.target, self.options = target, options
        self.patcher = Patcher()
        self.spawned = 0  # processes started under the doctor by start_processes
        self.started = 0  # multiprocessing.Process objects started under the doctor
        self.processes: list[Any] = []  # theirs, when the doctor waited for them

    def __enter__(self) -> SpawnedRanks:
        # `import torch.multiprocessing.spawn as m` binds the function of that name.
        module = importlib.import_module("torch.multiprocessing.spawn")
        for owner in (module, importlib.import_module("torch.multiprocessing")):
            self.patcher.wrap(owner, "start_processes", self._wrap)
        process = importlib.import_module("multiprocessing.process")
        self.patcher.wrap(process.BaseProcess, "start", self._wrap_start)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.patcher.restore()
        recorder.RANKS_STARTED = False

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)
        ranks = self

        def start_processes(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
            if ranks.spawned or a["start_method"] != "spawn" or a["nprocs"] < 1:
                return original(*args, **kwargs)  # a fork would copy the doctor's own session
            ranks.spawned = a["nprocs"]
            recorder.RANKS_STARTED = True
            where = user_location()
            a["fn"] = SpawnedRank(
                a["fn"],
                ranks.target,
                encode_options(ranks.options),
                a["nprocs"],
                str(where) if where else "an unknown line",
            )
            join, a["join"] = a["join"], False
            context = ranks._watched(original(*bound.args, **bound.kwargs))
            if not join:
                return context  # the script joins it (Lightning's ddp_spawn does)
            while not context.join():
                pass
            return None

        return start_processes

    def _wrap_start(self, original: Callable[..., Any]) -> Callable[..., Any]:
        ranks = self

        def start(proc: Any, *args: Any, **kwargs: Any) -> Any:
            fn = getattr(proc, "_target", None)
            if fn is None or ranks.spawned or not _doctorable(proc, fn):
                return original(proc, *args, **kwargs)
            apart = _apart(proc)
            if not apart:  # not Hogwild: a helper process's work, left as it is
                return original(proc, *args, **kwargs)
            where = user_location()
            proc._target = SpawnedProcess(
                fn,
                ranks.target,
                encode_options(ranks.options),
                ranks.started,
                str(where) if where else "an unknown line",
                apart,
            )
            ranks.started += 1
            recorder.RANKS_STARTED = True
            _write_started(ranks.options.out_dir, ranks.started)
            try:
                out = original(proc, *args, **kwargs)
            except BaseException:  # not started (a target pickle cannot carry): as without us
                proc._target = fn
                raise
            ranks.processes.append(proc)
            proc.join = ranks._joined(proc.join, lambda _: ranks.all_ended())
            return out

        return start

    def _joined(self, join: Callable[..., Any], ended: Callable[[Any], bool]) -> Callable[..., Any]:
        """A join() of the processes (`ended` of what it returned: whether all of them have
        ended) that also ends them when SIGTERM stops the script (each session writes what it
        captured), and stops the script once they ended, stopped after their windows: its code
        after the join (mnist_hogwild's test pass) is not what the report is about."""

        def joined(*args: Any, **kwargs: Any) -> Any:
            try:
                out = join(*args, **kwargs)
            except Terminated:
                _end(self.processes)
                raise
            if ended(out) and not self.options.runs_to_end and self.stopped():
                raise StopScript  # its processes stopped after their windows: so does it
            return out

        return joined

    def _watched(self, context: Any) -> Any:
        """The processes' context, its join() also ending them when SIGTERM stops the script
        (each session writes what it captured; a deadline ends each at its own), and stopping
        the script once they were stopped: Lightning's ddp_spawn then waits for rank 0's
        results on a queue the stopped process never fills."""
        self.processes = list(context.processes)
        context.join = self._joined(context.join, bool)
        return context

    def all_ended(self) -> bool:
        return all(p.exitcode is not None for p in self.processes)

    def stopped(self) -> bool:
        """Whether the doctor stopped the spawned processes after their windows."""
        return any(r.stopped_early for r in self.results())

    def results(self) -> list[RunResult]:
        """The spawned processes' results, by process index ([] when none reported)."""
        if not self.spawned and not self.started:
            return []
        deadline = time.monotonic() + GRACE_S  # out of the script: no stop lands in this wait
        # The class's join: a Process's own is wrapped (`_joined`) to stop the script.
        for p in self.processes:  # the script was stopped while they ran: they are ending
            type(p).join(p, max(0.0, deadline - time.monotonic()))
        _end(self.processes)  # past the grace: SIGTERM, and what they captured
        for p in self.processes:
            type(p).join(p, GRACE_S)
        (self.options.out_dir / STARTED).unlink(missing_ok=True)
        return [o.result for o in read_outcomes(self.options.out_dir)]


def _doctorable(proc: Any, fn: Any) -> bool:
    """Whether a Process about to start runs a function of the script's own in a fresh
    interpreter: spawn or forkserver (a forked child would carry a copy of the doctor's session
    in the middle of its work), not torch's or the standard library's (DataLoader workers,
    torch.compile's, a Pool's)."""
    code = getattr(fn, "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return False
    method = getattr(proc, "_start_method", None)
    if method is None:  # a plain multiprocessing.Process: the default context's method
        method = multiprocessing.get_start_method(allow_none=True)
    return method in ("spawn", "forkserver")


def _apart(proc: Any) -> str:
    """Why the processes wait for none of the others, from what the script hands this one: a
    model whose parameters live in shared memory (`model.share_memory()`), which every process
    steps on its own (Hogwild). "" when there is none."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ""
    given = (*getattr(proc, "_args", ()), *getattr(proc, "_kwargs", {}).values())
    for obj in given:
        if isinstance(obj, torch.nn.Module):
            params = list(obj.parameters())
            if params and all(p.is_shared() for p in params):
                return (
                    "the processes step one model whose parameters they share in memory "
                    "(Hogwild): none waits for another, so none is compared with the others"
                )
    return ""


def _write_started(out_dir: Any, n: int) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / STARTED).write_text(str(n))
    except OSError:  # each process then counts those started before it
        pass
