"""Diagnose: rules over traces and live objects that produce findings."""

from torchpace.doctor.finding import Finding, Severity, Skipped, sort_findings
from torchpace.doctor.registry import NotApplicable, RuleSpec, all_rules, get_rule, rule
from torchpace.trace.stacks import SourceLocation

__all__ = [
    "Finding",
    "NotApplicable",
    "RuleSpec",
    "Severity",
    "Skipped",
    "SourceLocation",
    "all_rules",
    "get_rule",
    "rule",
    "sort_findings",
]
