"""Peak memory per configuration: CUDA max_memory_allocated on a GPU, the process's RSS high-water on CPU."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from torchpace.environment.process import peak_rss_bytes, proc_kib

CUDA_KIND = "cuda max_memory_allocated"
RSS_KIND = "host RSS high-water (main process)"
RSS_KIND_UNRESET = "host RSS high-water (main process, since start: could not reset)"


@dataclass(frozen=True)
class PeakMemory:
    """Resets the peak at the start of a configuration and reads it at the end."""

    device: torch.device

    def reset(self) -> bool:
        """Start a new peak; False when the platform cannot reset it (the peak then covers the process)."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            return True
        try:
            # Linux: writing 5 to clear_refs resets VmHWM (the RSS high-water mark) to the current RSS.
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
        except OSError:
            return False
        return True

    def read(self) -> int:
        """Peak bytes since reset()."""
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        found = proc_kib("/proc/self/status", "VmHWM")  # since reset(), unlike ru_maxrss
        return peak_rss_bytes() if found is None else found

    def kind(self, was_reset: bool) -> str:
        """What the number means, shown beside it."""
        if self.device.type == "cuda":
            return CUDA_KIND
        return RSS_KIND if was_reset else RSS_KIND_UNRESET
