"""The runtime's thread pool (pool.c): built once per machine with the system C compiler, cached,
and loaded into this process so that generated code's `tvmc_parallel_for` calls resolve to it.

Why C and not libgomp: libgomp splits a loop statically and joins on every team thread, so on a
busy machine each parallel loop waits for a descheduled worker (docs/performance.md measures
it). Why C and not LLVM IR: the pool is a few hundred lines of atomics, futexes and pthreads
that a C compiler checks and every fresh machine with tvmc can build (the linker is already
needed). The library is cached under $TVMC_CACHE_DIR (default ~/.cache/tvmc), keyed by a hash
of the source and the compiler, written atomically so concurrent first uses are safe. Without
a C compiler parallel loops run serially (a tiny fallback compiled by LLVM, MCJIT code only).
Loading the pool for shared libraries needs no LLVM (`tvmc run` of a mod.so loads none); JIT code
asks for it with `load_pool_for_jit`.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any

from tvmc.config import CACHE_DIR_ENV, check_pool_environment

PARALLEL_FOR = "tvmc_parallel_for"  # void (void (*)(ptr, i64, i64), ptr, i64 extent, i32 threads)
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pool.c")
FLAGS = ["-O2", "-fPIC", "-shared", "-pthread"]


@dataclass(frozen=True)
class PoolStats:
    """Counters since the process started (tvmc_pool_stats)."""

    loops: int  # parallel loops run on the pool
    caller_chunks: int  # chunks the calling threads ran themselves
    worker_chunks: int  # chunks workers ran
    join_ns: int  # time callers waited at the joins for chunks workers had claimed
    serial_loops: int  # loops run on the calling thread alone (one thread, or pool in use)
    workers: int  # worker threads started
    unspun_waits: int  # waits that slept at once: the awaited thread was on the waiter's CPU


def cache_dir() -> str:
    """Where tvmc keeps what it builds or measures for this machine."""
    return os.environ.get(CACHE_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tvmc")


def _compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build_shared(
    source: str, prefix: str, flags: list[str], extras: tuple[list[str], ...] = ([],)
) -> tuple[str | None, str]:  # fmt: skip
    """C file `source` built into a shared library on first use and cached as
    `<cache_dir>/<prefix>-<hash>.so` (the temporary directory where the cache is unwritable),
    keyed by the source, the compiler and `flags`, written atomically so that concurrent first
    uses are safe; each of `extras` is tried after `flags` in turn until one builds. (path, "")
    once built, (None, "") without a C compiler, (None, the compiler's complaint) on failure."""
    cc = _compiler()
    if cc is None:
        return None, ""
    with open(source, "rb") as f:
        text = f.read()
    version = subprocess.run([cc, "--version"], capture_output=True).stdout
    key = hashlib.sha256(text + version + " ".join(flags).encode()).hexdigest()[:16]
    for root in (cache_dir(), tempfile.gettempdir()):
        path = os.path.join(root, f"{prefix}-{key}.so")
        if os.path.exists(path):
            return path, ""
        try:
            os.makedirs(root, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{prefix}-", suffix=".so", dir=root)
        except OSError:
            continue  # unwritable cache: try the temporary directory
        os.close(fd)
        errors = ""
        for extra in extras:
            done = subprocess.run([cc, *flags, *extra, "-o", tmp, source], capture_output=True,
                                  text=True)  # fmt: skip
            if done.returncode == 0:
                os.replace(tmp, path)  # atomic: a concurrent first use sees all or nothing
                return path, ""
            errors = done.stderr
        os.unlink(tmp)
        return None, errors
    return None, ""


@functools.cache
def library_path() -> str | None:
    """The built pool library (building it on first use, with OpenMP for the libgomp switch
    when the compiler has it), or None without a C compiler."""
    path, error = build_shared(SOURCE, "pool", FLAGS, (["-fopenmp"], []))
    if error:
        warnings.warn(f"the thread pool failed to build: {error}", stacklevel=2)
    return path


@functools.cache
def _library() -> ctypes.CDLL | None:
    check_pool_environment()
    path = library_path()
    if path is None:
        return None
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # generated .so files resolve against it
    lib.tvmc_pool_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    lib.tvmc_pool_set_worker_delay.argtypes = [ctypes.c_int64]
    lib.tvmc_pool_set_min_chunk_us.argtypes = [ctypes.c_int64]
    lib.tvmc_pool_set_spin_beside_awaited.argtypes = [ctypes.c_int32]
    return lib


@functools.cache
def load_pool() -> bool:
    """Makes `tvmc_parallel_for` resolvable by shared libraries loaded in this process (ctypes,
    RTLD_GLOBAL; no LLVM); False: there is no pool, loops of JIT code run serially."""
    if _library() is not None:
        return True
    warnings.warn("no C compiler to build the thread pool: parallel loops run serially",
                  stacklevel=2)  # fmt: skip
    return False


@functools.cache
def load_pool_for_jit() -> None:
    """Makes `tvmc_parallel_for` resolvable by MCJIT code too (LLVM looks it up itself): the
    pool's library, else a serial fallback compiled by LLVM."""
    import llvmlite.binding as llvm  # only JIT code needs it; `tvmc run` of a mod.so does not

    path = library_path() if load_pool() else None
    if path is not None:
        llvm.load_library_permanently(path)
    else:
        _serial_fallback(llvm)


def stats() -> PoolStats:
    """The pool's counters (all zero when the pool is not loaded)."""
    lib = _library()
    out = (ctypes.c_int64 * 7)()
    if lib is not None:
        lib.tvmc_pool_stats(out)
    return PoolStats(*out)


def set_worker_delay(microseconds: int) -> None:
    """Test hook: workers sleep this long before claiming chunks (0: off)."""
    lib = _library()
    if lib is not None:
        lib.tvmc_pool_set_worker_delay(microseconds)


def set_min_chunk_us(microseconds: int = 0) -> None:
    """Test hook: how long a chunk of a loop should last at least for the pool to cut its next
    run finer (0: the pool's own MIN_CHUNK_NS; a large value keeps every loop at 4 chunks a
    thread)."""
    lib = _library()
    if lib is not None:
        lib.tvmc_pool_set_min_chunk_us(microseconds)


def set_spin_beside_awaited(on: bool) -> None:
    """Test hook: True makes a waiting thread spin even where the thread it waits for was last
    seen on its own CPU; False (the default) makes it sleep at once there."""
    lib = _library()
    if lib is not None:
        lib.tvmc_pool_set_spin_beside_awaited(int(on))


def uses_gomp() -> bool:
    """Whether loops run on libgomp ($TVMC_THREAD_POOL=gomp with an OpenMP-built pool)."""
    lib = _library()
    return bool(lib is not None and lib.tvmc_pool_uses_gomp())


_FALLBACK_ENGINE: list[Any] = []  # the serial fallback's ExecutionEngine: keeps its code alive


def _serial_fallback(llvm: Any) -> None:
    """A serial `tvmc_parallel_for`, compiled by LLVM (`llvmlite.binding`) for MCJIT code."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(_SERIAL_IR)
    tm = llvm.Target.from_default_triple().create_target_machine(jit=True)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    llvm.add_symbol(PARALLEL_FOR, engine.get_function_address(PARALLEL_FOR))
    _FALLBACK_ENGINE.append(engine)


_SERIAL_IR = f"""
define void @{PARALLEL_FOR}(ptr %body, ptr %closure, i64 %extent, i32 %threads) {{
  call void %body(ptr %closure, i64 0, i64 %extent)
  ret void
}}
"""
