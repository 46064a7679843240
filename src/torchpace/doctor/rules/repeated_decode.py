"""A map-style dataset decodes (and resizes) the same samples again every epoch: keep them instead.

Judged under `torchpace doctor` from live evidence only: the steps wait on the loader, and two
reads of the same samples (runner/sensors/samples.py) were equal, drew no random numbers and
spent their time computing. Random augmentation is never cached: a dataset whose reads differ or
draw from a generator is left alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, judged_so, rule
from torchpace.policy.threads import LOADING, WORKERS
from torchpace.trace.stats import fmt_bytes

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.loader import LoaderFacts
    from torchpace.runner.sensors.samples import SampleProbe

METHOD = (
    "estimate, from the second epoch on: the step x the loader wait's share of it x the part of "
    "the wait that batch size x what one sample's read costs beyond a read from memory (CPU "
    "times of both, measured) accounts for (a CPU "
    "run without workers: shares of the training thread's CPU time; with workers, which read in "
    "parallel: min(wait, reads / workers) of the wall-time wait)"
)
# A read costing less than this many reads from memory (a TensorDataset of as many tensors)
# decodes nothing worth keeping: the sweep's TensorDataset, 0.010 ms a read, was told to cache
# itself.
MIN_DECODE_RATIO = 3.0
FIX = """\
# Decode and resize every sample once (with workers, in one pass), then train from memory.
# Only the deterministic part: random augmentation stays per read, after the cache.
xs, ys = zip(*DataLoader(dataset, batch_size=256, num_workers={workers}))
dataset = TensorDataset(torch.cat(xs), torch.cat(ys))  # {size} in memory
loader = DataLoader(dataset, batch_size={batch}, shuffle=True)"""
DISK_FIX = """\
# {size} will not fit in memory: write the decoded, resized samples once to a file, and read it
# memory-mapped (the page cache serves every worker). Random augmentation stays per read.
cache = np.lib.format.open_memmap("decoded.npy", mode="w+", dtype=np.uint8, shape=(n, *shape))
for i in range(n):
    cache[i] = decode_and_resize(i)  # once; store uint8 pixels, normalise per read
# __getitem__: x = torch.from_numpy(np.load("decoded.npy", mmap_mode="r")[i])"""

# PyG collates graphs of any size: no TensorDataset; its datasets run `pre_transform` once instead.
PYG_FIX = """\
# PyG runs `transform` at every read; as `pre_transform` it runs once, when the dataset is
# processed, and is saved with it (remove the dataset's processed/ folder once so it runs):
dataset = {dataset}(..., pre_transform={transform})  # instead of transform={transform}
# or keep the transformed graphs in memory ({size}), for the same DataLoader:
dataset = [dataset[i] for i in range(len(dataset))]"""


def _read_ms(value: float) -> str:
    return f"{value:.1f} ms" if value >= 0.1 else f"{value:.3f} ms"


@rule("repeated-decode", input="live")
def repeated_decode(
    live: Inspection,
    *,
    min_wait_fraction: float = 0.10,
    min_compute_share: float = 0.5,
    min_saving_fraction: float = 0.05,
    max_cache_fraction: float = 0.5,
) -> list[Finding]:
    """Fire when the steps wait `min_wait_fraction` on a loader whose samples read the same twice,
    computing (`min_compute_share` of each read), and caching saves `min_saving_fraction` of the
    step. `max_cache_fraction`: the share of available memory a cache in memory may take."""
    if not live.loaders:
        raise NotApplicable("the script created no DataLoader")
    if not live.step_ms:
        return []
    found: list[Finding] = []
    unjudged: list[tuple[LoaderFacts, SampleProbe, float]] = []
    for f in live.loaders:
        probe = _decoding(live, f, min_compute_share)
        if probe is None:
            continue
        shares = _shares(live, f, probe)
        if shares is None:
            continue
        loaded = ""
        if shares[0] < min_wait_fraction or shares[1] < min_saving_fraction:
            if _load_proof(live, f):
                continue  # shares the load did not change: under the line, nothing found
            loaded = _loaded(live, shares, min_wait_fraction, min_saving_fraction, _loading(f))
            if not loaded:
                if not _cleared(live, f, shares, min_wait_fraction, min_saving_fraction):
                    unjudged.append((f, probe, shares[0]))
                continue
        step = live.saving_step_ms or live.step_ms
        finding = _finding(step, f, probe, shares, max_cache_fraction)
        judged = judged_so(finding, live, loaded, _loading(f))
        found.append(replace(judged, load_proof=_load_proof(live, f)))
    if not found and unjudged:
        _not_judged(live, *max(unjudged, key=lambda x: x[2]), min_wait_fraction)
    return found


def _decoding(live: Inspection, f: LoaderFacts, min_compute_share: float) -> SampleProbe | None:
    """The probe of a loader whose samples decode again each epoch of this run, else None."""
    probe = f.sample_probe
    if probe is None or _read_once(live, f) or not _decodes_again(f, probe, min_compute_share):
        return None
    return probe


def _read_once(live: Inspection, f: LoaderFacts) -> bool:
    """A loader no training step read, iterated once in a run that ended by itself: nothing is
    read again to cache (pytorch/examples' mnist_hogwild trains in child processes; its main
    process evaluates the test set once, which read as 60% of the step saved). A training loader
    keeps its finding: the user's `--epochs 1` run stands for a longer one."""
    return live.ran_to_end and f.epochs_started <= 1 and f.trained_batches == 0


def _decodes_again(f: LoaderFacts, probe: SampleProbe, min_compute_share: float) -> bool:
    """Whether the loader's samples read the same twice, computing, while the steps wait on it.
    A PyG InMemoryDataset without a transform keeps each graph it built: a read's cost is PyG's
    copy of it, nothing cached saves it (PyG's compiled GIN on MUTAG, one loaded run: 0.049 ms a
    read, 3.06x the in-memory twin, told to stack graphs into a TensorDataset)."""
    if not _deterministic(probe) or not f.wait_ms_per_batch or f.pyg_in_memory:
        return False
    # Read from memory already, or as cheaply, there is nothing to cache.
    return (
        _compute_share(probe) >= min_compute_share
        and probe.cpu_ms >= MIN_DECODE_RATIO * probe.cached_ms
    )


def _not_judged(
    live: Inspection, f: LoaderFacts, p: SampleProbe, share: float, least: float
) -> None:
    """A loader that decodes the same samples each epoch, whose share stayed under the line even
    with the training thread's wait for a core taken out while other processes held the cores:
    its compute's threads also spin at each op's barrier, which that wait does not count, so the
    share says nothing of a quiet run (pytorch/examples' MNIST: 24% quiet, 3.3% in one loaded
    run, 6.6% without the wait). Not judged, never nothing found."""
    c = live.contention()
    if c is None:
        return
    why = c.unjudged(f.wait_fraction, least, _loading(f)) if f.wait_fraction else c.why()
    raise NotApplicable(
        f"{f.dataset_type} computes each sample again every epoch ({_read_ms(p.cpu_ms)} of CPU "
        f"per read), but its share of the step ({share:.1%}) was not judged: {why}",
        c.enable(),
    )


def _cleared(
    live: Inspection,
    f: LoaderFacts,
    shares: tuple[float, float],
    least_wait: float,
    least_saving: float,
) -> bool:
    """Whether shares under the line, read without contention or under a quiet ceiling that
    steps at fewer threads measured (Contention.cleared), are nothing found. That ceiling is of
    the wait's wall time, which the profiled step holds (the CPU time shares' step holds the
    threads' spinning); the saving keeps its part of the wait."""
    c = live.contention()
    if c is None:
        return True
    if not f.wait_fraction or not shares[0]:
        return False
    saved, loading = f.wait_fraction * shares[1] / shares[0], _loading(f)
    return c.cleared(f.wait_fraction, least_wait, loading) or c.cleared(
        saved, least_saving, loading
    )


def _loading(f: LoaderFacts) -> str:
    """What the load stretches besides the compute: workers' loading too (policy/threads.py)."""
    return WORKERS if f.num_workers else LOADING


def _loaded(
    live: Inspection,
    shares: tuple[float, float],
    least_wait: float,
    least_saving: float,
    loading: str,
) -> str:
    """The caveat of shares judged with the training thread's wait for a core taken out of the
    step, when other processes held the cores and both pass so (MNIST beside two busy loops:
    24% of the step quiet, 5.5% loaded, 12.5% without that wait); "" when they do not (the
    loader is then not judged: `_not_judged`)."""
    c = live.contention()
    if c is None:
        return ""
    if not (
        c.judges(shares[0], least_wait, loading) and c.judges(shares[1], least_saving, loading)
    ):
        return ""
    return c.judged(shares[0], loading)


def _deterministic(p: SampleProbe) -> bool:
    return p.same is True and not p.draws_random


def _compute_share(p: SampleProbe) -> float:
    """How much of a read computes (load-proof where the scheduler's statistics were read)."""
    if p.compute_share is not None:
        return p.compute_share
    return p.cpu_ms / p.wall_ms if p.wall_ms > 0 else 0.0


def _cpu_shares(live: Inspection, f: LoaderFacts) -> bool:
    """Whether the loader reads on the training thread of a CPU run: judged by CPU time shares."""
    return f.num_workers == 0 and live.device.kind == "cpu" and bool(f.wait_cpu_fraction)


def _load_proof(live: Inspection, f: LoaderFacts) -> bool:
    """Whether the finding's shares are ones the machine's load does not change: CPU time shares,
    unless torch's threads outnumbered the cores other processes left free; their spinning at
    each op's barrier then fills the training thread's CPU time (MNIST's loader: 24% of it quiet,
    5.5% beside two busy loops). One torch thread a rank (torchrun's default) has no barrier to
    spin at, however many ranks share the cores: its CPU time is its own work, and taking its
    wait for a core out of a share of CPU time would only inflate it."""
    if not _cpu_shares(live, f):
        return False
    return live.contention() is None or live.host.torch_threads == 1


def _shares(live: Inspection, f: LoaderFacts, p: SampleProbe) -> tuple[float, float] | None:
    """(the steps' share spent waiting on the loader, the share caching saves).

    A CPU run reading in the main process (no workers): shares of the training thread's CPU time,
    the same on a quiet and a busy machine; the reads run inside the wait, so they save their
    part of its CPU time. Otherwise (workers, or a GPU clocking the step): shares of wall time,
    and workers read in parallel: min(wait, reads / workers) per batch.
    """
    wait = f.wait_ms_per_batch or 0.0
    reads = (p.cpu_ms - p.cached_ms) * (f.batch_size or 1)
    if _cpu_shares(live, f) and f.wait_cpu_fraction:
        if f.wait_cpu_share is None:
            return None
        wait_cpu = wait * f.wait_cpu_fraction
        return f.wait_cpu_share, f.wait_cpu_share * min(1.0, reads / wait_cpu)
    if f.wait_fraction is None:
        return None
    return f.wait_fraction, f.wait_fraction * min(wait, reads / max(1, f.num_workers)) / wait


def _finding(
    step_ms: float,
    f: LoaderFacts,
    p: SampleProbe,
    shares: tuple[float, float],
    max_cache_fraction: float,
) -> Finding:
    waiting, saved = shares
    saving = saved * step_ms
    size = p.sample_bytes * p.dataset_len
    fits = p.available_bytes is None or size <= max_cache_fraction * p.available_bytes
    where = f" (DataLoader at {f.created_at.file}:{f.created_at.line})" if f.created_at else ""
    evidence: dict[str, EvidenceValue] = {
        "wait_fraction": round(waiting, 4),
        "wait_ms_per_batch": round(f.wait_ms_per_batch or 0.0, 3),
        "sample_cpu_ms": round(p.cpu_ms, 3),
        "cached_read_cpu_ms": round(p.cached_ms, 4),
        "sample_compute_fraction": round(_compute_share(p), 3),
        "batch_size_count": f.batch_size,
        "workers_count": f.num_workers,
        "sample_bytes": p.sample_bytes,
        "cache_bytes": size,
        "available_bytes": p.available_bytes,
        "dataset_len_count": p.dataset_len,
        "dataset_type_name": f.dataset_type,
    }
    template = PYG_FIX if f.pyg_transform else FIX if fits else DISK_FIX
    fix = template.format(
        size=fmt_bytes(size), workers=max(2, f.num_workers), batch=f.batch_size or 1,
        dataset=f.dataset_type, transform=f.pyg_transform,
    )  # fmt: skip
    return Finding(
        rule="repeated-decode",
        severity=Severity.HIGH if saving >= 0.30 * step_ms else Severity.MEDIUM,
        summary=f"{f.dataset_type} computes each sample again every epoch ({_read_ms(p.cpu_ms)} of "
        f"CPU per read, the same result each time) while the steps wait {waiting:.0%} "
        f"of their time for it; decoded once and kept ({fmt_bytes(size)}), later epochs would skip "
        f"it{where}",
        evidence=evidence,
        fix=fix,
        saving_ms=round(saving, 3),
        saving_method=METHOD,
        locations=(f.created_at,) if f.created_at else (),
        caveat="Judged from two reads of two samples: random augmentation that draws from a "
        "generator of its own, and rarely changes a sample, can read the same twice; keep every "
        "random transform after the cache. The first epoch still decodes: a run of one epoch "
        "gains nothing.",
    )
