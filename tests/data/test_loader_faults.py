"""Faults: failing items, killed workers, and nothing left behind after an epoch, a break or an error.

The autouse `no_leaks` fixture (conftest.py) fails any of these tests that leaves a worker process,
a thread or a file behind once the loader is gone.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
from torch.utils.data import Dataset

from torchpace.data import DevicePrefetcher, fast_loader


class Items(Dataset):
    """Item i is i; item `bad` raises; each item may take a little time."""

    def __init__(self, n: int, bad: int | None = None, delay: float = 0.0) -> None:
        self.n, self.bad, self.delay = n, bad, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        if self.delay:
            time.sleep(self.delay)
        if index == self.bad:
            raise ValueError("corrupt record")
        return index


@pytest.mark.timeout(60)
def test_item_error_in_a_worker_names_the_index_and_does_not_hang():
    loader = fast_loader(Items(40, bad=13), 4, num_workers=1)
    with pytest.raises(ValueError, match="corrupt record") as raised:
        for _ in loader:
            pass
    assert "raised while loading dataset index 13" in str(raised.value)
    assert "DataLoader worker process" in str(raised.value)
    del raised, loader


@pytest.mark.timeout(60)
def test_a_worker_killed_with_sigkill_raises_within_the_timeout():
    loader = fast_loader(Items(10_000, delay=0.01), 4, num_workers=2, timeout=20)
    iterator = iter(loader)
    next(iterator)
    os.kill(loader._iterator._workers[0].pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(
        RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"
    ):
        for _ in range(10_000):
            next(iterator)
    assert time.monotonic() - start < 20
    del iterator, loader


def test_nothing_left_after_a_full_epoch():
    loader = fast_loader(Items(30), 4, num_workers=2)
    prefetcher = DevicePrefetcher(loader, "cpu")
    for _ in range(2):
        assert sum(len(batch) for batch in prefetcher) == 30
    del prefetcher, loader


def test_nothing_left_after_a_break():
    loader = fast_loader(Items(1000, delay=0.001), 4, num_workers=2, persistent_workers=False)
    for i, _ in enumerate(DevicePrefetcher(loader, "cpu")):
        if i == 2:
            break
    del loader


def test_prefetcher_reraises_a_worker_error_and_cleans_up(child_pids):
    before = child_pids()
    loader = fast_loader(Items(20, bad=9), 4, num_workers=2, persistent_workers=False)
    seen = []
    with pytest.raises(ValueError, match="corrupt record") as raised:
        for batch in DevicePrefetcher(loader, "cpu", transform=lambda b: b * 1):
            seen += batch.tolist()
    assert seen == list(range(8))
    assert "produced batch 2" in raised.value.__notes__[-1]
    # The workers are gone at once, with no garbage collection (the stock loader waits for gc).
    assert child_pids() == before
    del raised, loader


def test_prefetcher_with_tensors_and_a_transform_matches_the_plain_loader():
    loader = fast_loader(Items(25), 4, num_workers=2, shuffle=False)
    plain = [batch.float() / 2 for batch in loader]
    fetched = list(DevicePrefetcher(loader, "cpu", transform=lambda b: b.float() / 2))
    assert all(torch.equal(a, b) for a, b in zip(plain, fetched, strict=True))
    del loader


def test_the_leak_check_sees_a_process_a_thread_and_a_file(leak_snapshot, tmp_path):
    import multiprocessing
    import threading

    before = leak_snapshot()
    process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
    process.start()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    handle = open(tmp_path / "left-open", "w")  # noqa: SIM115 - left open on purpose
    try:
        extra = [now - then for now, then in zip(leak_snapshot(), before, strict=True)]
        assert process.pid in extra[0] and thread.ident in extra[1] and len(extra[2]) == 1
    finally:
        handle.close()
        stop.set()
        thread.join()
        process.kill()
        process.join()
