"""jemalloc/tcmalloc for allocation-heavy CPU training: where one is on this machine, or how to get it.

One place for the advice `torchpace env` and the cpu-threads rule give, so that it names a library
that exists (LD_PRELOAD of a missing file only prints a loader warning and changes nothing).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

# Shared objects worth preloading, best first (tcmalloc_minimal has no heap profiler: less overhead).
_NAMES = ("libjemalloc.so.2", "libjemalloc.so", "libtcmalloc_minimal.so.4", "libtcmalloc.so.4")
# How to install jemalloc per distribution (/etc/os-release ID or ID_LIKE), and where it lands.
_APT = ("sudo apt-get install libjemalloc2", "/usr/lib/{multiarch}/libjemalloc.so.2")
_DNF = ("sudo dnf install jemalloc", "/usr/lib64/libjemalloc.so.2")
_INSTALL = {
    "debian": _APT,
    "ubuntu": _APT,
    "fedora": _DNF,
    "rhel": _DNF,
    "centos": _DNF,
    "amzn": _DNF,
    "suse": ("sudo zypper install libjemalloc2", "/usr/lib64/libjemalloc.so.2"),
    "arch": ("sudo pacman -S jemalloc", "/usr/lib/libjemalloc.so.2"),
    "alpine": ("sudo apk add jemalloc", "/usr/lib/libjemalloc.so.2"),
}
_CONDA = ("conda install -c conda-forge jemalloc", "$CONDA_PREFIX/lib/libjemalloc.so.2")


def _search_dirs() -> list[Path]:
    """Where distributions, conda and Homebrew-on-Linux put shared libraries."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else []
    dirs += ["/usr/lib64", "/usr/lib", "/usr/local/lib", os.path.join(sys.prefix, "lib")]
    if os.environ.get("CONDA_PREFIX"):
        dirs.append(os.path.join(os.environ["CONDA_PREFIX"], "lib"))
    return [Path(d) for d in dict.fromkeys(dirs)]


def malloc_libraries(dirs: list[Path] | None = None) -> tuple[str, ...]:
    """Paths of jemalloc/tcmalloc shared objects on this machine, best first."""
    found: dict[str, str] = {}  # real path -> first path seen
    for name in _NAMES:
        for folder in _search_dirs() if dirs is None else dirs:
            candidate = folder / name
            if candidate.is_file():
                found.setdefault(os.path.realpath(candidate), str(candidate))
    return tuple(found.values())


def _distribution(os_release: str) -> list[str]:
    ids: list[str] = []
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            ids += value.strip().strip('"').split()
    return ids


def install_hint(os_release: str | None = None) -> tuple[str, str]:
    """(the command that installs jemalloc here, the library's path afterwards)."""
    if os_release is None:
        try:
            os_release = Path("/etc/os-release").read_text()
        except OSError:
            os_release = ""
    for dist in _distribution(os_release):
        if dist in _INSTALL:
            command, path = _INSTALL[dist]
            multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
            return command, path.format(multiarch=multiarch)
    return _CONDA


def preload_advice(libraries: tuple[str, ...] | None = None, os_release: str | None = None) -> str:
    """`LD_PRELOAD=<found library> python train.py`, after the line that installs one when none is
    found; "" off Linux."""
    if not sys.platform.startswith("linux"):
        return ""  # macOS and Windows have no LD_PRELOAD; their system allocators differ anyway
    found = malloc_libraries() if libraries is None else libraries
    if found:
        return f"LD_PRELOAD={found[0]} python train.py"
    command, path = install_hint(os_release)
    return f"{command}  # none on this machine yet\nLD_PRELOAD={path} python train.py"
