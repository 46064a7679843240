"""What the doctor saw of live objects while a script ran: plain data, no torch import.

Filled by runner/sensors/inspector.py (issue: `torchpace doctor`); read by "live" rules and by trace rules
registered with live=True. Every field is optional: None means "not observed", never "false".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchpace.trace.stacks import SourceLocation


@dataclass(frozen=True)
class LoaderFacts:
    """One DataLoader the script created, with where it was created."""

    num_workers: int
    batch_size: int | None
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int | None
    iterable: bool  # the dataset is an IterableDataset
    shards_by_worker: bool | None = None  # an IterableDataset that reads get_worker_info()
    dataset_type: str = ""
    created_at: SourceLocation | None = None
    worker_init_fn: bool = False  # a worker_init_fn may shard an IterableDataset by itself
    # An IterableDataset that reads a live buffer (a deque or queue: reinforcement learning), where
    # worker processes would each read a stale copy; None: not an IterableDataset.
    live_source: bool | None = None
    epochs_started: int = 0  # iterators created over the run (one per epoch)
    # Share of the profiled steps' time spent inside this loader's __next__; None: not profiled.
    wait_fraction: float | None = None
    # Share of that wait the training thread spent on its CPU (thread CPU time / wall time):
    # low when the loading waits on I/O, near 1 when it computes; None: not measured.
    wait_cpu_fraction: float | None = None
    # The same share between batches (the rest of the step): what the thread gets when it
    # computes, lower on a machine busy with other work. None: not measured.
    rest_cpu_fraction: float | None = None
    # Batches identical to an earlier batch among those the doctor hashed during the inspected steps.
    duplicate_batches: int | None = None


@dataclass(frozen=True)
class ConvBnPair:
    """A convolution with a bias whose output goes straight into a BatchNorm (the bias is wasted)."""

    conv: str  # module path, e.g. "features.0"
    bn: str
    conv_type: str = "Conv2d"


@dataclass(frozen=True)
class ApiUse:
    """A deprecated or slow API the script called, with where and how often."""

    api: str  # e.g. "torch.cuda.amp.autocast"
    replacement: str  # e.g. "torch.amp.autocast('cuda')"
    message: str = ""  # PyTorch's own warning text when it gave one
    location: SourceLocation | None = None
    count: int = 1


@dataclass(frozen=True)
class GradForward:
    """Forward passes that recorded autograd graphs and had no backward pass (evaluation)."""

    module: str  # class name of the top-level module
    training: bool  # module.training at the time (False: model.eval() was called)
    count: int
    location: SourceLocation | None = None


@dataclass(frozen=True)
class HostTensor:
    """A small tensor created on the host and copied to the device, every inspected step."""

    location: SourceLocation
    count_per_step: float
    numel: int
    nbytes: int
    op: str = ""  # the aten op that created or copied it


@dataclass(frozen=True)
class ChildProcesses:
    """Processes the script started itself (torch.multiprocessing, mp.spawn, a Pool)."""

    count: int
    target: str  # the function they run, "module.function"
    started_at: SourceLocation | None
    cpu_s: float  # CPU seconds they used while the doctor watched
    main_cpu_s: float  # CPU seconds the doctored process used over the same run

    def did_the_work(self) -> bool:
        """Whether they, not the doctored process, did most of the computing."""
        return self.cpu_s > self.main_cpu_s


@dataclass(frozen=True)
class Inspection:
    """Live facts gathered in-process; the trace rules with live=True read the precision fields."""

    device_kind: str = "cpu"  # "cpu", "cuda", "rocm", "mps"
    device_name: str | None = None
    compute_capability: tuple[int, int] | None = None
    bf16_supported: bool | None = None
    # How the host CPU computes bf16: "amx", "avx512_bf16" or "none" (emulated); None: unknown.
    cpu_bf16: str | None = None
    cpu_cores: int | None = None
    torch_threads: int | None = None
    world_size: int = 1
    # Precision and math modes, as seen during the profiled forward passes.
    autocast_in_forward: bool | None = None
    autocast_dtype: str | None = None  # "bfloat16", "float16"
    grad_scaler_used: bool | None = None
    tf32_matmul: bool | None = None  # torch.backends.cuda.matmul.allow_tf32 / matmul precision
    tf32_cudnn: bool | None = None
    float32_matmul_precision: str | None = None
    cudnn_benchmark: bool | None = None
    compiled: bool | None = None  # torch.compile in use
    loaders: tuple[LoaderFacts, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Added by the doctor (issue 3); all optional like the fields above.
    accelerator_count: int | None = None  # visible CUDA/ROCm devices
    steps_inspected: int = 0  # steps whose modules and ops were watched (the last warm-up steps)
    anomaly_detection: bool | None = None
    debug_apis: tuple[str, ...] = ()  # debugging switches left on, e.g. "CUDA_LAUNCH_BLOCKING=1"
    deterministic_algorithms: bool | None = None
    cudnn_deterministic: bool | None = None
    data_parallel_devices: int | None = None  # nn.DataParallel in use, over this many devices
    conv_layers: int | None = None  # convolutions run per forward pass
    conv_bias_before_bn: tuple[ConvBnPair, ...] = ()
    conv_input_channels_last: bool | None = None
    input_shapes_static: bool | None = None  # the top-level input shapes did not change
    param_dtypes: tuple[tuple[str, int], ...] = ()  # (dtype, parameter count), largest first
    deprecated: tuple[ApiUse, ...] = ()
    grad_forwards: tuple[GradForward, ...] = ()
    backward_calls: int | None = None  # during the inspected steps
    optimizer_steps: int | None = None  # during the inspected steps
    host_tensors: tuple[HostTensor, ...] = ()
    omp_num_threads: str | None = None  # the environment variable as set, None when unset
    mkl_num_threads: str | None = None
    interop_threads: int | None = None
    allocator: str | None = None  # "glibc", "jemalloc", "tcmalloc", "mimalloc"
    numa_nodes: int | None = None
    step_ms: float | None = None  # mean profiled step time, for savings estimates
    # Added by the runner (issue 13).
    child_processes: ChildProcesses | None = None
    # The model was called as model.forward(...), which runs no nn.Module hooks: the watched
    # steps saw no module. Where the call was made.
    forward_bypass: SourceLocation | None = None

    def modules_watched(self) -> bool:
        """Whether the watched steps saw the model's modules run (hooks fired)."""
        seen = bool(self.param_dtypes) or self.forward_bypass is None
        return self.steps_inspected > 0 and seen

    def unwatched_reason(self) -> str:
        """Why no model was seen in the watched steps, in words the rules' skip notes use."""
        if self.forward_bypass is not None:
            return (
                f"the model is called as .forward(...) at {self.forward_bypass}, which bypasses "
                "nn.Module hooks, so the doctor saw no module (call model(x) instead)"
            )
        if self.steps_inspected:
            return "the watched steps ran no nn.Module (a functional model, or TorchScript)"
        return "no step was watched (torch.compile, time-window steps or --warmup 0 skip the watch)"
