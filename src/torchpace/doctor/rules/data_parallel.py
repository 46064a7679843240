"""nn.DataParallel drives every GPU from one Python process; DDP under torchrun scales far better."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

_FIX = """# torchrun --nproc-per-node NUM_GPUS train.py
torch.distributed.init_process_group("nccl")
rank = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(rank)
model = torch.nn.parallel.DistributedDataParallel(model.to(rank), device_ids=[rank])
loader = DataLoader(ds, batch_size=per_gpu_batch, sampler=DistributedSampler(ds))"""


@rule("data-parallel", input="live")
def data_parallel(live: Inspection) -> list[Finding]:
    """Flag nn.DataParallel: single-process multi-GPU that scatters, replicates and gathers per step."""
    if not live.model.watched():
        raise NotApplicable(
            live.model.unwatched_reason(),
            live.model.unwatched_enable(),
        )
    devices = live.model.data_parallel_devices
    if devices is None:
        return []
    if devices <= 1:
        return [
            Finding(
                rule="data-parallel",
                severity=Severity.LOW,
                summary=_one_device(devices),
                evidence={"device_count": devices},
                fix="model = model.to(device)  # drop nn.DataParallel; use DDP under torchrun "
                "for several GPUs",
            )
        ]
    return [
        Finding(
            rule="data-parallel",
            severity=Severity.HIGH,
            summary=f"nn.DataParallel drives {devices} GPUs from one Python thread, "
            "re-replicating the model every step",
            evidence={"device_count": devices},
            fix=_FIX,
            caveat="DDP needs one process per GPU: per-GPU batch size, a DistributedSampler, and "
            "logging/checkpointing on rank 0 only.",
        )
    ]


def _one_device(devices: int) -> str:
    if devices == 0:  # no GPU: DataParallel runs the module as is (a CPU run, or CUDA hidden)
        return (
            "nn.DataParallel wraps the model but has no GPU to use (device_ids is empty): "
            "it parallelises nothing"
        )
    return (
        "nn.DataParallel wraps the model over 1 device: it adds overhead and parallelises nothing"
    )
