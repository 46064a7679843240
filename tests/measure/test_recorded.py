"""The measurement policy on recorded noisy samples: a real `torchpace bench --repeat 2` run on a
2-core machine at load 4-11 (tests/fixtures/measure/, record_bench.py beside it), replayed through
the core with its recorded run times and loads. Before issue 22 it printed intervals such as
0.37x [0.00-3738620.04]; now none of its ratios is printed, and each says why and what would
settle it."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from pathlib import Path

from torchpace.bench.loop import Measurement
from torchpace.bench.results import BenchResult, Environment, Parity, WorkloadInfo, summarise
from torchpace.measure import Arm, LoadSample, Measured, Settings, Timed, Window, measure
from torchpace.report.bench.text import render_plain

RECORDED = Path(__file__).parents[1] / "fixtures" / "measure" / "bench_vision_tiny_repeat2.json"


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _RecordedLoad:
    """Gives back the load recorded for each run, in order."""

    def __init__(self, samples: list[LoadSample]) -> None:
        self.samples = deque(samples)

    def start(self) -> None:
        """Nothing to remember."""

    def stop(self) -> LoadSample:
        return self.samples.popleft()


def _measurement(costs: list[float]) -> Measurement:
    return Measurement(1000.0 / (sum(costs) / len(costs)), costs, 0.0, 1, "host RSS", 1.0,
                       [1.0], len(costs), len(costs))  # fmt: skip


def replay() -> Measured:
    doc = json.loads(RECORDED.read_text())
    clock, queues = _Clock(), defaultdict(deque)
    for run in doc["runs"]:
        queues[run["arm"]].append(run)

    def arm(name: str) -> Arm:
        def run(window: Window) -> Timed:
            recorded = queues[name].popleft()
            clock.now += recorded["end_s"] - recorded["start_s"]
            costs = recorded["cost_ms"]
            return Timed(tuple(costs), payload=_measurement(costs))

        return Arm(name, run)

    loads = [LoadSample(r["end_s"] - r["start_s"], r["load_avg_1m"], r["other_cores"])
             for r in doc["runs"]]  # fmt: skip
    settings = Settings(warmup=0, steps=30, repeats=2, prime=False)  # as recorded
    arms = [arm(name) for name in doc["arms"]]
    return measure(arms, settings, probe=_RecordedLoad(loads), clock=clock, cores=doc["cores"])


def test_the_recorded_noise_is_inconclusive_for_every_arm_and_says_why() -> None:
    result = replay()
    assert len(result.arms) == 11 and len(result.baseline.runs) == 3
    for arm in result.arms[1:]:
        assert arm.ratio is not None and not arm.ratio.settled()
        assert arm.verdict == "inconclusive", arm.name
        assert arm.why.startswith("inconclusive: run-to-run spread "), arm.why
        assert " at load " in arm.why and " on 2 cores; " in arm.why
    assert result.load.busy and "too busy to measure well" in result.load.warning


def test_the_bench_table_prints_no_ratio_for_an_inconclusive_configuration() -> None:
    result = replay()
    env = Environment("cpu", "cpu", "2.13", None, None, 2, "cpu", "3.11", "linux", "0", "today")
    configs = [
        summarise(a.name, "baseline" if i == 0 else "single", [], {}, a, Parity("same", 0, 0))
        for i, a in enumerate(result.arms)
    ]
    settings = {"steps": 30, "repeat": 2, "max_repeat": None, "warmup": 0}
    bench = BenchResult(env, WorkloadInfo("vision", "samples", "", {}), settings, configs, [])
    text = render_plain(bench)
    assert "[0.00-" not in text and "inconclusive ?" in text
    assert "? num_workers=1: inconclusive: run-to-run spread" in text
