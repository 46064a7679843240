"""The doctor's terminal: the script's output with the profiler's log lines left out, and a
progress line while the doctor runs (control.py starts the relay process, relay.py is it)."""

from torchpace.runner.terminal.control import Terminal, wants_progress

__all__ = ["Terminal", "wants_progress"]
