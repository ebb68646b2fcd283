"""The thread pool generated code runs on: libgomp, found and loaded into this process.

Parallel loops call `GOMP_parallel` directly, so no Python runs on the hot path. libgomp reads
OMP_WAIT_POLICY when it loads, so it is set to PASSIVE first (idle workers sleep instead of
spinning on the other cores), unless the user set it. The thread count is one setting:
`set_num_threads(n)`, else $TVMC_NUM_THREADS, else the number of physical cores we may use.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import subprocess
import warnings
import weakref
from typing import Protocol

import llvmlite.binding as llvm

from tvmc.config import NUM_THREADS_ENV, env_int

_num_threads: int | None = None


class ThreadCountSink(Protocol):
    """Something holding a copy of the thread count (a loaded module's global)."""

    def write_num_threads(self, n: int) -> None: ...


_SINKS: weakref.WeakSet[ThreadCountSink] = weakref.WeakSet()


@functools.cache
def find_libgomp() -> str | None:
    """Path (or soname) of libgomp, or None when this machine has none."""
    name = ctypes.util.find_library("gomp")
    if name:
        return name
    for cc in ("cc", "gcc"):
        try:
            out = subprocess.run(
                [cc, "-print-file-name=libgomp.so"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if os.path.isabs(out) and os.path.exists(out):
            return out
    return None


@functools.cache
def load_libgomp() -> bool:
    """Loads libgomp globally (for ctypes-loaded .so files and MCJIT alike); False if absent."""
    path = find_libgomp()
    if path is None:
        warnings.warn("libgomp not found: parallel loops will run serially", stacklevel=2)
        return False
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        llvm.load_library_permanently(path)
    except OSError as err:
        warnings.warn(f"libgomp failed to load ({err}): parallel loops run serially", stacklevel=2)
        return False
    return True


@functools.cache
def physical_cores() -> int:
    """Distinct physical cores among the CPUs this process may run on."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cores: set[tuple[str, str]] = set()
    try:
        with open("/proc/cpuinfo") as f:
            blocks = f.read().strip().split("\n\n")
    except OSError:
        blocks = []
    for block in blocks:
        info = dict(
            (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in block.splitlines())
        )
        cpu = info.get("processor")
        if cpu is None or (allowed is not None and int(cpu) not in allowed):
            continue
        cores.add((info.get("physical id", "0"), info.get("core id", cpu)))
    return len(cores) or (len(allowed) if allowed else os.cpu_count() or 1)


def num_threads() -> int:
    """Threads for parallel loops: set_num_threads(), else $TVMC_NUM_THREADS, else cores."""
    if _num_threads is not None:
        return _num_threads
    n = env_int(NUM_THREADS_ENV)
    return n if n and n > 0 else physical_cores()


def set_num_threads(n: int | None) -> None:
    """Sets the thread count for every loaded and future module (None: back to the default)."""
    global _num_threads
    if n is not None and n < 1:
        raise ValueError(f"thread count must be positive, got {n}")
    _num_threads = n
    for sink in list(_SINKS):
        sink.write_num_threads(num_threads())


def register(sink: ThreadCountSink) -> None:
    """Keeps `sink` updated by set_num_threads while it lives."""
    _SINKS.add(sink)
    sink.write_num_threads(num_threads())
