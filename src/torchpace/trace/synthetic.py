"""Build small synthetic Kineto traces (same JSON schema as torch.profiler) for tests.

Synthetic traces exercise code paths and edge cases only; recorded traces decide what rules judge.
Write the result with `TraceBuilder.write(path)` and read it back through `load_trace`, so the
real loader is always on the path.

    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 400, cat="user_annotation")
    b.kernel("volta_sgemm_128x64_nn", 500, 300, launched_at=450)
    trace = load_trace(b.write(tmp_path / "synthetic_stall.json"))
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import msgspec


class TraceBuilder:
    """Accumulates events (times in microseconds) and writes a Chrome trace file."""

    def __init__(self, *, pid: int = 100, tid: int = 100, device: int = 0) -> None:
        self.pid, self.tid, self.device = pid, tid, device
        self.events: list[dict[str, Any]] = []
        self.top: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": []}
        self._next_id = 1

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def raw(self, event: dict[str, Any]) -> None:
        """Append an event exactly as given (for unknown categories, odd shapes)."""
        self.events.append(event)

    def op(
        self, name: str, ts: float, dur: float, *, cat: str = "cpu_op", tid: int | None = None,
        args: dict[str, Any] | None = None,
    ) -> int:  # fmt: skip
        """A host range (cpu_op by default, or user_annotation); returns its External id."""
        ext = self._id()
        self.events.append({
            "ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": tid or self.tid,
            "ts": ts, "dur": dur, "args": {"External id": ext, **(args or {})},
        })  # fmt: skip
        return ext

    def step(self, n: int, ts: float, dur: float) -> None:
        """A ProfilerStep#n annotation."""
        self.op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")

    def runtime(self, name: str, ts: float, dur: float, *, tid: int | None = None) -> int:
        """A cuda_runtime call; returns its correlation id."""
        corr = self._id()
        self.events.append({
            "ph": "X", "cat": "cuda_runtime", "name": name, "pid": self.pid,
            "tid": tid or self.tid, "ts": ts, "dur": dur, "args": {"correlation": corr},
        })  # fmt: skip
        return corr

    def _gpu(self, cat: str, name: str, ts: float, dur: float, corr: int, **args: Any) -> None:
        self.events.append({
            "ph": "X", "cat": cat, "name": name, "pid": self.device, "tid": args.get("stream", 7),
            "ts": ts, "dur": dur,
            "args": {"device": self.device, "stream": 7, "correlation": corr, **args},
        })  # fmt: skip

    def kernel(
        self, name: str, ts: float, dur: float, *, launched_at: float | None = None,
        args: dict[str, Any] | None = None, call_us: float = 5,
    ) -> None:  # fmt: skip
        """A kernel and the cudaLaunchKernel that issued it (`call_us` long, at `launched_at`);
        `args` adds fields such as {"blocks per SM": 0.5, "est. achieved occupancy %": 25}."""
        launch = ts - 10 if launched_at is None else launched_at
        corr = self.runtime("cudaLaunchKernel", launch, call_us)
        self._gpu("kernel", name, ts, dur, corr, **(args or {}))

    def memcpy(
        self, direction: str, src: str, dst: str, ts: float, dur: float, nbytes: int,
        *, issued_at: float | None = None, call: str = "cudaMemcpyAsync", call_us: float = 5,
    ) -> None:  # fmt: skip
        """A memcpy `Memcpy HtoD (Pageable -> Device)` and the runtime call that issued it."""
        corr = self.runtime(call, ts - 10 if issued_at is None else issued_at, call_us)
        name = f"Memcpy {direction} ({src} -> {dst})"
        self._gpu("gpu_memcpy", name, ts, dur, corr, bytes=nbytes)

    def memory(self, ts: float, nbytes: int, allocated: int, reserved: int) -> None:
        """A `[memory]` instant on the device (positive bytes: allocation, negative: free)."""
        self.events.append({
            "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
            "pid": self.pid, "tid": self.tid, "ts": ts,
            "args": {"Device Type": 1, "Device Id": self.device, "Bytes": nbytes,
                     "Total Allocated": allocated, "Total Reserved": reserved},
        })  # fmt: skip

    def gpu_device(self, name: str = "NVIDIA A100-SXM4-40GB") -> None:
        """Declare a device in deviceProperties."""
        self.top["deviceProperties"] = [{
            "id": self.device, "name": name, "totalGlobalMem": 42_000_000_000,
            "computeMajor": 8, "computeMinor": 0,
        }]  # fmt: skip

    def document(self) -> dict[str, Any]:
        """The whole trace as a JSON-ready dict."""
        return {**self.top, "traceEvents": list(self.events)}

    def write(self, path: str | Path) -> Path:
        """Write the trace (gzip when the name ends in .gz) and return its path."""
        path = Path(path)
        data = msgspec.json.encode(self.document())
        path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
        return path
