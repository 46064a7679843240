"""What torch.profiler names its events: the one place the trace layer's name patterns live.

Loop markers (`ProfilerStep#N`, the DataLoader's and optimizer's record_function ranges),
autograd's ranges, the copy ops, and collective communication: the process groups' host ranges
(`nccl:all_reduce`, `gloo:broadcast`) and the communication kernels. The kernel-name classifier
(kernels.py, kernel_names.py) reads the rest of a kernel's name.
"""

from __future__ import annotations

import re

# prof.step() closes `ProfilerStep#N` and opens the next; N numbers the step.
STEP_MARKER = "ProfilerStep#"
STEP_RANGE = re.compile(r"^ProfilerStep#(\d+)$")
# `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`: one per batch taken.
DATALOADER = "enumerate(DataLoader)"
# `Optimizer.step#SGD.step`, `Optimizer.zero_grad#SGD.zero_grad`.
OPTIMIZER = "Optimizer."
OPTIMIZER_STEP = "Optimizer.step#"
OPTIMIZER_ZERO_GRAD = "Optimizer.zero_grad#"
# A range around each call of an optimizer's closure (`torchpace doctor` records them): its
# forward and backward are the model's, not the optimizer's.
CLOSURE_PREFIX = "Optimizer.closure#"
# The ranges the training loop itself records, which are no phase and no user label.
LOOP_MARKERS = (STEP_MARKER, DATALOADER, OPTIMIZER)
# `## name ##` ranges: torch.compile's and TorchRec's region markers.
REGION_MARKER = "##"

# torch >= 1.11 wraps each autograd node in this range; torch <= 1.10 names the node directly:
# "CudnnConvolutionBackward", "AddmmBackward0".
BACKWARD_OP = "autograd::engine::evaluate_function"
BACKWARD_NODE = re.compile(r"^[A-Z]\w*Backward\d*$|^torch::autograd::AccumulateGrad$")
# The aten ops a host-to-device copy runs under.
COPY_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous"})

# The ops that launch matmul/convolution arithmetic, not the wrappers around them (linear, matmul,
# conv2d, _convolution), so nothing counts twice; a CPU run's backward convolution is its own op.
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"})
CONV_OPS = frozenset({"aten::convolution"})
CPU_MATH_OPS = MATMUL_OPS | CONV_OPS | frozenset({"aten::convolution_backward"})

# Process-group backends: each records its collectives as `<backend>:<collective>` host ranges.
COLLECTIVE_BACKENDS = ("nccl", "gloo", "mpi", "ucc", "rccl", "xccl", "hccl")
_BACKENDS = "|".join(COLLECTIVE_BACKENDS)
# A collective's host range, as the process group records it on its own thread.
COLLECTIVE_RANGE = re.compile(rf"^({_BACKENDS}):[a-z_]+", re.I)
# Host ranges whose time is communication in the step breakdown: the collectives' ranges, the
# c10d ops (`c10d::allreduce_`) and DDP/FSDP's `record_param_comms`.
COMMUNICATION_OP = re.compile(rf"^({_BACKENDS}|c10d)[:_]|^record_param_comms$")
# Communication kernels (NCCL/RCCL): checked before the other kernel classes, as NCCL kernels
# mention "reduce".
COMMUNICATION_KERNEL = re.compile(
    r"nccl|rccl|gloo|allreduce|all_reduce|allgather|reducescatter", re.I
)


def is_dataloader(name: str) -> bool:
    """`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` and its variants."""
    return name.startswith(DATALOADER) and "__next__" in name


def is_optimizer(name: str) -> bool:
    """`Optimizer.step#SGD.step` / `Optimizer.zero_grad#SGD.zero_grad`."""
    return name.startswith((OPTIMIZER_STEP, OPTIMIZER_ZERO_GRAD))
