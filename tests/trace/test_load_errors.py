"""Bad input: one-line TraceErrors naming the file, what is wrong and what to do."""

from __future__ import annotations

import contextlib
import gzip
import os
import types
from pathlib import Path

import msgspec
import pytest

from torchpace.errors import TraceError, UsageError
from torchpace.trace import load_trace, load_traces, read
from torchpace.trace.synthetic import TraceBuilder


@pytest.fixture(params=["isal", "zlib"])
def inflater(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a gzip test with ISA-L's inflate and with the standard library's (its fallback)."""
    if request.param == "isal" and read.igzip_lib is None:
        pytest.skip("isal is not installed on this platform")
    if request.param == "zlib":
        monkeypatch.setattr(read, "igzip_lib", None)
    return str(request.param)


def _err(path: Path) -> str:
    with pytest.raises(TraceError) as info:
        load_trace(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_path(tmp_path: Path) -> None:
    assert (
        _err(tmp_path / "nope.json")
        == f"{tmp_path / 'nope.json'}: no such file or directory; check the path"
    )


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "trace.json").write_text("")
    assert _err(tmp_path / "trace.json").startswith("trace.json is empty; export it with")


def test_truncated_json(tmp_path: Path) -> None:
    good = TraceBuilder()
    good.op("aten::mm", 0, 10)
    text = good.write(tmp_path / "full.json").read_bytes()
    (tmp_path / "cut.json").write_bytes(text[: len(text) // 2])
    message = _err(tmp_path / "cut.json")
    assert message.startswith("cut.json is not valid JSON (")
    assert "truncated or corrupt? re-copy or re-export it" in message


@pytest.mark.usefixtures("inflater")
def test_corrupt_gzip(tmp_path: Path) -> None:
    data = gzip.compress(b'{"traceEvents": []}' * 50)
    (tmp_path / "t.json.gz").write_bytes(data[:20] + b"garbage" + data[27:])
    message = _err(tmp_path / "t.json.gz")
    assert message.startswith("t.json.gz is not a valid gzip file (")
    assert message.endswith("re-copy or re-export the trace")


def test_json_that_is_not_a_trace(tmp_path: Path) -> None:
    (tmp_path / "trace.json").write_text('{"hello": "world"}')
    assert _err(tmp_path / "trace.json") == (
        "trace.json is not a torch.profiler trace: no 'traceEvents' list; export it with "
        "prof.export_chrome_trace(path) or tensorboard_trace_handler(dir)"
    )


def test_json_array_without_events_is_not_a_trace(tmp_path: Path) -> None:
    """A bare list is read as a pre-Kineto trace; one that holds no event says what to do."""
    (tmp_path / "list.json").write_text("[1, 2, 3]")
    assert _err(tmp_path / "list.json") == (
        "list.json is not a torch.profiler trace: a JSON list with no profiler events; record "
        "with torch.profiler.profile(...) and export with prof.export_chrome_trace(path)"
    )


def test_json_that_is_neither_object_nor_list(tmp_path: Path) -> None:
    (tmp_path / "n.json").write_text("42")
    assert "n.json is not a torch.profiler trace: expected a JSON object" in _err(
        tmp_path / "n.json"
    )


def test_trace_with_no_events(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text('{"schemaVersion": 1, "traceEvents": []}')
    assert _err(tmp_path / "t.json").startswith(
        "t.json has no events: the profiler recorded nothing"
    )


def test_trace_with_only_metadata(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.raw({"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}})
    assert "has no profiled ranges" in _err(b.write(tmp_path / "meta.json"))


def test_directory_with_no_traces(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(TraceError, match=r"holds no trace files \(\*\.json, \*\.json\.gz\)"):
        load_traces(tmp_path)


def test_load_trace_on_a_directory_points_to_load_traces(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is a directory; use load_traces"):
        load_trace(tmp_path)


def test_a_trace_whose_only_event_cannot_be_placed_says_why(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text('{"traceEvents": [{"ph": "X", "ts": "soon"}]}')
    assert _err(tmp_path / "t.json") == (
        "t.json has no event that can be read: dropped 1 event that cannot be placed or "
        "measured: ts is a string (1 event); re-export it"
    )


@pytest.mark.usefixtures("inflater")
def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(b'{"traceEvents": [' + b'{"ph": "X", "ts": 1},' * 500 + b"{}]}")
    (tmp_path / "t.json.gz").write_bytes(data[: len(data) // 2])
    message = _err(tmp_path / "t.json.gz")
    assert message.startswith("t.json.gz is not a valid gzip file (")


@pytest.mark.usefixtures("inflater")
def test_gzip_with_a_wrong_checksum(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(b'{"traceEvents": []}'))
    data[-8] ^= 0xFF  # the CRC-32 in the trailer
    (tmp_path / "t.json.gz").write_bytes(bytes(data))
    assert _err(tmp_path / "t.json.gz").startswith("t.json.gz is not a valid gzip file (")


@pytest.mark.usefixtures("inflater")
def test_both_inflaters_give_the_same_bytes(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(200):
        b.op(f"aten::op{i % 7}", i * 10, 5)
    text = msgspec.json.encode(b.document())
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(text))
    assert read.read_trace_bytes(tmp_path / "t.json.gz") == text


@pytest.mark.usefixtures("inflater")
def test_multi_member_gzip_is_read_whole(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.op("aten::mm", 0, 10)
    text = msgspec.json.encode(b.document())
    cut = text.index(b'"traceEvents"')
    (tmp_path / "two.json.gz").write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:]))
    assert [o.name for o in load_trace(tmp_path / "two.json.gz").host_ops] == ["aten::mm"]


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.json")  # reading it would block until a writer came
    assert _err(tmp_path / "pipe.json") == (
        f"{tmp_path / 'pipe.json'} is a FIFO (named pipe), not a trace file; give a .json or "
        ".json.gz file (copy a stream to a file first)"
    )


def test_a_device_is_refused_at_once() -> None:
    assert _err(Path("/dev/zero")).startswith("/dev/zero is a device, not a trace file; ")


def test_a_file_above_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t.json").write_bytes(b'{"traceEvents": []}' + b" " * 2048)
    monkeypatch.setenv("TORCHPACE_MAX_TRACE_SIZE", "1K")
    assert _err(tmp_path / "t.json") == (
        "t.json is more than 1 KiB, the most torchpace reads of a trace; if this machine has "
        "the memory (about 3x the JSON), raise the limit: TORCHPACE_MAX_TRACE_SIZE=1G"
    )
    monkeypatch.setenv("TORCHPACE_MAX_TRACE_SIZE", "3k")
    assert "has no events" in _err(tmp_path / "t.json")


@pytest.mark.usefixtures("inflater")
def test_a_gzip_bomb_stops_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (8 << 20)))
    monkeypatch.setenv("TORCHPACE_MAX_TRACE_SIZE", "1M")
    assert _err(tmp_path / "t.json.gz").startswith("t.json.gz inflates to more than 1 MiB, ")


@pytest.mark.parametrize("value", ["lots", "-1G", "1X"])
def test_a_bad_size_limit_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TORCHPACE_MAX_TRACE_SIZE", value)
    with pytest.raises(UsageError) as info:
        read.max_trace_bytes()
    assert str(info.value) == (
        f"TORCHPACE_MAX_TRACE_SIZE={value!r} is not a size; give bytes or a size such as 8G or 500M"
    )


@pytest.mark.parametrize(("text", "size"), [("", 4 << 30), ("123", 123), ("1.5K", 1536),
                                            ("500M", 500 << 20), ("8 GiB", 8 << 30)])  # fmt: skip
def test_size_limit_spellings(monkeypatch: pytest.MonkeyPatch, text: str, size: int) -> None:
    monkeypatch.setenv("TORCHPACE_MAX_TRACE_SIZE", text)
    assert read.max_trace_bytes() == size


@pytest.mark.usefixtures("inflater")
def test_bounded_inflating_gives_the_same_bytes() -> None:
    text = b"".join(b'{"ph": "X", "name": "aten::op%d"},' % i for i in range(20_000))
    members = gzip.compress(text[:1000]) + gzip.compress(text[1000:])
    for data in (gzip.compress(text), members):
        assert len(data) * 1032 > len(text)  # it could inflate past the limit: in bounded steps
        assert read.gunzip(data, limit=len(text)) == text
        assert read.gunzip(data) == text  # it cannot pass 4 GiB: in one buffer
    with pytest.raises(read._INFLATE_ERRORS):
        read.gunzip(members[:-100], limit=len(text))


def test_a_dangling_link_says_so(tmp_path: Path) -> None:
    (tmp_path / "t.json").symlink_to("gone.json")
    assert _err(tmp_path / "t.json") == (
        f"{tmp_path / 't.json'} is a symbolic link to 'gone.json', which does not exist; fix the link"
    )


@pytest.mark.timeout(60)
def test_a_fifo_put_in_place_after_the_check_does_not_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.mkfifo(tmp_path / "pipe.json")  # no writer: a blocking open would wait for ever
    regular = os.stat(__file__)  # what the first check saw, before the file was swapped

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        return regular if str(path).endswith("pipe.json") else os.stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(read, "os", types.SimpleNamespace(**{**vars(os), "stat": stat}))
    assert _err(tmp_path / "pipe.json").startswith(
        f"{tmp_path / 'pipe.json'} is a FIFO (named pipe), not a trace file"
    )


@pytest.mark.usefixtures("inflater")
def test_a_gzip_trailer_does_not_size_the_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = TraceBuilder()
    good.op("aten::mm", 0, 10)
    data = gzip.compress(good.write(tmp_path / "t.json").read_bytes())
    # Bytes after the member are no gzip data, yet its last 4 are read as the size: 4 GiB - 1.
    (tmp_path / "t.json.gz").write_bytes(data + b"\xff\xff\xff\xff")
    sizes: list[int] = []
    inflate = read._inflate

    def spy(data: bytes, size: int) -> bytes:
        sizes.append(size)
        return inflate(data, min(size, 1 << 20))  # the test itself allocates no 4 GiB

    monkeypatch.setattr(read, "_inflate", spy)
    with contextlib.suppress(TraceError):  # whether trailing bytes are refused is not the point
        load_trace(tmp_path / "t.json.gz")
    assert sizes and max(sizes) <= 64 * len(data + b"\xff\xff\xff\xff")
