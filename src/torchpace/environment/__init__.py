"""What the machine is: CPU (cores, bf16 arithmetic, NUMA), GPUs, the allocator, the software stack.

Probed once, with no profiler: read by `torchpace env`, by `torchpace bench`, by `--verify`'s plan and
by the runner's host sensor.
"""
