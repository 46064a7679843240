"""Deprecated APIs (torch.cuda.amp.*, torch.jit.script, ...): PyTorch's own warnings, with call sites."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

# The replacement for APIs that PyTorch only names in its warning text.
_REPLACEMENTS = {
    "torch.cuda.amp.autocast": "torch.amp.autocast('cuda', ...)",
    "torch.cuda.amp.GradScaler": "torch.amp.GradScaler('cuda', ...)",
    "torch.cpu.amp.autocast": "torch.amp.autocast('cpu', ...)",
    "torch.jit.script": "torch.compile(model) (or torch.export for deployment)",
    "torch.jit.trace": "torch.compile(model) (or torch.export for deployment)",
}


@rule("deprecated-api", input="live")
def deprecated_api(live: Inspection) -> list[Finding]:
    """One finding per deprecated API the script called, pointing at each call site."""
    by_api: dict[str, list[int]] = {}
    for i, use in enumerate(live.flags.deprecated):
        by_api.setdefault(use.api, []).append(i)
    found = []
    for api, indices in sorted(by_api.items()):
        uses = [live.flags.deprecated[i] for i in indices]
        fix = next((u.replacement for u in uses if u.replacement), _REPLACEMENTS.get(api, ""))
        message = next((u.message for u in uses if u.message), "")
        jit = api.startswith("torch.jit")
        found.append(
            Finding(
                rule="deprecated-api",
                severity=Severity.MEDIUM if jit else Severity.LOW,
                summary=f"{api} is deprecated"
                + (": TorchScript gets no new optimisations" if jit else "")
                + f" (called {sum(u.count for u in uses)}x)",
                evidence=_evidence(api, sum(u.count for u in uses), message),
                fix=f"use {fix}" if fix else "follow PyTorch's warning: " + message,
                locations=tuple(u.location for u in uses if u.location is not None),
            )
        )
    return found


def _evidence(api: str, calls: int, message: str) -> dict[str, EvidenceValue]:
    """The API and its calls, and torch's own warning where it gave one."""
    evidence: dict[str, EvidenceValue] = {"api": api, "calls": calls}
    if message:
        evidence["warning"] = message
    return evidence
