"""issue 16, running the doctor: the profiler's log lines kept off the terminal, the script's
output never lost, a progress line only on a terminal, and --verbose."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpace.runner.terminal.noise import LineFilter, is_noise

SCRIPTS = Path(__file__).parent / "scripts"

# Lines torch 2.13 writes to stderr while the doctor records (copied from real runs).
NOISE = [
    b"USDT:2026-11-23 22:00:21 7488:7488 SyncActivityProfilerHandler.cpp:52] profiler_start",
    b"USDT:2026-11-23 22:00:23 7488:7488 SyncActivityProfilerHandler.cpp:59] profiler_stop",
    b"[W1123 22:13:16.808702953 CPUAllocator.cpp:245] Memory block of unknown size was allocated "
    b"before the profiling started, profiler results will not include the deallocation event",
    b"[W1123 22:07:13.729754137 profiler_kineto.cpp:942] disableProfiler called but no active "
    b"profiling session found. This can happen if profiling was cancelled during warmup.",
    b"ERROR: External init callback must run in same thread as registerClient (1 != 2)",
    # torch 2.14's CUDA build on a machine without a GPU
    b"ERROR:2026-11-26 19:27:00 628:628 DeviceProperties.cpp:56] gpuGetDeviceCount failed with "
    b"code 35",
]
KEPT = [
    b"[W1123 22:13:16.1 Context.cpp:80] a warning about the script's own code",
    b"[W1123 22:13:16.1 profiler_kineto.cpp:1] CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
    b"epoch 1 loss 0.25",
    b"USDT: a line the script printed",
    b"\r 40%|####      | 4/10",
    b"\xff\xfe\x00 binary",
]


def test_known_profiler_lines_are_noise_and_nothing_else() -> None:
    assert all(is_noise(line) for line in NOISE)
    assert not any(is_noise(line) for line in KEPT)


def test_a_line_written_in_pieces_is_judged_whole() -> None:
    f = LineFilter()
    line = NOISE[2] + b"\n"
    out = b"".join(f.feed(line[i : i + 7], now=0.0) for i in range(0, len(line), 7))
    assert out == b"" and f.dropped == 1


def test_a_partial_line_that_cannot_become_noise_passes_at_once() -> None:
    f = LineFilter()
    assert f.feed(b"\r 40%|####", now=0.0) == b"\r 40%|####"
    assert f.feed(b"[W1123 22:13", now=0.0) == b""  # may still become a profiler warning
    assert f.expire(now=0.1) == b"" and f.expire(now=0.3) == b"[W1123 22:13"  # it did not


_line = st.one_of(
    st.sampled_from(NOISE + KEPT), st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))
)


@given(lines=st.lists(_line, max_size=12), cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_output_is_the_input_without_noise_lines_however_it_is_cut(
    lines: list[bytes], cuts: list[int]
) -> None:
    data = b"\n".join(lines)
    f, out, start = LineFilter(), [], 0
    for cut in [*sorted(c for c in cuts if c <= len(data)), len(data)]:
        out.append(f.feed(data[start:cut], now=0.0))
        start = cut
    out.append(f.flush())
    *whole, last = lines or [b""]
    expected = b"".join(line + b"\n" for line in whole if not is_noise(line)) + last
    assert b"".join(out) == expected


# --- the doctor as a user runs it ---------------------------------------------------------------


def _doctor(*args: str, tmp: Path) -> list[str]:
    return [sys.executable, "-m", "torchpace", "doctor", "--warmup", "1", "--steps", "2",
            "--out", str(tmp / "out"), *args]  # fmt: skip


def _wait(proc: subprocess.Popen[bytes], timeout: float = 120) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise


@pytest.mark.slow
def test_profiler_lines_are_dropped_and_the_scripts_stderr_kept(tmp_path: Path) -> None:
    script = [str(SCRIPTS / "noisy.py")]
    quiet = subprocess.run(_doctor(*script, tmp=tmp_path), capture_output=True, timeout=180)
    loud = subprocess.run(_doctor("-v", *script, tmp=tmp_path), capture_output=True, timeout=180)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr
    for run in (quiet, loud):
        assert b"script stderr 0\n" in run.stderr and b"script stderr 4\n" in run.stderr
        assert b"\xff\xfe binary from the script\n" in run.stderr
        assert b"[W1123 22:13:16.1 script.cpp:1] the script's own warning\n" in run.stderr
        assert b"torchpace: warm-up" not in run.stderr  # no progress line off a terminal
    assert b"profiler_start" not in quiet.stderr and b"profiler_start" in loud.stderr
    assert b"CPUAllocator.cpp" not in quiet.stderr
    assert b"Not analysed (" in loud.stdout and b"cudnn-benchmark-off" in loud.stdout


@pytest.mark.slow
def test_output_written_before_the_doctor_is_killed_still_arrives(tmp_path: Path) -> None:
    err = tmp_path / "stderr"
    with open(err, "wb") as fe:
        proc = subprocess.Popen(
            _doctor(str(SCRIPTS / "noisy.py"), "--kill", tmp=tmp_path),
            stdout=subprocess.DEVNULL, stderr=fe, start_new_session=True,
        )  # fmt: skip
        assert _wait(proc) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while b"last words" not in err.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.1)  # the relay writes what was left, then ends
    assert err.read_bytes().endswith(b"last words\n")
    assert b"profiler_start" not in err.read_bytes()


@pytest.mark.slow
def test_progress_on_a_terminal_and_the_script_still_sees_one(tmp_path: Path) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdout and stderr are the terminal
        os.execv(sys.executable, _doctor(str(SCRIPTS / "noisy.py"), tmp=tmp_path))
    seen = b""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        try:
            chunk = os.read(fd, 65536) if ready else b""
        except OSError:  # EIO: the doctor and its relay are gone
            break
        if ready and not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, seen[-2000:]
    assert b"stdout isatty True, stderr isatty True" in seen
    for stage in (b"warm-up 1/1 steps", b"profiling 1/2 steps", b"analysing the trace"):
        assert stage in seen
    report = seen.index(b"torchpace report:")
    assert b"torchpace\x1b[0m: " not in seen[report:]  # the progress line is gone by then
    assert b"profiler_start" not in seen


def test_lines_of_two_streams_are_never_spliced_on_one_terminal() -> None:
    """The relay read stdout's chunk up to mid-line, then wrote stderr's line into it: on one
    terminal ~170 of 714k lines came out spliced. Lines come out whole; a line that stays
    unfinished (a progress bar, a prompt) still passes after HOLD_S."""
    from torchpace.runner.terminal.relay import HOLD_S, Relay, Source

    read_out, write_out = os.pipe()
    read_err, write_err = os.pipe()
    screen_r, screen_w = os.pipe()
    relay = Relay([Source(read_out, screen_w, None, False), Source(read_err, screen_w, None, False)],
                  None, None)  # fmt: skip
    out, err = relay.sources
    try:
        now = time.monotonic()
        os.write(write_out, b"epoch 1: loss 0.2")  # the rest of the line comes later
        relay._pump(out, now)
        os.write(write_err, b"warning: slow\n")
        relay._pump(err, now)
        os.write(write_out, b"5\nepoch 2: ")
        relay._pump(out, now)
        assert os.read(screen_r, 1000) == b"warning: slow\nepoch 1: loss 0.25\n"
        assert out.partial == b"epoch 2: " and out.since == now
        os.close(write_out)  # the script ends: what it left unfinished still comes out
        relay._pump(out, now + HOLD_S)
        assert os.read(screen_r, 1000) == b"epoch 2: "
    finally:
        for fd in (write_out, read_err, write_err, screen_r, screen_w):
            with contextlib.suppress(OSError):
                os.close(fd)
