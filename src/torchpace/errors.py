"""Errors torchpace raises for bad input; the CLI turns them into one line and exit code 2."""

from __future__ import annotations


class TorchpaceError(Exception):
    """Bad input or usage: the message names what is wrong, what was given and how to fix it."""


class TraceError(TorchpaceError):
    """A profiler trace that cannot be read or analysed."""


class UsageError(TorchpaceError):
    """A command-line or API argument that does not make sense."""


class RuleChoiceError(UsageError, ValueError):
    """A rule id or threshold that names no rule or threshold, or a threshold out of its range
    (a ValueError too: the Python API has always raised one)."""


class OutputError(TorchpaceError):
    """The output could not be written (a full disk, a pipe whose reader went away)."""
