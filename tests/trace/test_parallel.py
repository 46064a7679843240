"""Decoding on several cores gives exactly the trace one process gives, or falls back to it."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from torchpace import cores
from torchpace.trace import Trace, load_trace, load_traces, parallel
from torchpace.trace import load as loader
from torchpace.trace.partial import Partial
from torchpace.trace.read import read_trace_bytes
from torchpace.trace.synthetic import TraceBuilder

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"
FILES = sorted(FIXTURES.rglob("*.json.gz"))
# A pre-Kineto trace is a bare list, with no `traceEvents` key to cut after: read serially.
BARE_LIST = FIXTURES / "pre_kineto" / "cpu_mlp_legacy_profiler.json.gz"
EVENT_LISTS = (
    "host_ops",
    "python_frames",
    "runtime",
    "kernels",
    "copies",
    "memsets",
    "syncs",
    "gpu_annotations",
    "steps",
)


@pytest.fixture(autouse=True)
def _no_children_left() -> Iterator[None]:
    """Every forked worker is reaped: none is left running or as a zombie."""
    yield
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def assert_same(a: Trace, b: Trace) -> None:
    for name in EVENT_LISTS:
        assert getattr(a, name) == getattr(b, name), name
    for x, y in zip(a.memory.columns(), b.memory.columns(), strict=True):
        assert [v if v == v else None for v in x] == [v if v == v else None for v in y]  # NaN
    assert a.info == b.info
    assert a.main_tid == b.main_tid


def test_this_machine_can_fork() -> None:
    # Otherwise every test below would only see the serial fallback.
    assert parallel.can_fork(), f"threads alive: {threading.enumerate()}"


@pytest.mark.parametrize("jobs", [2, 3])
@pytest.mark.parametrize(
    "path", [f for f in FILES if f != BARE_LIST], ids=lambda p: str(p.relative_to(FIXTURES))
)
def test_chunks_give_the_serial_trace(path: Path, jobs: int) -> None:
    data = read_trace_bytes(path)
    chunked = loader._decode_in_chunks(data, jobs)
    assert chunked is not None, "the document should cut between events"
    serial = loader._partial_of_file(path.name, data, 1)
    assert_same(loader._trace_of(path, chunked), loader._trace_of(path, serial))


def test_a_bare_list_is_read_serially() -> None:
    assert loader._decode_in_chunks(read_trace_bytes(BARE_LIST), 2) is None
    assert_same(load_trace(BARE_LIST, jobs=2), load_trace(BARE_LIST))


@pytest.mark.parametrize("scenario", ["balanced", "straggler_seqlen"])
def test_a_folder_of_ranks_on_several_cores(scenario: str) -> None:
    folder = FIXTURES / "ddp_gloo_2rank" / scenario
    for a, b in zip(load_traces(folder, jobs=2), load_traces(folder), strict=True):
        assert_same(a, b)


def _names_full_of_separators(tmp_path: Path) -> Path:
    b = TraceBuilder()
    b.step(1, 0, 10_000)
    for i in range(200):
        b.op("x}, {" * 40 + str(i), 10 + i * 40, 30)  # names hold what a cut looks for
    return b.write(tmp_path / "synthetic_separators_in_names.json")


def test_a_cut_inside_a_string_falls_back_to_one_process(tmp_path: Path) -> None:
    path = _names_full_of_separators(tmp_path)
    data = read_trace_bytes(path)
    assert loader._decode_in_chunks(data, 3) is None
    assert_same(load_trace(path, jobs=3), load_trace(path))


def test_a_cut_past_the_events_falls_back(tmp_path: Path) -> None:
    doc = json.loads(read_trace_bytes(_names_full_of_separators(tmp_path)))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "x}" not in e["name"]]
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                               "tid": 1, "ts": 50, "dur": 5})  # fmt: skip
    doc["logs"] = [{"line": i} for i in range(5000)]  # objects after the array, no `ph`
    path = tmp_path / "synthetic_long_tail.json"
    path.write_text(json.dumps(doc, indent=1))
    assert loader._decode_in_chunks(read_trace_bytes(path), 2) is None
    assert_same(load_trace(path, jobs=2), load_trace(path))


def test_a_corrupt_file_fails_the_same_way_in_parallel(tmp_path: Path) -> None:
    good = (FIXTURES / "healthy" / "cpu_fast_loader.json.gz").read_bytes()
    path = tmp_path / "cut_short.json"
    path.write_bytes(gzip.decompress(good)[:-5000])
    with pytest.raises(Exception) as serial:
        load_trace(path)
    with pytest.raises(Exception) as chunked:
        load_trace(path, jobs=2)
    assert str(chunked.value) == str(serial.value)
    assert "is not valid JSON" in str(serial.value)


@pytest.mark.parametrize("bad", ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"])
def test_a_corrupt_rank_in_a_folder_is_left_out_the_same_way(tmp_path: Path, bad: str) -> None:
    folder = FIXTURES / "ddp_gloo_2rank" / "balanced"
    for f in folder.glob("*.json.gz"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / bad).write_bytes(b"\x1f\x8b not gzip")  # in this process's share, or a worker's
    serial, forked = load_traces(tmp_path), load_traces(tmp_path, jobs=2)
    assert len(serial) == len(forked) == 1
    assert_same(serial[0], forked[0])
    assert (
        serial[0].info.notes[-1].startswith(f"left out of the analysis: {bad} is not a valid gzip")
    )


def _two_event_lists(tmp_path: Path) -> Path:
    """A document whose `traceEvents` key is written twice, each list holding 400 ops."""
    lists = []
    for first in (True, False):
        b = TraceBuilder()
        b.step(1 if first else 2, 0, 100_000)
        for i in range(400):
            b.op(f"aten::{'first' if first else 'second'}{i % 5}", 10 + i * 200, 150)
        lists.append(json.dumps(b.document()["traceEvents"]))
    path = tmp_path / "synthetic_two_event_lists.json"
    path.write_text(f'{{"schemaVersion": 1, "traceEvents": {lists[0]}, "traceEvents": {lists[1]}}}')
    return path


@pytest.mark.parametrize("jobs", [2, 3, 4])
def test_a_second_event_list_wins_in_one_process_and_in_several(tmp_path: Path, jobs: int) -> None:
    path = _two_event_lists(tmp_path)
    assert loader._decode_in_chunks(read_trace_bytes(path), jobs) is None  # seen in some chunk
    serial = load_trace(path)
    assert {o.name[:12] for o in serial.host_ops} == {"ProfilerStep", "aten::second"}
    assert_same(load_trace(path, jobs=jobs), serial)


def _part() -> list[Partial]:
    data = read_trace_bytes(FIXTURES / "healthy" / "cpu_fast_loader.json.gz")
    return [loader._partial_of_file("x", data, 1)]


def _fails() -> list[Partial]:
    raise ValueError("a worker's task failed")


def _dies() -> list[Partial]:
    os._exit(3)


def test_workers_report_in_task_order_and_failures_as_none() -> None:
    results = parallel.run_parallel([_part, _fails, _part, _dies])
    assert results[1] is None and results[3] is None
    assert results[0] == results[2] == _part()


def test_no_process_to_fork_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refuse)
    assert parallel.run_parallel([_part, _part]) == [_part(), None]
    path = FIXTURES / "healthy" / "cpu_fast_loader.json.gz"
    assert_same(load_trace(path, jobs=2), load_trace(path))
    folder = FIXTURES / "ddp_gloo_2rank" / "balanced"
    for a, b in zip(load_traces(folder, jobs=2), load_traces(folder), strict=True):
        assert_same(a, b)


def test_a_failure_here_stops_the_workers() -> None:
    def slow() -> list[Partial]:
        threading.Event().wait(30)
        return []

    with pytest.raises(ValueError, match="a worker's task failed"):
        parallel.run_parallel([_fails, slow, slow])
    # the autouse fixture checks that both workers were killed and reaped


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not parallel.can_fork()
        assert parallel.workers_for(1 << 30, 0) == 1
        assert parallel.workers_for(1 << 30, 4) == 1
    finally:
        stop.set()
        other.join()


def test_how_many_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "idle_cores", lambda: 4)
    mb = 1 << 20
    assert parallel.workers_for(100 * mb, 1) == 1
    assert parallel.workers_for(1000, 3) == 3  # asked for: exactly that many
    assert parallel.workers_for(5 * mb, 0) == 1  # too small to repay a fork
    assert parallel.workers_for(20 * mb, 0) == 2  # one per 8 MB
    assert parallel.workers_for(500 * mb, 0) == 4  # at most the idle cores


def test_busy_cores_are_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cores, "usable_cores", lambda: 4)
    monkeypatch.setattr(os, "getloadavg", lambda: (2.7, 0.0, 0.0))
    assert cores.idle_cores() == 2  # two whole processes run elsewhere
    monkeypatch.setattr(os, "getloadavg", lambda: (15.0, 0.0, 0.0))
    assert cores.idle_cores() == 1  # a saturated machine: this process alone


def test_a_folder_is_counted_by_the_json_it_inflates_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """64 gzipped ranks of 8.5 MB in all got one process: their 1.2 GB of JSON is the work."""
    monkeypatch.setattr(parallel, "idle_cores", lambda: 4)
    files = []
    for rank in range(3):
        path = tmp_path / f"rank{rank}.json.gz"
        path.write_bytes(gzip.compress(b" " * (6 << 20)))  # 6 MB of JSON in a few kB
        files.append(path)
    assert sum(f.stat().st_size for f in files) < 1 << 20
    assert parallel.workers_for_files(files, 0) == 2  # 18 MB: one process per 8 MB
    assert parallel.workers_for_files(files[:1], 0) == 1  # one file: one process
    assert parallel.workers_for_files(files, 1) == 1


def test_cut_ranges_cover_the_document_between_events() -> None:
    data = read_trace_bytes(FIXTURES / "healthy" / "cpu_fast_loader.json.gz")
    ranges = parallel.cut(data, 3)
    assert ranges is not None and len(ranges) == 3
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    for (_, hi), (lo, _) in itertools.pairwise(ranges):
        assert data[hi - 1 : hi] == b"}" and data[lo : lo + 1] == b"{"
        assert data[hi:lo].strip() == b","
    for lo, hi in ranges:
        msgspec.json.decode(parallel.chunk_doc(data, lo, hi))  # each chunk is JSON of its own


def test_a_document_without_an_events_array_is_not_cut() -> None:
    assert parallel.cut(b'{"schemaVersion": 1}', 2) is None
    assert parallel.cut(b'{"traceEvents": [{"ph": "X"}]}', 2) is None  # one event: no separator
