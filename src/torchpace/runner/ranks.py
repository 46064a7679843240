"""Ranks of one job stop together: the step where every rank's script stops is agreed through the
job's own key-value store, so no rank is stopped while another waits for it in a collective.

Each rank's session decides alone when it is done (its window profiled and timed, a bound, the
deadline); a rank that stopped there could leave the others blocked in their next all_reduce or
all_gather (an accelerate script's metrics gather died that way under torchrun). So a rank that
is done proposes a step LAG boundaries ahead, the first proposal wins, and every rank stops at the
agreed step. A rank in lock-step with the proposer (any collective in each step) cannot finish the
step after the proposal before the proposer has made it, so it reads the proposal in time.

The store is the one the script's `init_process_group` set up (torchrun's, Slurm's, any
`init_method`): there is nothing to agree before it, as there is no collective. One check per step
boundary is one small request to it (27 us on loopback, measured under load on this machine's CPU).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

LAG = 2  # boundaries between a proposal and the agreed stop
_KEY = "stop"
DONE = "its window was profiled and timed"  # why a rank that is done proposes a stop


@dataclass(frozen=True)
class Agreed:
    """The stop every rank keeps: at which boundary, proposed by which rank, and why."""

    boundary: int
    rank: int
    why: str

    def describe(self, me: int) -> str:
        """The note a rank's report carries."""
        who = "this rank" if self.rank == me else f"rank {self.rank}"
        return f"the ranks stopped together at the step {who} asked for ({self.why})"


class RankAgreement:
    """Proposals and the agreed stop, through the default process group's store."""

    def __init__(self) -> None:
        self._store: Any = None
        self._off = False  # no process group of several ranks, or its store failed
        self.rank = 0
        self.agreed: Agreed | None = None
        self.ticks = 0  # boundaries counted since the start, never reset (the ranks' clock)
        self._deadline_asked = False

    def active(self) -> bool:
        """Whether this process is one rank of several, with a store to agree through."""
        return self._connect() is not None

    def propose(self, boundary: int, why: str) -> None:
        """Ask every rank to stop LAG boundaries after `boundary` (the first proposal wins)."""
        store = self._connect()
        if store is None or self.agreed is not None:
            return
        value = f"{boundary + LAG}:{self.rank}:{why}"
        self._call(lambda: store.compare_set(_KEY, "", value))

    def stops_here(self, *, done: bool, notes: list[str]) -> bool:
        """Whether this rank stops at this boundary: the one the ranks agreed on (a rank that is
        `done` proposes one); a stop another rank asked for, or asked for another reason, is
        noted."""
        if done:
            self.propose(self.ticks, DONE)
        agreed = self.stop_at()
        if agreed is None or self.ticks < agreed.boundary:
            return False
        if agreed.rank != self.rank or agreed.why != DONE:
            notes.append(agreed.describe(self.rank))
        return True

    def ask_deadline(self) -> bool:
        """One rank of several at --max-seconds: ask every rank to stop soon (once); whether it
        was asked now (stopped at once, this rank could leave the others in a collective)."""
        if self._deadline_asked or not self.active():
            return False
        self._deadline_asked = True
        self.propose(self.ticks, "--max-seconds")
        return True

    def stop_at(self) -> Agreed | None:
        """The agreed stop, once a rank proposed one (a store request until then)."""
        if self.agreed is not None:
            return self.agreed
        store = self._connect()
        if store is None or not self._call(lambda: store.check([_KEY])):
            return None
        raw = self._call(lambda: store.get(_KEY))
        if raw:
            at, rank, why = bytes(raw).decode().split(":", 2)
            self.agreed = Agreed(int(at), int(rank), why)
        return self.agreed

    def _call(self, request: Any) -> Any:
        try:
            return request()
        except Exception:  # the store went away (destroy_process_group): agree no more
            self._off, self._store = True, None
            return None

    def _connect(self) -> Any:
        if self._store is not None or self._off:
            return self._store
        dist = sys.modules.get("torch.distributed")  # only a script that imported it has ranks
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        try:
            if dist.get_world_size() < 2:
                self._off = True
                return None
            self.rank = dist.get_rank()
            store = dist.distributed_c10d._get_default_store()
            self._store = dist.PrefixStore("torchpace/", store)
        except Exception:  # a store-less backend or an older torch: each rank stops alone
            self._off = True
        return self._store
