"""Multi-process doctor runs: launch the script through torchrun, one doctored process per rank.

The parent (`torchpace doctor --nproc-per-node N`) starts `python -m torch.distributed.run
--standalone --nproc-per-node N -m torchpace.runner.launch OPTIONS -- SCRIPT ARGS`; each rank runs
the script under its own session and leaves its trace plus `rankR.result.json` in the out folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchpace.cores import usable_cores
from torchpace.errors import UsageError
from torchpace.policy.threads import cores_per_process
from torchpace.runner.options import DoctorOptions
from torchpace.runner.profiling import ProfileBounds
from torchpace.runner.run import RunHooks, RunResult, Target, run_target


@dataclass(frozen=True)
class RankOutcome:
    """One rank's RunResult, as read back by the parent."""

    rank: int
    result: RunResult


def encode_options(options: DoctorOptions) -> str:
    import msgspec

    return msgspec.json.encode(dataclasses.asdict(options), enc_hook=str).decode()


def decode_options(text: str) -> DoctorOptions:
    import msgspec

    raw = msgspec.json.decode(text)
    raw["out_dir"] = Path(raw["out_dir"])
    raw["bounds"] = ProfileBounds(**raw["bounds"])
    return DoctorOptions(**raw)


def torchrun_command(target: Target, options: DoctorOptions, nproc: int) -> list[str]:
    """The torchrun command line that runs every rank under the doctor."""
    runner = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    runner += [f"--nproc-per-node={nproc}", "-m", "torchpace.runner.launch"]
    runner += ["--options", encode_options(options)]
    runner += ["--module"] if target.module else []
    return [*runner, "--", target.name, *target.args]


def run_distributed(target: Target, options: DoctorOptions, nproc: int) -> list[RankOutcome]:
    """Run the target on `nproc` local ranks through torchrun; one outcome per rank that reported."""
    if nproc < 1:
        raise UsageError(f"--nproc-per-node must be 1 or more; got {nproc}")
    target.validate()
    options.out_dir.mkdir(parents=True, exist_ok=True)
    options = dataclasses.replace(options, out_dir=options.out_dir.resolve(), world_size=nproc)
    returncode = _run_forwarding_signals(torchrun_command(target, options, nproc), rank_env(nproc))
    outcomes = read_outcomes(options.out_dir)
    if not outcomes and returncode != 0:
        raise UsageError(
            f"torchrun exited with status {returncode} before any rank reported; its "
            "output above says why (is the script launchable with torchrun?)"
        )
    return outcomes


def rank_env(nproc: int) -> dict[str, str]:
    """The ranks' environment: this one, with torch's threads set to each rank's share of the
    cores this process may use (the affinity mask, not the machine's count) unless the user set
    OMP_NUM_THREADS: the cpu-threads rule judges the ranks by that share."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(cores_per_process(usable_cores(), nproc)))
    return env


def _run_forwarding_signals(cmd: list[str], env: dict[str, str]) -> int:
    """Run torchrun; SIGTERM and Ctrl-C go on to it (it passes them to the ranks, whose
    sessions write what they captured), and the parent waits to read their results."""
    proc = subprocess.Popen(cmd, env=env)

    def forward(signum: int, frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return proc.wait()
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def read_outcomes(out_dir: Path) -> list[RankOutcome]:
    """Every rank's result file in `out_dir`, by rank."""
    import msgspec

    outcomes = []
    for path in sorted(out_dir.glob("rank*.result.json")):
        result = msgspec.json.decode(path.read_bytes(), type=RunResult)
        outcomes.append(RankOutcome(int(path.name[4:].split(".")[0]), result))
    return sorted(outcomes, key=lambda o: o.rank)


def save(out: Path, result: RunResult) -> None:
    """A rank's result, for the parent (`read_outcomes`)."""
    import msgspec

    out.parent.mkdir(parents=True, exist_ok=True)  # a rank that wrote no trace made none
    out.write_bytes(msgspec.json.encode(result))


def save_and_exit(out: Path) -> Callable[[RunResult], None]:
    """The give-up hook of a rank: the process ends there, its result saved first."""

    def give_up(result: RunResult) -> None:
        save(out, result)
        sys.stdout.flush()
        os._exit(result.exit_code)

    return give_up


def _worker(argv: Sequence[str]) -> int:
    args = list(argv)
    split = args.index("--")
    head, rest = args[:split], args[split + 1 :]
    options = decode_options(head[head.index("--options") + 1])
    rank = int(os.environ.get("RANK", "0"))
    options = dataclasses.replace(options, rank=rank)
    target = Target(rest[0], tuple(rest[1:]), module="--module" in head)
    out = options.out_dir / f"rank{rank}.result.json"
    result = run_target(target, options, RunHooks(give_up=save_and_exit(out)))
    if result.child:  # a forked copy of the script: the rank's own process reports
        sys.stdout.flush()
        os._exit(result.exit_code)
    save(out, result)
    if result.error:
        print(f"[rank {rank}] the script failed:\n{result.error}", file=sys.stderr, end="")
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(_worker(sys.argv[1:]))
