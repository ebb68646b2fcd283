"""How many threads generated code runs on (the pool itself: pool.py), and the worker processes
that compile or measure it (tied to their parent's life).

The thread count is one setting: `set_num_threads(n)`, else $TVMC_NUM_THREADS, else the number
of physical cores we may use; every loaded module's `__tvmc_num_threads` follows it. Code
generation runs in $TVMC_CODEGEN_JOBS processes (default: the physical cores).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import signal
import threading
import time
import weakref
from typing import Protocol

from tvmc.config import CODEGEN_JOBS_ENV, NUM_THREADS_ENV, env_int

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_SECONDS = 0.5  # how often a worker looks for its parent where no signal tells it

_num_threads: int | None = None


class ThreadCountSink(Protocol):
    """Something holding a copy of the thread count (a loaded module's global)."""

    def write_num_threads(self, n: int) -> None: ...


_SINKS: weakref.WeakSet[ThreadCountSink] = weakref.WeakSet()


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


def codegen_jobs() -> int:
    """Processes generating code for one program: $TVMC_CODEGEN_JOBS, else the physical cores."""
    n = env_int(CODEGEN_JOBS_ENV)
    return n if n and n > 0 else physical_cores()


def die_with_parent(parent: int) -> None:
    """In a worker process: exit as soon as process `parent` dies, however it dies (SIGKILL too).

    Linux kills the worker when the thread that started it dies (prctl PR_SET_PDEATHSIG), even
    while it runs generated code; elsewhere, and should the signal be missed, a daemon thread
    sees the parent's pid change (an orphan is adopted by another process) and exits.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError, TypeError):  # not Linux
        pass
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)
    watch = threading.Thread(target=_watch_parent, args=(parent,), name="tvmc-parent", daemon=True)
    watch.start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)


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
