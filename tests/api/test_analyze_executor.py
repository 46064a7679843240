"""A folder's ranks mapped over any concurrent.futures.Executor, each reduced where it is decoded."""

from __future__ import annotations

import gc
import shutil
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torchpace
from torchpace.doctor.summary import RankJob
from torchpace.report.jsondoc import render_json
from torchpace.teardown import no_teardown
from torchpace.trace import Trace

TRACES = Path(__file__).parents[1] / "fixtures" / "traces"
STRAGGLER = TRACES / "ddp_gloo_2rank" / "straggler_seqlen"


class CountingPool(ProcessPoolExecutor):
    """A real process pool that counts the tasks it is given."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.tasks = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.tasks += 1
        return super().submit(fn, *args, **kwargs)


def _folder(tmp_path: Path) -> Path:
    """The straggler run's two ranks, a corrupt third rank and a file that is no trace."""
    folder = tmp_path / "run"
    shutil.copytree(STRAGGLER, folder)
    (folder / "rank2.json").write_text('{"traceEvents": [')
    (folder / "config.txt").write_text("lr=0.1")
    return folder


def test_a_process_pool_gives_the_report_of_one_process(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    chosen = {
        "ignore": ["comm-overlap"],
        "thresholds": {"rank-imbalance": {"min_spread_fraction": 0.1}},
    }
    with CountingPool() as pool:
        pooled = torchpace.analyze(folder, executor=pool, **chosen)  # type: ignore[arg-type]
    assert pool.tasks == 3  # one per file named like a trace: each rank decoded in the pool
    alone = torchpace.analyze(folder, jobs=1, **chosen)  # type: ignore[arg-type]
    assert render_json(pooled) == render_json(alone)
    assert pooled.slowest_rank == 1 and "rank-imbalance" in {f.rule for f in pooled.findings}
    assert "comm-overlap" not in {f.rule for f in pooled.findings}
    assert any("rank2.json" in n and "config.txt" in n for n in [" ".join(pooled.notes)])


def test_a_summarised_rank_leaves_no_trace_behind(tmp_path: Path) -> None:
    """Inside no_teardown (the command's GC off, decoded data kept till exit) too: a folder of
    1,024 ranks holds one rank's events at a time per process, not all of them."""
    path = tmp_path / "rank1.json.gz"  # a path no other test's cached Trace has
    shutil.copy(STRAGGLER / "rank1.pt.trace.json.gz", path)
    with no_teardown(enabled=True):
        summary = RankJob()(str(path))
        alive = [o for o in gc.get_objects() if type(o) is Trace and o.info.path == str(path)]
    assert not isinstance(summary, str) and summary.facts.work.work_ms > 0
    assert alive == []


def test_an_unreadable_rank_comes_back_as_its_error(tmp_path: Path) -> None:
    bad = tmp_path / "rank0.json"
    bad.write_text("{}")
    said = RankJob()(str(bad))
    assert isinstance(said, str) and "rank0.json" in said and "traceEvents" in said
