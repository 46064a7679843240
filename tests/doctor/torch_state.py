"""torch's process-wide switches, put back after a script ran in-process (the doctor tests' runs)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from torchpace.environment.tf32 import matmul_precision


def _backend_switches() -> list[tuple[Any, str]]:
    """torch.backends switches a script sets globally: in-process, the next run would read them."""
    import torch

    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    switches = [(cudnn, name) for name in ("benchmark", "deterministic", "enabled")]
    if not hasattr(matmul, "fp32_precision"):  # torch < 2.9
        return [*switches, (matmul, "allow_tf32"), (cudnn, "allow_tf32")]
    # torch >= 2.9: the legacy flags read these; put back after set_float32_matmul_precision,
    # which sets the CUDA and oneDNN matmul ones.
    mkldnn = torch.backends.mkldnn
    owners = [
        getattr(b, op, None) for b, op in ((cudnn, "conv"), (cudnn, "rnn"), (mkldnn, "matmul"))
    ]
    owners = [matmul, *(o for o in owners if hasattr(o, "fp32_precision"))]
    return [*switches, *((owner, "fp32_precision") for owner in owners)]


@contextlib.contextmanager
def torch_left_clean() -> Iterator[None]:
    """Put back the global switches a smell script may flip: threads, anomaly detection,
    deterministic algorithms, cudnn.benchmark and the TF32 switches. On a GPU,
    test_cudnn_benchmark_off's `--fixed` run left cudnn.benchmark on, and the naive example's run
    right after it got no cudnn-benchmark-off."""
    import torch

    threads = torch.get_num_threads()
    precision = matmul_precision()  # the legacy getter raises on some states the new API sets
    switches = [(owner, name, getattr(owner, name)) for owner, name in _backend_switches()]
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.autograd.set_detect_anomaly(False)
        torch.use_deterministic_algorithms(False)
        torch.set_float32_matmul_precision(precision)
        for owner, name, value in switches:
            setattr(owner, name, value)
