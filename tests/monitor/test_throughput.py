"""Throughput: the figures, the data-wait share, MFU from a counted FLOP total, and no syncs.

Time comes from a fake clock that the test advances: figures are exact and nothing sleeps.
"""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from torchpace.monitor import Throughput, count_flops, format_stats, lookup_peak, progress
from torchpace.train import Precision


class Clock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class SlowLoader:
    """Each batch takes `delay` seconds of `clock` to arrive."""

    def __init__(self, n: int, delay: float, clock: Clock) -> None:
        self.n, self.delay, self.clock = n, delay, clock

    def __iter__(self):
        for i in range(self.n):
            self.clock.advance(self.delay)
            yield i


def test_no_stats_before_two_steps():
    meter = Throughput(device="cpu")
    assert meter.stats() is None
    meter.step(samples=4)
    assert meter.stats() is None


def test_samples_tokens_and_step_time():
    clock = Clock()
    meter = Throughput(device="cpu", clock=clock)
    for seconds in (0.5, 0.01, 0.01, 0.04):
        clock.advance(seconds)
        meter.step(samples=8, tokens=100)
    stats = meter.stats()
    assert stats is not None and stats.steps == 3  # the first step only starts the clock
    assert stats.step_ms == pytest.approx(20.0) and stats.step_ms_median == pytest.approx(10.0)
    assert stats.samples_per_s == pytest.approx(8 / 0.02)
    assert stats.tokens_per_s == pytest.approx(100 / 0.02)
    assert stats.data_wait_fraction is None and stats.mfu is None and stats.gpu is None


def test_tensor_counts_are_summed_at_read_time():
    clock = Clock()
    meter = Throughput(device="cpu", clock=clock)
    for n in (3, 5, 7):
        clock.advance(0.5)
        meter.step(samples=2, tokens=torch.tensor([n, 1]) if n != 5 else torch.tensor([5.0, 1.0]))
    stats = meter.stats()
    assert stats is not None
    assert stats.tokens_per_s == pytest.approx((6 + 8) / 1.0)


@pytest.mark.parametrize(("wait", "compute", "share"), [(0.03, 0.01, 0.75), (0.01, 0.03, 0.25)])
def test_data_wait_share_is_the_loader_time_over_the_step(
    wait: float, compute: float, share: float
) -> None:
    clock = Clock()
    meter = Throughput(device="cpu", clock=clock)
    for _ in meter.track(SlowLoader(5, delay=wait, clock=clock)):
        clock.advance(compute)
        meter.step(samples=1)
    stats = meter.stats()
    assert stats is not None and stats.data_wait_fraction == pytest.approx(share)


def test_a_framework_loop_gives_the_wait_itself():
    clock = Clock()
    meter = Throughput(device="cpu", clock=clock)
    meter.step(samples=4)
    for _ in range(3):
        clock.advance(0.02)
        meter.add_wait(0.02)  # a callback measured the gap between batches
        clock.advance(0.06)
        meter.step(samples=4)
    stats = meter.stats()
    assert stats is not None and stats.data_wait_fraction == pytest.approx(0.25)


def test_mfu_uses_counted_flops_and_the_given_peak():
    model = nn.Linear(64, 32, bias=False)
    x = torch.randn(16, 64)
    flops = count_flops(lambda: model(x).sum().backward())
    assert flops == 2 * (2 * 16 * 64 * 32)  # forward + weight gradient (x needs no grad)
    clock = Clock()
    meter = Throughput(device="cpu", flops_per_step=flops, peak_flops=1e12, clock=clock)
    for _ in range(3):
        clock.advance(0.005)
        meter.step(samples=16)
    stats = meter.stats()
    assert stats is not None and stats.flops_per_s == pytest.approx(flops / 0.005)
    assert stats.mfu == pytest.approx(flops / 0.005 / 1e12)
    assert stats.peak is not None and stats.peak.source == "given by the caller"
    assert "MFU" in format_stats(stats)


def test_peak_table_lookup():
    h100 = lookup_peak("NVIDIA H100 80GB HBM3", "bf16")
    assert h100 is not None and h100.device == "H100 SXM" and h100.flops_per_s == 989.4e12
    assert "datasheet" in h100.source
    pcie = lookup_peak("NVIDIA H100 PCIe", "bf16")
    assert pcie is not None and pcie.flops_per_s == 756e12
    assert lookup_peak("NVIDIA A100-SXM4-80GB", "bf16").flops_per_s == 312e12  # type: ignore[union-attr]
    assert lookup_peak("Tesla V100-SXM2-16GB", "fp16").flops_per_s == 125e12  # type: ignore[union-attr]
    assert lookup_peak("Tesla V100-SXM2-16GB", "bf16") is None  # V100 has no bf16
    assert lookup_peak("NVIDIA A10G", "bf16") is None  # not A10: no datasheet figure here
    assert lookup_peak("Some Future GPU", "bf16") is None


def test_cpu_has_no_peak_so_no_mfu():
    meter = Throughput(device="cpu", flops_per_step=1e9, dtype=Precision("fp32", device="cpu"))
    meter.step(1)
    meter.step(1)
    stats = meter.stats()
    assert stats is not None and stats.flops_per_s is not None and stats.mfu is None


def test_bad_window():
    with pytest.raises(ValueError, match="Throughput window must be >= 1 step; got 0"):
        Throughput(window=0)


def _scalar_reads(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(e.count for e in prof.key_averages() if e.key == "aten::_local_scalar_dense")


def test_monitoring_a_loop_makes_no_host_device_sync():
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    meter = Throughput(device="cpu")
    batches = [torch.randn(4, 8) for _ in range(6)]

    def loop() -> None:
        for x in meter.track(batches):
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            meter.step(samples=x.shape[0], tokens=(x > 0).sum())  # a device count: no .item()

    assert _scalar_reads(loop) == 0
    # The counter does see syncs: reading the stats resolves the token counts with one .item().
    assert _scalar_reads(meter.stats) == 1


def test_progress_is_silent_off_a_tty():
    stream = io.StringIO()
    assert list(progress(range(5), stream=stream)) == [0, 1, 2, 3, 4]
    assert stream.getvalue() == ""


def test_progress_draws_on_a_tty():
    class FakeTTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = FakeTTY()
    meter = Throughput(device="cpu")
    for _ in progress(meter.track(range(4)), total=4, meter=meter, stream=stream, refresh_every=2):
        meter.step(samples=2)
    out = stream.getvalue()
    assert "train" in out and "4/4" in out and "samples/s" in out


def test_restart_leaves_out_what_came_before():
    clock = Clock()
    meter = Throughput(device="cpu", clock=clock)
    for seconds in (0.1, 5.0, 5.0):  # slow steps: profiled, say
        clock.advance(seconds)
        meter.step(samples=1)
    meter.restart()
    clock.advance(30.0)  # writing a report: not a step
    for _ in range(3):
        clock.advance(0.1)
        meter.step(samples=1)
    stats = meter.stats()
    assert stats is not None and stats.steps == 2 and stats.step_ms == pytest.approx(100.0)
    assert meter.total_steps == 6
