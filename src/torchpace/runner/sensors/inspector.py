"""Install the sensors, watch steps on request, and assemble the Inspection.

`Inspector.install()` installs each sensor's patches (DataLoaders, flags and precision tools,
deprecated APIs); `watch()` starts the model sensor for the last warm-up steps; `snapshot()` reads
every sensor's record into one Inspection. `restore()` undoes every patch.
"""

from __future__ import annotations

from typing import Any

from torchpace.policy.devices import is_cuda
from torchpace.runner.patching import Patcher
from torchpace.runner.sensors.compile import CompileSensor
from torchpace.runner.sensors.flags import FlagsSensor
from torchpace.runner.sensors.host import device_record, host_record
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.loader import LoaderSensor
from torchpace.runner.sensors.memory import MemorySensor
from torchpace.runner.sensors.model import StepWatcher, model_record


class Inspector:
    """The sensors of one run, and the Inspection they add up to."""

    def __init__(self, world_size: int = 1, *, memory: bool = True) -> None:
        self.world_size = world_size
        self.memory = MemorySensor()
        self._watch_memory = memory  # --no-memory: no allocator history, no census
        self.patcher = Patcher()
        self.loader = LoaderSensor()
        self.flags = FlagsSensor()
        self.compiles = CompileSensor()
        self.watcher: StepWatcher | None = None
        self.notes: list[str] = []
        self.module_ran = False  # an nn.Module has been called (a model is at work)
        self._first_module: Any = None  # the one-shot global hook that notices it

    @property
    def compiled(self) -> bool:
        """Whether the script called torch.compile. The watch then stays off: global module hooks
        added after a compile see only the compiled wrapper (the inner modules run inside the
        graph), and hooks present while dynamo traces are traced with it, their bookkeeping
        becoming guards that fail each step (recompiles the compile sensor would then report as
        the script's; seen in torch 2.13). The compile sensor reads dynamo's records instead."""
        return self.flags.compiled

    def install(self) -> None:
        """Patch the entry points; safe to call once per run."""
        from torch.nn.modules.module import register_module_forward_pre_hook

        self.loader.install(self.patcher)
        self.flags.install(self.patcher)
        self.flags.on_compile = self._compiling
        self.compiles.install()
        self.memory.install(enabled=self._watch_memory)
        # Removed at the first module call, before any model runs on (or dynamo traces it).
        self._first_module = register_module_forward_pre_hook(self._module_ran)

    def _module_ran(self, module: Any, args: Any) -> None:
        self.module_ran = True
        self._drop_first_module_hook()

    def _compiling(self, compiled: Any) -> None:
        """torch.compile returned `compiled`: the one-shot global hook goes now. Still there at
        the first call of the compiled module, torch warns the user of global hooks on their
        stderr (a warning plain python never prints); the module compiled is about to run."""
        self.module_ran = True
        self._drop_first_module_hook()

    def _drop_first_module_hook(self) -> None:
        hook, self._first_module = self._first_module, None
        if hook is not None:
            hook.remove()

    def restore(self) -> None:
        """Undo every patch and stop watching."""
        self._drop_first_module_hook()
        if self.watcher is not None:
            self.watcher.stop()
        self.patcher.restore()
        self.memory.restore()

    # --- watching steps ---------------------------------------------------------------------
    def watch(self, *, dispatch: bool = True) -> None:
        """Start watching steps closely: module hooks and the host-tensor dispatch mode.

        A dispatch mode belongs to the thread that entered it: with several training threads
        (`dispatch=False`) only the module hooks watch.
        """
        if self.watcher is None:
            self.watcher = StepWatcher()
            # Dispatch modes and torch.compile do not mix well: skip the host-tensor watch then.
            self.watcher.start(dispatch=dispatch and not self.compiled)

    def unwatch(self) -> None:
        """Stop watching; what was seen stays for the Inspection."""
        if self.watcher is not None:
            self.watcher.stop()

    def release_workers(self) -> None:
        """The script is over: end its DataLoader workers in order (LoaderSensor)."""
        self.loader.shut_down_workers()

    def capture_flags(self) -> None:
        """Record the global switches now, from inside the training loop."""
        self.flags.capture()

    # --- the Inspection ---------------------------------------------------------------------
    def snapshot(self, *, profiled_ms: float | None = None, steps: int = 0) -> Inspection:
        """Everything seen so far, as plain data."""
        watcher = self.watcher
        device = device_record(watcher.model.device_type if watcher is not None else None)
        autocast_kind = "cuda" if is_cuda(device.kind) else "cpu"
        compiles = self.compiles.record()
        return Inspection(
            device=device,
            host=host_record(),
            flags=self.flags.record(),
            model=model_record(watcher, autocast_kind in self.flags.autocast_seen),
            compiles=compiles,
            loaders=self.loader.facts(profiled_ms),
            world_size=self.world_size,
            step_ms=profiled_ms / steps if profiled_ms and steps else None,
            memory=self.memory.record(),
            notes=(*self.notes, compiles.sentence()) if compiles.sentence() else tuple(self.notes),
        )
