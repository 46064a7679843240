"""One measurement core for `torchpace bench`, `torchpace compare` and `doctor --verify`.

    from torchpace.measure import Arm, Settings, Timed, measure
    result = measure([Arm("baseline", run_plain), Arm("workers=2", run_with_workers)], Settings())
    result.arm("workers=2").ratio      # time ratio with its 95% interval; .verdict: faster/slower/no-change

Arms run interleaved with the same window, repeated for an interval; the machine's load is recorded
and a busy machine is warned about (torchpace.measure.core, .stats, .load). Arms may be separate
processes (torchpace.measure.process). torch-free.
"""

from torchpace.measure.arms import Arm, Expect, Timed, Window
from torchpace.measure.core import ArmResult, BaselineFailed, Measured, Run, Settings, measure
from torchpace.measure.load import LoadSample, LoadSummary, MachineProbe, NoProbe
from torchpace.measure.stats import Change, Ratio, Verdict, change

__all__ = [
    "Arm",
    "ArmResult",
    "BaselineFailed",
    "Change",
    "Expect",
    "LoadSample",
    "LoadSummary",
    "MachineProbe",
    "Measured",
    "NoProbe",
    "Ratio",
    "Run",
    "Settings",
    "Timed",
    "Verdict",
    "Window",
    "change",
    "measure",
]
