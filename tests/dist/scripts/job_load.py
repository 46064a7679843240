"""Each rank under torchrun: rank 1 burns 0.6 s of CPU while rank 0 sleeps between two load
samples; rank 0 writes what its samples counted as this job's CPU time (the sibling's burn
included) and its own."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from torchpace.runner.load import job_root, sample_load

out = Path(sys.argv[1])
rank = int(os.environ["RANK"])


def wait_for(name: str) -> None:
    deadline = time.monotonic() + 60
    while not (out / name).exists():
        if time.monotonic() > deadline:
            sys.exit(f"rank {rank}: {name} never came")
        time.sleep(0.01)


if rank == 0:
    start, own0 = sample_load(), time.process_time()
    (out / "go").touch()
    wait_for("done")
    end, own1 = sample_load(), time.process_time()
    result = {
        "job_s": end.own_busy_s - start.own_busy_s,
        "own_s": own1 - own0,
        "root_is_parent": job_root() == os.getppid(),
    }
    (out / "job_load.json").write_text(json.dumps(result))
    (out / "sampled").touch()
else:
    wait_for("go")
    t0 = time.process_time()
    while time.process_time() - t0 < 0.6:
        pass
    (out / "done").touch()
    # Alive until rank 0's second reading: a process that has ended is in no live tree, however
    # slowly a busy machine schedules rank 0.
    wait_for("sampled")
