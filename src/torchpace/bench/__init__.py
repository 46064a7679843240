"""`torchpace bench`: measure each technique's speedup, alone and stacked, side by side.

`run_bench(workload, device, settings)` plans a naive baseline, each technique on its own, the
cumulative recipe and the data-on-device ceiling, measures them round-robin and returns a
`BenchResult`; `to_jsonl` writes it as JSON lines, and its reporters (a table, a page) are in
`torchpace.report.bench`, with the other reporters.
"""

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.harness import plan, run_bench
from torchpace.bench.results import BenchResult, ConfigResult, read_jsonl, to_jsonl
from torchpace.bench.technique import Technique
from torchpace.bench.techniques import all_techniques, get_technique
from torchpace.bench.workloads import Workload, get_workload

__all__ = [
    "BenchResult",
    "BenchSettings",
    "ConfigResult",
    "RunConfig",
    "Technique",
    "Workload",
    "all_techniques",
    "get_technique",
    "get_workload",
    "plan",
    "read_jsonl",
    "run_bench",
    "to_jsonl",
]
