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
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

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
        os.environ[SPAWNED_BY] = str(os.getppid())  # its siblings are not "other processes"
        options = decode_options(self.options)
        options = dataclasses.replace(options, rank=i, world_size=self.nprocs)
        out = options.out_dir / f"rank{i}.result.json"
        raised: list[BaseException] = []

        def call() -> None:
            try:
                self.fn(i, *args)
            except StopScript:
                raise
            except BaseException as exc:  # torch's _wrap sends it to the parent, as without us
                raised.append(exc)
                raise

        target = dataclasses.replace(self.target, call=call)
        result = run_target(target, options, RunHooks(give_up=save_and_exit(out)))
        note = (
            f"this is process {i} of {self.nprocs} the script started with "
            f"torch.multiprocessing at {self.where}; the doctor ran inside it"
        )
        result = dataclasses.replace(result, notes=(*result.notes, note), spawned=True)
        save(out, _as_process(result, f"in process {i} of {self.nprocs} the script spawned"))
        if raised:
            raise raised[0]


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
        self.spawned = 0  # processes started under the doctor
        self.processes: list[Any] = []  # theirs, when the doctor waited for them

    def __enter__(self) -> SpawnedRanks:
        # `import torch.multiprocessing.spawn as m` binds the function of that name.
        module = importlib.import_module("torch.multiprocessing.spawn")
        for owner in (module, importlib.import_module("torch.multiprocessing")):
            self.patcher.wrap(owner, "start_processes", self._wrap)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.patcher.restore()

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

    def _watched(self, context: Any) -> Any:
        """The processes' context, its join() also ending them when SIGTERM stops the script
        (each session writes what it captured; a deadline ends each at its own), and stopping
        the script once they were stopped: Lightning's ddp_spawn then waits for rank 0's
        results on a queue the stopped process never fills."""
        self.processes = list(context.processes)
        join = context.join

        def joined(*args: Any, **kwargs: Any) -> bool:
            try:
                done = join(*args, **kwargs)
            except Terminated:
                _end(self.processes)
                raise
            if done and not self.options.runs_to_end and self.stopped():
                raise StopScript  # its processes stopped after their windows: so does it
            return bool(done)

        context.join = joined
        return context

    def stopped(self) -> bool:
        """Whether the doctor stopped the spawned processes after their windows."""
        return any(r.stopped_early for r in self.results())

    def results(self) -> list[RunResult]:
        """The spawned processes' results, by process index ([] when none reported)."""
        if not self.spawned:
            return []
        deadline = time.monotonic() + GRACE_S  # out of the script: no stop lands in this wait
        for p in self.processes:  # the script was stopped while they ran: they are ending
            p.join(max(0.0, deadline - time.monotonic()))
        _end(self.processes)  # past the grace: SIGTERM, and what they captured
        for p in self.processes:
            p.join(GRACE_S)
        return [o.result for o in read_outcomes(self.options.out_dir)]
