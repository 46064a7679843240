"""Shared decisions at the ground floor, one module each, called by every user (standard library
only: the trace layer, the rules, the runner and the library all import it).

- `torchpace.policy.devices`: the device vocabulary and which kinds are accelerators.
- `torchpace.policy.memory`: the categories of what holds memory, in the report's order.
- `torchpace.policy.threads`: how many torch threads one process should use.
- `torchpace.policy.window`: the warm-up-then-steps window, checked once.
"""
