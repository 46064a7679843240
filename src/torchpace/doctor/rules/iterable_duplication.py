"""An IterableDataset read by several workers without sharding: every worker yields every row."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

_FIX = """class Shards(IterableDataset):
    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        wid, n = (info.id, info.num_workers) if info else (0, 1)
        return itertools.islice(self.rows(), wid, None, n)  # each worker takes every n-th row"""


@rule("iterable-duplication", input="live")
def iterable_duplication(live: Inspection) -> list[Finding]:
    """Flag multi-worker IterableDatasets whose code never asks which worker it runs in."""
    loaders = [f for f in live.loaders if f.iterable and f.num_workers > 1]
    if not live.loaders:
        raise NotApplicable("the script created no DataLoader")
    found = []
    for f in loaders:
        if f.shards_by_worker or f.worker_init_fn:
            continue
        repeats = f.duplicate_batches or 0
        where = f" (DataLoader at {f.created_at.file}:{f.created_at.line})" if f.created_at else ""
        seen = f"; {repeats} batch(es) repeated an earlier one" if repeats else ""
        found.append(
            Finding(
                rule="iterable-duplication",
                severity=Severity.HIGH if repeats else Severity.MEDIUM,
                summary=f"{f.dataset_type} runs in {f.num_workers} workers and never calls "
                f"get_worker_info(), so each worker yields the whole stream{seen}{where}",
                evidence={
                    "num_workers": f.num_workers,
                    "duplicate_batches": f.duplicate_batches,
                    "dataset": f.dataset_type,
                },
                fix=_FIX,
                locations=(f.created_at,) if f.created_at else (),
                caveat=""
                if repeats
                else "Judged from the dataset's code: sharding done elsewhere (a wrapper, the "
                "data source itself) is not seen. Each epoch then shows every row "
                f"{f.num_workers} times.",
            )
        )
    return found
