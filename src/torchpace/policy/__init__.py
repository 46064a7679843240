"""Shared decisions at the ground floor, one module each, called by every user (standard library
only, but for `devices.default_device`, which asks torch when called: the trace layer, the rules,
the runner and the library all import it).

- `torchpace.policy.devices`: the device vocabulary, which kinds are accelerators, and the
  device a new model trains on here (`default_device`, `has_accelerator`).
- `torchpace.policy.memory`: the categories of what holds memory, in the report's order.
- `torchpace.policy.threads`: how many torch threads one process should use.
- `torchpace.policy.window`: the warm-up-then-steps window, checked once.
"""
