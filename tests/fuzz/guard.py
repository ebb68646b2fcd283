"""Guard pages for the fuzzer: every buffer the CPU runtime hands to a package's code sits between
two inaccessible pages, so code reading or writing past either end dies of SIGSEGV (a crash the
harness reports) instead of quietly touching a neighbour.

`install()` replaces the runtime's allocator (`aligned_empty`, which makes the workspace, params
and outputs; measure_cpu's too, though tuning measures in worker processes that start without
it) and wraps `bound_inputs` (inputs are copied into guarded buffers). Each buffer ends where its
trailing guard page begins, so an overrun past its last aligned 64-byte block faults at once (the
< 64 bytes after the data are alignment slack the code may touch); an underrun faults once it
leaves the buffer's first page. Inside the workspace, buffers share one allocation: there the
plan checks (every buffer inside its storage) and the layout digest are what rule overlaps out.

`python -m tests.fuzz.guard ARGS` runs `tvmc ARGS` with the guard installed (the harness's spawn
mode); the fork server installs it once before forking.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import runpy
import sys

import numpy as np

PAGE = mmap.PAGESIZE
ALIGN = 64
PROT_NONE = 0  # mmap has PROT_READ and PROT_WRITE, not this
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_mappings: list[mmap.mmap] = []  # kept alive: the arrays point into them


def guarded_empty(shape: tuple[int, ...], dtype: str | np.dtype, align: int = ALIGN) -> np.ndarray:
    """An uninitialised C-contiguous array whose aligned span ends at an inaccessible page and
    starts after one."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = max(count, 1) * dtype.itemsize  # empty: a placeholder, as aligned_empty does
    span = -(-nbytes // align) * align
    pages = math.ceil(span / PAGE)
    mapping = mmap.mmap(-1, (pages + 2) * PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    _mappings.append(mapping)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    for page in (base, base + (pages + 1) * PAGE):
        if _libc.mprotect(page, PAGE, PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), "mprotect of a guard page failed")
    start = (pages + 1) * PAGE - span
    raw = np.frombuffer(mapping, np.uint8, count=nbytes, offset=start)
    return raw.view(dtype)[:count].reshape(shape)


def install() -> None:
    """Make the CPU runtime allocate through `guarded_empty` (inputs copied into it too)."""
    from tvmc.autotune import measure_cpu
    from tvmc.runtime import executor, package

    plain_bound_inputs = executor.bound_inputs

    def guarded_inputs(info, arrays):
        guarded = []
        for array in plain_bound_inputs(info, arrays):
            copy = guarded_empty(array.shape, array.dtype)
            copy[...] = array
            guarded.append(copy)
        return guarded

    executor.aligned_empty = guarded_empty
    package.aligned_empty = guarded_empty
    measure_cpu.aligned_empty = guarded_empty
    executor.bound_inputs = guarded_inputs


def main() -> None:
    install()
    sys.argv = ["tvmc", *sys.argv[1:]]
    runpy.run_module("tvmc", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
