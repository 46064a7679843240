"""Cap this process's address space (RLIMIT_AS) a little above what it uses now, so that running
out of memory stays inside the test (the machine's memory is never at stake)."""

import ctypes
import resource

import torch

M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def cap_address_space(extra_mib: int) -> int:
    """Allow `extra_mib` MiB of address space beyond the current size; return the limit."""
    torch.set_num_threads(1)  # new threads reserve address space (stacks, malloc arenas)
    # Any thread started later (the profiler's, the doctor's) shares malloc's main arena: glibc
    # otherwise gives a thread that meets a held lock an arena of its own, 64 MiB of address
    # space at once (the likely cause, not confirmed, of oom_host_fixed.py failing once under
    # the doctor on a busy machine).
    ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1)
    with open("/proc/self/status") as status:
        vm_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = vm_kib * 1024 + extra_mib * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit
