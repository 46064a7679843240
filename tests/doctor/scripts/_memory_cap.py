"""Cap this process's address space (RLIMIT_AS) a little above what it uses now, so that running
out of memory stays inside the test (the machine's memory is never at stake)."""

import resource

import torch


def cap_address_space(extra_mib: int) -> int:
    """Allow `extra_mib` MiB of address space beyond the current size; return the limit."""
    torch.set_num_threads(1)  # new threads reserve address space (stacks, malloc arenas)
    with open("/proc/self/status") as status:
        vm_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = vm_kib * 1024 + extra_mib * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit
