"""DataLoader settings switched on by patching its construction: workers, pinning, worker reuse.

Answers `dataloader-stall` (worker counts tried around the policy's suggestion; the best is kept)
and `loader-config` (pageable batches on an accelerator, workers restarted every epoch, more workers
than cores). Every DataLoader the script builds gets the settings.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from torchpace.doctor.finding import Finding
from torchpace.fixes.workers import Host, candidates, oversubscribed
from torchpace.policy.devices import device
from torchpace.verify.appliers.base import Applier, Context, Fix, Params


def _workers(counts: list[int]) -> list[Fix]:
    return [
        Fix("loader", f"num_workers={n}, persistent_workers=True", {"num_workers": n})
        for n in counts
    ]


def _host(context: Context) -> Host:
    return Host(context.cores, 1, device(context.device))


def _plan_stall(finding: Finding, context: Context) -> list[Fix]:
    ev = finding.evidence
    current = ev.get("current_workers_count")
    suggested = ev.get("suggested_workers_count")
    if not isinstance(current, int):
        return []  # the trace does not say how many workers there are: nothing to set
    if not isinstance(suggested, int) or suggested <= current:
        suggested = current + 1  # the policy expects no gain: measuring settles it
    return _workers(candidates(suggested, current, _host(context)))


def _plan_config(finding: Finding, context: Context) -> list[Fix] | None:
    ev = finding.evidence
    if ev.get("live_source"):
        return None  # a live buffer must stay in the main process: not a speed setting
    if "pin_memory" in ev:
        pin = not ev["pin_memory"]
        return [Fix("loader", f"pin_memory={pin}", {"pin_memory": pin})]
    workers = ev.get("num_workers")
    if "epochs_started" in ev:
        return [Fix("loader", "persistent_workers=True", {"persistent_workers": True})]
    if "cores_per_rank" in ev and isinstance(workers, int):
        best = oversubscribed(_host(context), workers) or max(1, workers // 2)
        return _workers(candidates(best, 0, _host(context)))
    return None


def _plan(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule == "dataloader-stall":
        return _plan_stall(finding, context)
    if finding.rule == "loader-config":
        return _plan_config(finding, context)
    return None


def _apply(params: Params) -> None:
    from torch.utils.data import DataLoader

    original = DataLoader.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return original(self, *args, **kwargs)  # let torch say what is wrong
        _settle(bound.arguments, params)
        return original(*bound.args, **bound.kwargs)

    DataLoader.__init__ = init  # type: ignore[method-assign]


def _settle(arguments: dict[str, Any], params: Params) -> None:
    """Set the fix's settings, keeping the combination DataLoader accepts."""
    if "num_workers" in params:
        workers = int(params["num_workers"])
        arguments["num_workers"] = workers
        arguments["persistent_workers"] = workers > 0
        if workers == 0:
            arguments["prefetch_factor"] = None
    if "pin_memory" in params:
        arguments["pin_memory"] = bool(params["pin_memory"])
    if "persistent_workers" in params and arguments.get("num_workers", 0):
        arguments["persistent_workers"] = bool(params["persistent_workers"])


LOADER = Applier("loader", _plan, _apply)
