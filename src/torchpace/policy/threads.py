"""How many torch threads one process should use: one answer for the `cpu-threads` rule, its
`doctor --verify` applier, `torchpace env`, the worker policy's cores per rank and the doctor's own
torchrun launch (which must not trip the rule it is judged by)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


def local_ranks() -> int:
    """The ranks sharing this machine's cores: torchrun's LOCAL_WORLD_SIZE, else 1 (the worker
    policy, fast_loader, the profiler's memory budget and the load readings ask this)."""
    value = os.environ.get("LOCAL_WORLD_SIZE", "1")
    return max(1, int(value)) if value.isdigit() else 1


def cores_per_process(cores: int, local_ranks: int = 1) -> int:
    """The usable cores (torchpace.cores.usable_cores) shared out among the processes on this
    machine, at least one each; torch's threads should be this many: more wait for each other in
    every op."""
    return max(1, cores // max(1, local_ranks))


# The share of its step the training thread may wait ready to run, held off a core by other
# processes, before the step's shares stop describing the script: beside two busy loops on 2
# cores pytorch/examples' MNIST ran its 2-thread compute 7.1x slower (490 vs 69 ms a step) and
# its 1-thread loading 1.4x (31.7 vs 22.8 ms), its thread waiting 56% of the step for a core.
MIN_READY_FRACTION = 0.25


LOADING = "the step's compute more than its data loading"  # Contention.why's default
# Loading in worker processes, which the load holds off the cores too: Lightning's GAN, 16
# workers beside two busy loops, waited 2.59 -> 3.77 ms for them (1.46x; its compute 1.38x), 9.7%
# of a quiet step, under the 10% line, and 10.1% with the training thread's wait taken out.
WORKERS = LOADING + ", and its workers' loading about as much as the training thread waited"
# What the load stretches when torch's threads outnumber the free cores: each op waits for its
# slowest thread, some far longer than others, either way. The fp32 matmuls' share of the step
# read 50% quiet and 2.9% loaded (pytorch/examples' word-language LSTM), 0.6% and 5.3%
# (mnist_rnn), 23% and 41% (accelerate's BERT example), each beside two busy loops.
OPS = "each op by as long as its slowest thread waited for a core, some ops far more than others"
# How much slower one thread's work may run on a core it shares with other processes, its wait
# for the core aside: a 1-thread 256x256 matmul with a relu and a sum took 0.345 ms of CPU time
# quiet, 0.353 beside two busy loops on 2 cores (+3%); the rest is margin for caches and clocks.
SHARED_CORE = 1.1


# How much slower the rest of a step may run at the script's threads than at fewer, for the least
# matmul share (FewerThreads.math_share). Without it 4 of 17 single-process runs beside two busy
# loops drew a least over the share their quiet run read: hf-clm 23% against 20.2%, ignite's MNIST
# 23% against 21.7%, TRL 21% against 20.7%, Lightning's autoencoder 6% against under 5% (a LOW its
# quiet run lacked). The largest of those needed 1.26; the rest is margin.
REST_SLOWER = 1.5


@dataclass(frozen=True)
class FewerThreads:
    """The script's steps timed at torch's thread count fitted to the free cores, beside steps
    at its own count, unprofiled, right after the profiled window of a busy machine's CPU run
    (runner/window.py). The compute's threads spin at each op's barrier while one waits for a
    core, so the fewer threads' steps are shorter (cpu-contention's measured saving), while the
    loading, on one thread, is slowed less (pytorch/examples' VAE beside two busy loops: 78 ms
    unprofiled steps at 2 threads, 35 ms at 1, 15 ms of loading in the profiled ones), by how
    much its batches' wait there says (`loading`)."""

    threads: int  # the script's torch threads
    fewer: int  # the count the probe ran at
    step_ms: float  # median unprofiled step at `threads`
    fewer_ms: float  # median step at `fewer`
    steps: int  # steps timed at `fewer`
    # Run eager (torch.compiler.set_stance("force_eager")): a compiled run's frames would compile
    # again at another count. Eager is no faster than compiled, so these steps still bound the
    # quiet step from above (the floor), but not its compute from below (no ceiling, no saving).
    eager: bool = False
    # The loaders' wait per batch in these steps over the profiled steps' (None: unmeasured).
    # Under 1 where the script's own threads stretched its loading too: accelerate's BERT
    # example beside two busy loops waited 1.9 ms a step for batches at 2 threads, 1.0 ms
    # quiet, its spinning compute thread holding the free core.
    loading: float | None = None
    # The matmul/convolution time of a step at `fewer`, and that step's, from steps profiled as
    # the window was, after these (runner/math_clock.py; None: unmeasured). At no more threads
    # than free cores no op waits at a barrier for a thread held off its core, so the share is
    # what a quiet run's profiled steps at `fewer` threads read (`math_share`).
    math_ms: float | None = None
    math_step_ms: float = 0.0
    math_ready_ms: float | None = None  # the training thread's wait for a core in that step
    math_waits: int = 0  # the times it was put on a core over those steps (each wait ends so)

    def math_share(self) -> tuple[float, float] | None:
        """The least and the most the matmul/convolution share of a quiet profiled step at the
        script's threads can be, from its share at `fewer`: its threads speed the matmuls at most
        threads/fewer times, and the rest of the step runs at most REST_SLOWER times slower (the
        profiler's own cost, per op, included). From 2 threads to 1, a share of 30% at 1 thread
        is 12-46% at 2; unmeasured or compiled (eager here): None.

        The thread's waits for a core (one thread: no op waits at a barrier) each hold a time
        slice, wherever it fell: in a matmul or in the rest, in proportion to their time, give
        or take chance (`_math_waits`). The most takes none of them as the matmuls' (a matmul's
        own time is at most its wall time): a share of a few percent meets a handful of waits at
        most (Lightning's autoencoder: 0.46 ms of matmuls in an 8.4 ms step quiet, 5.4%; beside
        two busy loops, under 2.6% at one thread)."""
        if self.math_ms is None or self.math_step_ms <= 0 or self.eager:
            return None
        own = self.math_step_ms - (self.math_ready_ms or 0.0)
        if own <= 0:
            return None
        speed = max(1.0, self.threads / max(1, self.fewer))
        slower = REST_SLOWER if speed > 1.0 else 1.0
        low = max(0.0, min(1.0, (self.math_ms - self._math_waits(self.math_ms)) / own))
        high = min(1.0, self.math_ms / own)
        least = low / (low + speed * slower * (1.0 - low)) if low > 0 else 0.0
        most = speed * high / (speed * high + 1.0 - high) if high < 1.0 else 1.0
        return least, most

    def _math_waits(self, math_ms: float) -> float:
        """The most of the thread's waits for a core (ms a step) that fell in its matmuls: their
        share of the step's, and two standard deviations of chance over the waits counted (each
        lands in a matmul with that share's odds); all of them where they were not counted."""
        waited, share = self.math_ready_ms or 0.0, min(1.0, math_ms / self.math_step_ms)
        if waited <= 0:
            return 0.0
        if self.math_waits < 1:
            return min(waited, math_ms)
        spread = 2.0 * math.sqrt(share * (1.0 - share) / self.math_waits)
        return min(waited * (share + spread), waited, math_ms)

    @property
    def loading_kept(self) -> float:
        """The share of the profiled loading's wall time the loading took at fewer threads: at
        most all of it (loading that runs faster on more threads is not judged by this)."""
        return min(1.0, self.loading) if self.loading else 1.0

    @property
    def stretch(self) -> float:
        return self.step_ms / self.fewer_ms if self.fewer_ms > 0 else 1.0

    def said(self) -> str:
        eager = " eager (its compiled frames set aside)" if self.eager else ""
        loading = (
            f"; their batches took {self.loading_kept:.0%} of the profiled steps' wait"
            if self.loading_kept < 1.0
            else ""
        )
        return (
            f"{self.steps} steps at torch.set_num_threads({self.fewer}){eager} took "
            f"{self.fewer_ms:.1f} ms against {self.step_ms:.1f} ms at {self.threads}, medians of "
            f"unprofiled steps timed side by side after the profiled ones{loading}"
        )


@dataclass(frozen=True)
class Contention:
    """torch's threads outnumbering the cores other processes left free, measured over the
    profiled steps."""

    used: int  # torch threads x ranks on this machine
    free: int  # cores the other processes left free
    waited: float  # share of the step the training thread waited ready to run, off a core
    step_ms: float = 0.0  # the profiled step the shares are of
    fewer: FewerThreads | None = None  # the steps timed at fewer threads, where they were
    threads: int = 0  # torch threads of one process (`used` counts every rank's)
    # Whether other processes took a core or more: else the run's own processes, their threads
    # more than the cores (2 Hogwild trainers of 2 threads on 2 quiet cores).
    others: bool = True

    @property
    def ranks(self) -> int:
        """The processes whose threads `used` counts."""
        return self.used // max(1, self.threads)

    def why(self, stretched: str = LOADING) -> str:
        """Why a share of the step was read under the load; `stretched`: what the load
        stretches more than the share's own work (nothing, at one thread a process)."""
        if not self.others:
            return (
                f"the run's own processes held the cores ({self.ranks} processes x {self.threads} "
                f"torch thread(s) on {self.free} core(s), and the training thread waited "
                f"{self.waited:.0%} of its step for one)"
                + ("" if self.one_thread else f", which stretches {stretched}")
            )
        if self.one_thread:
            return (
                f"other processes held the cores ({self.used} processes of one torch thread "
                f"shared {self.free} free core(s), and the training thread waited "
                f"{self.waited:.0%} of its step for one)"
            )
        return (
            f"other processes held the cores ({self.used} torch thread(s) shared {self.free} "
            f"free core(s), and the training thread waited {self.waited:.0%} of its step for "
            f"one), which stretches {stretched}"
        )

    @property
    def one_thread(self) -> bool:
        """Whether each process runs one torch thread (torchrun's default): no op waits at a
        barrier for a thread held off its core, so the step less the training thread's wait for
        a core is its own work (several ranks take turns on the free cores)."""
        return self.threads == 1

    def enable(self) -> str:
        """How to get a share of the step that describes the script."""
        if not self.others:
            if self.one_thread:
                return "run fewer processes than cores"
            n = max(1, self.free // self.ranks)
            return f"run each process with torch.set_num_threads({n}) (OMP_NUM_THREADS={n})"
        if self.one_thread:
            return "run again on a quieter machine, or with fewer ranks than free cores"
        return f"run again on a quieter machine, or with torch.set_num_threads({self.free})"

    def measured(self, stretched: str = LOADING) -> bool:
        """Whether the steps at fewer threads measured how much more the load stretched the
        step than the share's own work: the loading's share (a matmul's own time is stretched
        too, by an amount they do not tell)."""
        return self.fewer is not None and stretched in (LOADING, WORKERS)

    def factor(self, stretched: str = LOADING) -> float:
        """How much more the load stretched the step than the share's own work, at least: the
        step over the step without the training thread's wait for a core (the threads' spinning
        at each op's barrier is not in that wait), or, for loading, the profiled step over the
        unprofiled one at fewer threads where that is more (`_by_fewer`). One thread a process
        has no barrier to spin at: its wait for a core stretches its compute and the share's own
        work alike (its loading, its matmuls), so the share is as read (Lightning's ddp_spawn
        autoencoder, 2 processes of 1 thread beside two busy loops: fp32 matmuls 3.2% of the
        step, 5.2% with the wait taken out of the step alone, under 5% quiet)."""
        if self.one_thread:
            return 1.0  # the wait for a core stretched all of the thread's work alike
        waited = 1.0 / (1.0 - self.waited) if self.waited < 1.0 else float("inf")
        factor = max(waited, self._fewer_factor(stretched))
        return factor * (1.0 - self.waited) if stretched == WORKERS else factor

    def _fewer_factor(self, stretched: str) -> float:
        """The profiled step over the unprofiled one at fewer threads (the VAE's 15 ms of
        loading: 474 ms profiled steps, 35 ms at 1 thread, 43% of it; 44% of a quiet run's
        1-thread step), times the share of the profiled loading's time its batches took there
        (`FewerThreads.loading_kept`): a share times this is the loading's share of those
        steps, the floor; 0 unmeasured."""
        f = self.fewer
        if f is None or f.fewer_ms <= 0 or not self.measured(stretched):
            return 0.0
        kept = f.loading_kept if stretched == LOADING else 1.0
        return self.step_ms / f.fewer_ms * kept

    def _by_fewer(self, stretched: str) -> bool:
        """Whether the steps at fewer threads gave the factor (not the wait for a core)."""
        fewer = self._fewer_factor(stretched)
        return fewer > 1.0 and fewer * (1.0 - self.waited) >= 1.0

    def unloaded(self, share: float, stretched: str = LOADING) -> float:
        """A share of the step with what the load stretched taken out of the step: at most what
        a quiet run measures (more threads rarely compute slower than fewer)."""
        return min(1.0, share * self.factor(stretched))

    def judges(self, share: float, least: float, stretched: str = LOADING) -> bool:
        """Whether the share, the load's stretch taken out, passes the rule's line `least`."""
        return self.unloaded(share, stretched) >= least

    def ceiling(self, share: float, stretched: str = LOADING) -> float:
        """The most the share can be on a quiet machine at the script's threads: its own time
        against the steps at fewer threads, their compute sped up at most in proportion to the
        threads (pytorch/examples' MNIST beside two busy loops: 13.8 ms of loading, 171 ms steps
        at 1 thread, 8.1% of them, at most 15% at 2; its quiet run read 14%). 1.0 where steps at
        fewer threads did not measure it, unless one torch thread a process leaves the step less
        its wait for a core as the quiet compute (`_one_thread_ceiling`)."""
        f = self.fewer
        if f is None and self.one_thread:
            return self._one_thread_ceiling(share)
        if f is None or f.eager or not self.measured(stretched):
            return 1.0
        # The profiled wait, not the batches' time at fewer threads (`_fewer_factor`'s): there
        # the load stretched the compute more than the loading (MNIST beside two busy loops:
        # 208 ms steps at one thread, 84 quiet; 10.7 ms of loading, 8.7 quiet), so a ceiling of
        # theirs read 9.8% where the quiet run reads 14%.
        own = share * self.step_ms
        compute = max(0.0, f.fewer_ms - own) * f.fewer / f.threads
        return own / (own + compute) if own + compute > 0 else 1.0

    def _one_thread_ceiling(self, share: float) -> float:
        """The share against the step less the training thread's wait for a core, that rest of
        the compute sped up by at most SHARED_CORE on a quiet machine; the share's own work (its
        loading, its matmuls) is at most what it was (pytorch/examples' imagenet resnet18 under torchrun,
        2 ranks of 1 thread beside two busy loops: 0.4% of the step waited for batches, 34% for
        a core; 0.4% quiet)."""
        compute = max(0.0, 1.0 - self.waited - share) / SHARED_CORE
        return min(1.0, share / (share + compute)) if share + compute > 0 else 1.0

    def cleared(self, share: float, least: float, stretched: str = LOADING) -> bool:
        """Whether the share is under the rule's line `least` even at its quiet ceiling: then
        nothing is found, as on a quiet machine."""
        return self.ceiling(share, stretched) < least

    def unjudged(self, share: float, least: float, stretched: str = LOADING) -> str:
        """Why a share was not judged: the load, and where steps at fewer threads bound it."""
        why, ceiling = self.why(stretched), self.ceiling(share, stretched)
        if ceiling >= 1.0:
            return why
        return (
            f"{why}; with the load's stretch taken out it lies between "
            f"{self.unloaded(share, stretched):.1%} and {ceiling:.1%} of a quiet step, around the "
            f"line ({least:.1%})"
        )

    def judged(self, share: float, stretched: str = LOADING) -> str:
        """The caveat of a finding judged on `unloaded(share)`: against steps at fewer threads,
        or with the training thread's wait for a core taken out (the compute's spinning is not
        in that wait, so the share is still at most what a quiet run measures: MNIST 13.7%
        against 24% quiet, 6% as it read); a worker's loading less its own stretch."""
        fewer = self.fewer if self._by_fewer(stretched) else None
        how = "against the steps at fewer threads" if fewer else "with that wait taken out"
        if stretched == WORKERS:
            how += ", less the workers' own stretch"
        said = f" {fewer.said()}." if fewer else ""
        return (
            f"Judged while {self.why(stretched)}: the share read {share:.1%} of the step, "
            f"{self.unloaded(share, stretched):.1%} {how}; a quiet run measures its size.{said}"
        )


def contention(
    threads: int,
    ranks: int,
    cores: int,
    others_cores: float,
    ready_ms_per_step: float,
    step_ms: float,
    min_ready_fraction: float = MIN_READY_FRACTION,
    fewer: FewerThreads | None = None,
    typical_ms: float | None = None,
) -> Contention | None:
    """The contention, or None when torch's threads fit the free cores or hardly waited.
    `step_ms`: the profiled steps' mean, which the run-queue wait per step is of; `typical_ms`:
    their median, which the shares are of and the steps at fewer threads are set against (a
    slow step, an epoch's 16 workers starting, made a mean of 593 ms against a median of 104)."""
    used = threads * max(1, ranks)
    free = max(1, int(cores - others_cores + 0.5))
    waited = ready_ms_per_step / step_ms
    if used <= free or waited < min_ready_fraction:
        return None
    others = free < cores
    return Contention(used, free, waited, typical_ms or step_ms, fewer, threads, others)
