"""Traces from other writers: what the strict schema refuses is read field by field, never refused whole."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchpace.analysis import analyze
from torchpace.errors import TraceError
from torchpace.report import renderer
from torchpace.trace import Trace, load_trace, tolerant
from torchpace.trace._raw import (
    FAST_DECODER,
    Complete,
    Instant,
    MemoryArgs,
    RawArgs,
    RawDevice,
    RawDistributedInfo,
    RawHeader,
    split,
)
from torchpace.trace.read import read_trace_bytes

FIXTURES = Path(__file__).parents[1] / "fixtures"
# Written by ROCm >= 6.4: `"bytes": "1"` (a string) on hipMemcpy* calls refused all four.
ROCM_64 = [
    "tl_mi300xvf_qwen05b_bf16_inference.json.gz",
    "tl_mi300x_ddp_resnet18_no_pool.json.gz",
    "tl_mi300x_resnet_act_checkpoint_rank0.json.gz",
    "tl_mi300_vllm_graph_capture.pt.trace.json.gz",
]
QWEN = FIXTURES / "corpus" / ROCM_64[0]


def _doc(path: Path) -> dict[str, Any]:
    return json.loads(read_trace_bytes(path))


def _write(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("name", ROCM_64)
def test_rocm_64_traces_load_on_the_fast_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("the string `bytes` of ROCm >= 6.4 is on the fast path")

    monkeypatch.setattr(tolerant, "decode", refuse)
    trace = load_trace(FIXTURES / "corpus" / name)
    assert trace.info.device_kind == "rocm"
    assert trace.kernels and trace.steps
    assert any(r.name.startswith("hipMemcpy") for r in trace.runtime)
    assert all(c.bytes is None or c.bytes >= 0 for c in trace.copies)
    assert not [n for n in trace.info.notes if "unreadable" in n or "dropped" in n]


def _kernels_by_correlation(trace: Trace) -> dict[int | None, Any]:
    return {k.correlation: k for k in trace.kernels}


def test_one_bad_field_costs_only_that_field_on_a_real_trace(tmp_path: Path) -> None:
    doc = _doc(QWEN)
    events = doc["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel")
    kernel["args"]["device"] = [kernel["args"]["device"]]  # a list: no clear meaning
    op = next(e for e in events if e.get("cat") == "cpu_op")
    op["dur"] = -op["dur"]  # cannot be measured
    call = next(e for e in events if e.get("cat") == "cuda_runtime")
    call["ts"] = str(call["ts"])  # a numeric string: read as the number
    good, bad = load_trace(QWEN), load_trace(_write(doc, tmp_path / "mutated.json"))
    assert bad.info.notes[-2:] == (
        "dropped 1 event that cannot be placed or measured: dur is a negative number (1 event)",
        "ignored unreadable event fields: args.device is a list (1 event)",
    )
    assert len(bad.host_ops) == len(good.host_ops) - 1
    assert bad.runtime == good.runtime  # the string ts was read as the number
    changed = _kernels_by_correlation(bad)[kernel["args"]["correlation"]]
    assert changed.device == int(kernel["pid"])  # without args.device: the event's pid
    assert len(bad.kernels) == len(good.kernels)
    assert sum(a != b for a, b in zip(bad.kernels, good.kernels, strict=True)) <= 1


SMALL = [
    FIXTURES / "traces" / "host_sync" / "event_sync_item.json.gz",
    FIXTURES / "traces" / "rocm" / "mi250_minitoy_rocm6.2.json.gz",
    FIXTURES / "traces" / "loader_workers" / "mlp_sleepy_dataset_torch2.13.json.gz",
    QWEN,
]


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.name)
def test_a_well_formed_trace_decodes_the_same_on_both_paths(path: Path) -> None:
    data = read_trace_bytes(path)
    header, events = split(FAST_DECODER.decode(data))
    assert tolerant.decode(path.name, data) == (header, events, [])


def _event(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                            "ts": 100, "dur": 10, "args": {"External id": 3}}  # fmt: skip
    for key, value in fields.items():
        if key.startswith("args_"):
            base["args"][key[5:].replace("_", " ")] = value
        else:
            base[key] = value
    return base


def _decode(*events: object, **header: Any) -> tuple[Any, list[Any], list[str]]:
    doc = {**header, "traceEvents": list(events)}
    head, decoded, notes = tolerant.decode("t.json", msgspec.json.encode(doc))
    assert decoded is not None
    return head, decoded, notes


@pytest.mark.parametrize(
    ("fields", "attribute", "value"),
    [
        ({"ts": "12.5"}, "ts", 12.5),
        ({"dur": "3"}, "dur", 3.0),
        ({"ts": " 0x10 "}, "ts", 16.0),
        ({"pid": 7.0}, "pid", 7),
        ({"tid": "stream 7"}, "tid", "stream 7"),  # a declared spelling: read later
        ({"name": 42}, "name", "42"),  # a name written as a number
        ({"dur": "1e3"}, "dur", 1000.0),
    ],
)
def test_values_with_a_clear_meaning_are_coerced(
    fields: dict[str, Any], attribute: str, value: object
) -> None:
    _, (event,), notes = _decode(_event(**fields))
    assert getattr(event, attribute) == value
    assert notes == []


def test_numeric_strings_in_args_and_header_are_read_as_numbers() -> None:
    header, (event,), notes = _decode(
        _event(cat="gpu_memcpy", args_bytes="4096", args_device="0", args_correlation=7),
        deviceProperties=[{"id": "0", "name": "MI300X", "totalGlobalMem": "206141652992"}],
        distributedInfo={"rank": "1", "world_size": 2.0, "backend": "nccl"},
    )
    assert event.args.bytes == "4096" and event.args.device == "0"  # declared str: read later
    assert header.deviceProperties[0].totalGlobalMem == 206141652992
    assert (header.distributedInfo.rank, header.distributedInfo.world_size) == (1, 2)
    assert notes == []


@pytest.mark.parametrize(
    ("fields", "note"),
    [
        ({"name": None}, "ignored unreadable event fields: name is null (1 event)"),
        ({"args": [1, 2]}, "ignored unreadable event fields: args is a list (1 event)"),
        ({"args_device": [0]}, "ignored unreadable event fields: args.device is a list (1 event)"),
        ({"args_bytes": {"n": 1}}, "ignored unreadable event fields: args.bytes is an object (1 event)"),
        ({"pid": True}, "ignored unreadable event fields: pid is a boolean (1 event)"),
        ({"cat": ["cpu_op"]}, "ignored unreadable event fields: cat is a list (1 event)"),
        ({"args_correlation": 1.5e300}, None),  # a float id: declared, read by as_int later
    ],
)  # fmt: skip
def test_values_without_a_clear_meaning_are_dropped_and_named(
    fields: dict[str, Any], note: str | None
) -> None:
    _, (event, _), notes = _decode(_event(**fields), _event(ts=200))
    assert notes == ([note] if note else [])
    assert event.ts == 100 and event.dur == 10  # the rest of the event is kept


@pytest.mark.parametrize(
    ("fields", "cause"),
    [
        ({"ts": None}, "ts is null"),
        ({"ts": "soon"}, "ts is a string"),
        ({"ts": "nan"}, "ts is a string"),
        ({"dur": -4}, "dur is a negative number"),
        ({"dur": "-4"}, "dur is a string"),
        ({"dur": True}, "dur is a boolean"),
        ({"dur": None}, "dur is null"),
        ({"dur": 1e297}, "dur is longer than a day"),  # no run; it would swamp every median
    ],
)
def test_an_event_that_cannot_be_placed_or_measured_is_dropped(
    fields: dict[str, Any], cause: str
) -> None:
    _, events, notes = _decode(_event(**fields), _event(**fields), _event(ts=300))
    assert [e.ts for e in events] == [300]
    assert notes == [f"dropped 2 events that cannot be placed or measured: {cause} (2 events)"]


def _declared(cls: type, prefix: str = "") -> list[tuple[str, bool]]:
    """(JSON key, required) of every field of a struct the decoder reads, but raw JSON ones."""
    return [
        (prefix + f.encode_name, f.required)
        for f in msgspec.inspect.type_info(cls).fields  # type: ignore[attr-defined]
        if not isinstance(f.type, msgspec.inspect.RawType)
    ]


# Every field of the schema, so that a field added to it is covered here too.
EVENT_FIELDS = [*_declared(Complete), *_declared(RawArgs, "args.")]
MEMORY_FIELDS = [*_declared(Instant), *_declared(MemoryArgs, "args.")]


@pytest.mark.parametrize(("key", "required"), EVENT_FIELDS + MEMORY_FIELDS)
def test_a_list_in_any_field_costs_that_field_or_its_event(key: str, required: bool) -> None:
    memory = (key, required) in MEMORY_FIELDS and (key, required) not in EVENT_FIELDS
    event: dict[str, Any] = (
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5, "args": {"Bytes": 8}}
        if memory
        else _event()
    )
    target = event["args"] if key.startswith("args.") else event
    target[key.removeprefix("args.")] = [[1], "x"]
    _, events, notes = _decode(event, _event(ts=200))
    if required:
        assert len(events) == 1
        assert notes == [
            f"dropped 1 event that cannot be placed or measured: {key} is a list (1 event)"
        ]
    else:
        assert len(events) == 2
        assert notes == [f"ignored unreadable event fields: {key} is a list (1 event)"]


@pytest.mark.parametrize(
    "key", [k for k, _ in _declared(RawHeader)] + [f"deviceProperties[].{k}" for k, _ in _declared(RawDevice)]
    + [f"distributedInfo.{k}" for k, _ in _declared(RawDistributedInfo)],
)  # fmt: skip
def test_a_list_in_any_header_field_costs_that_field(key: str) -> None:
    top, _, inner = key.partition(".")
    header: dict[str, Any] = {"deviceProperties": [{"id": 0, "name": "A100"}],
                              "distributedInfo": {"rank": 0, "world_size": 2}}  # fmt: skip
    bad, found = ([[1], "x"], "a list") if key != "deviceProperties" else (7, "a number")
    if not inner:
        header[top] = bad
    elif top == "distributedInfo":
        header[top][inner] = bad
    else:
        header["deviceProperties"][0][inner] = bad
    _, events, notes = _decode(_event(), **header)
    assert len(events) == 1
    assert notes == [f"ignored unreadable header fields: {key} is {found}"]


def test_a_missing_duration_drops_the_range() -> None:
    event = _event()
    del event["dur"]
    _, events, notes = _decode(event, _event(ts=300))
    assert len(events) == 1
    assert notes == ["dropped 1 event that cannot be placed or measured: dur is missing (1 event)"]


def test_a_number_out_of_range_is_dropped(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [_event(dur="BIG"), _event(args_bytes="BIG", ts=5)]})
    _, events, notes = tolerant.decode("t.json", text.replace('"BIG"', "1e400").encode())
    assert len(events or []) == 1
    assert notes == [
        "dropped 1 event that cannot be placed or measured: dur is a number out of range (1 event)",
        "ignored unreadable event fields: args.bytes is a number out of range (1 event)",
    ]


def test_entries_that_are_not_events_are_skipped_and_counted() -> None:
    no_phase = _event()
    del no_phase["ph"]
    _, events, notes = _decode(_event(), 5, "x", no_phase, _event(ph="Q"), _event(ph="Q"))
    assert len(events) == 1
    assert notes == [
        "skipped entries of traceEvents that are not events: 2 events of unknown phase 'Q', "
        "1 number, 1 string, 1 event without a phase ('ph')"
    ]


def test_invalid_utf8_is_replaced_and_counted(tmp_path: Path) -> None:
    doc = msgspec.json.encode({"traceEvents": [_event(name="aten::mm@"), _event(ts=200)]})
    path = tmp_path / "t.json"
    path.write_bytes(doc.replace(b"mm@", b"mm\xff\xfe"))
    trace = load_trace(path)
    assert [o.name for o in trace.host_ops] == ["aten::mm\ufffd\ufffd", "aten::mm"]
    assert "2 invalid UTF-8 sequences in strings read as U+FFFD" in trace.info.notes


def test_lone_surrogate_escapes_are_replaced_and_counted(tmp_path: Path) -> None:
    written = {  # name as escaped in the JSON -> as read
        r"lone\ud800": "lone\ufffd",
        r"low\udc00x": "low\ufffdx",
        r"pair\ud83d\ude00": "pair\U0001f600",  # a pair is one character: kept
        r"escaped\\ud800": "escaped\\ud800",  # a backslash, then text: no escape
        r"high\uDBFF\ud800": "high\ufffd\ufffd",
        "utf8@": "utf8\ufffd",  # @ becomes invalid UTF-8 below
    }
    events = ",".join(
        json.dumps(_event(name="NAME", ts=100 * i)).replace("NAME", name)
        for i, name in enumerate(written)
    )
    path = tmp_path / "t.json"
    path.write_bytes(f'{{"traceEvents": [{events}]}}'.encode().replace(b"@", b"\xff"))
    trace = load_trace(path)
    assert [o.name for o in trace.host_ops] == list(written.values())
    assert "1 invalid UTF-8 sequence in strings read as U+FFFD" in trace.info.notes
    lone = "4 lone UTF-16 surrogate escapes (\\ud800-\\udfff) in strings read as U+FFFD"
    assert lone in trace.info.notes


def test_deep_nesting_is_one_line(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({"traceEvents": [_event()]})[:-1] + f', "x": {deep}}}')
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value).startswith("deep.json nests JSON arrays or objects too deep to read ")
    assert str(info.value).endswith("which no profiler does: corrupt? re-copy or re-export it")


@pytest.mark.parametrize("events", ['{"a": 1}', '"all of them"', "7"])
def test_events_that_are_not_a_list(tmp_path: Path, events: str) -> None:
    (tmp_path / "t.json").write_text(f'{{"traceEvents": {events}}}')
    with pytest.raises(TraceError, match=r"^t\.json is not a torch\.profiler trace: its "):
        load_trace(tmp_path / "t.json")


# --- property: mutate the field types of real events --------------------------------------------

MUTATED = [SMALL[0], SMALL[1], SMALL[2]]  # CUDA syncs and copies; ROCm shapes; CPU memory
DOCS = {p.name: _doc(p) for p in MUTATED}
BIG = "\x00big"  # written as the literal 1e400, which no Python float encodes
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["12", "-5", "0x1f", "nan", "inf", " 7 ", "1.5", "1e3", BIG, "X", "kernel"])
)
VALUES = st.recursive(
    SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=5,
)  # fmt: skip
DELETE = object()
ARGS = ["bytes", "device", "stream", "correlation", "External id", "Input Dims", "kind",
        "cuda_sync_kind", "Bytes", "Total Allocated", "Device Id", "Device Type"]  # fmt: skip


@st.composite
def mutated_trace(draw: st.DrawFn) -> tuple[str, int, int]:
    """A real trace with 1-4 fields of its events given another value (or deleted), as JSON."""
    name = draw(st.sampled_from(sorted(DOCS)))
    doc = copy.deepcopy(DOCS[name])
    events = doc["traceEvents"]
    changes = draw(st.integers(1, 4))
    for _ in range(changes):
        event = events[draw(st.integers(0, len(events) - 1))]
        keys = [*event, "ts", "dur", "args", "ph", "name", "cat", *(f"args.{a}" for a in ARGS)]
        key = draw(st.sampled_from(keys))
        target = event
        if key.startswith("args."):
            if not isinstance(event.get("args"), dict):
                event["args"] = {}
            target, key = event["args"], key[5:]
        value = draw(VALUES | st.just(DELETE))
        if value is DELETE:
            target.pop(key, None)
        else:
            target[key] = value
    text = json.dumps(doc).replace(json.dumps(BIG), "1e400")
    return text, len(events), changes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated_trace())
def test_mutated_field_types_never_cost_the_report(
    case: tuple[str, int, int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    text, count, changes = case
    path = tmp_path_factory.mktemp("mutated") / "t.json"
    path.write_text(text)
    try:  # what `torchpace analyze` runs; any other exception fails the test
        diagnosis = analyze(path, jobs=1)
    except TraceError as exc:  # only when the mutation left no usable range
        assert "\n" not in str(exc) and "torchpace bug" not in str(exc), str(exc)
        return
    assert diagnosis.info.event_count >= count - changes  # at most the mutated events are lost
    assert not [s.reason for s in diagnosis.skipped if s.reason.startswith("rule failed")]
    json.loads(renderer("json")(diagnosis))


def test_a_gzipped_mutated_trace_reads_the_same(tmp_path: Path) -> None:
    doc = _doc(SMALL[0])
    doc["traceEvents"][5]["args"] = "oops"
    text = json.dumps(doc).encode()
    (tmp_path / "t.json").write_bytes(text)
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(text))
    plain, packed = load_trace(tmp_path / "t.json"), load_trace(tmp_path / "t.json.gz")
    assert plain.host_ops == packed.host_ops and plain.info.notes == packed.info.notes
    assert "ignored unreadable event fields: args is a string (1 event)" in plain.info.notes
