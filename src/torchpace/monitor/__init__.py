"""Live throughput, utilisation and progress."""

from torchpace.monitor.flops import count_flops
from torchpace.monitor.nvml import GpuStats, gpu_stats
from torchpace.monitor.peaks import Peak, known_devices, lookup_peak
from torchpace.monitor.progress import progress
from torchpace.monitor.throughput import Throughput, ThroughputStats, format_stats

__all__ = [
    "GpuStats",
    "Peak",
    "Throughput",
    "ThroughputStats",
    "count_flops",
    "format_stats",
    "gpu_stats",
    "known_devices",
    "lookup_peak",
    "progress",
]
