"""Environment facts from sysfs and the process: CPU lists, NUMA spans, the malloc in use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchpace.environment import probe as environment


def test_cpulist_ranges() -> None:
    assert environment._cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert environment._cpulist("") == set()


def test_numa_nodes_counts_the_nodes_this_process_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i, cpus in enumerate(("0-1", "2-3")):
        (tmp_path / f"node{i}").mkdir()
        (tmp_path / f"node{i}" / "cpulist").write_text(cpus)
    monkeypatch.setattr(environment, "_SYS_NODES", tmp_path)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert environment.numa_nodes() == (2, 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1, 2})
    assert environment.numa_nodes() == (2, 2)


def test_no_sysfs_means_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "_SYS_NODES", tmp_path / "missing")
    assert environment.numa_nodes() == (None, None)


def test_allocator_from_ld_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")
    assert environment.allocator() == "tcmalloc"
    monkeypatch.delenv("LD_PRELOAD")
    assert environment.allocator() in ("glibc", "jemalloc", "tcmalloc", "mimalloc")


def test_env_and_bench_name_the_cpu_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two readers of /proc/cpuinfo once answered this apart (bench fell back to the machine type).
    import torch

    from torchpace.bench.results import environment as bench_environment

    cpuinfo = "processor\t: 0\nmodel name\t:  AMD EPYC 9654 96-Core Processor \nflags\t\t: fpu avx512_bf16\n"
    monkeypatch.setattr(
        environment, "_read", lambda path: cpuinfo if "cpuinfo" in str(path) else ""
    )
    assert environment.cpu_model() == "AMD EPYC 9654 96-Core Processor"
    assert environment.cpu_facts().model == bench_environment(torch.device("cpu")).cpu
    assert environment.cpu_bf16() == "avx512_bf16" and environment.cpu_facts().bf16_native


def test_proc_fields_read_in_bytes(tmp_path: Path) -> None:
    # One reader for RssAnon, VmSize, VmHWM (the runner, its memory sensor, the bench) and MemAvailable.
    from torchpace.environment.process import proc_kib

    status = tmp_path / "status"
    status.write_text("VmPeak:\t  2048 kB\nVmSize:\t  1024 kB\nRssAnon:\t   512 kB\nBad:\tx kB\n")
    assert proc_kib(str(status), "VmSize") == 1024 * 1024
    assert proc_kib(str(status), "RssAnon") == 512 * 1024
    assert proc_kib(str(status), "VmHWM") is None and proc_kib(str(status), "Bad") is None
    assert proc_kib(str(tmp_path / "missing"), "VmSize") is None
