"""A skipped rule's advice under `torchpace doctor`, which owns the profiler: only what a user can do.

Rules say how to record what they miss as torch.profiler options ("add ProfilerActivity.CUDA"),
right for a trace the user recorded. Under the doctor those options are not the user's to set: it
records CPU and CUDA activity whenever a GPU is there, shapes and stacks always, memory unless
--no-memory. This is the one place that turns a rule's advice into the doctor's; the engine
applies it to every recording the tool made (doctor/recording.py: the doctor's, the callbacks').
"""

from __future__ import annotations

from dataclasses import replace

from torchpace.doctor.finding import Skipped

# What the doctor records by itself: advice to record these names nothing the user can change.
_RECORDED_BY_THE_DOCTOR = ("ProfilerActivity", "activities=", "record_shapes", "with_stack")


def doctor_advice(skipped: Skipped) -> Skipped:
    """`skipped` with advice that holds under the doctor (none where there is nothing to do)."""
    enable = skipped.enable
    if "profile_memory" in enable:
        enable = "run the doctor without --no-memory"  # the only way memory goes unrecorded
    elif any(option in enable for option in _RECORDED_BY_THE_DOCTOR):
        enable = ""
    return skipped if enable == skipped.enable else replace(skipped, enable=enable)
