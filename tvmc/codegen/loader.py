"""Loading compiled CPU code into this process: a linked .so (ctypes) or raw object bytes (MCJIT).

Both give the same `LoadedModule`: ctypes functions taking one `c_void_p` per buffer, and the
code's layout digest (`__tvmc_layout`, read before anything is called; None when the code has
none). The module keeps the library or JIT engine alive; drop the functions before the module.
A .so loads with ctypes alone; LLVM (llvmlite) is imported only to JIT an object.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tvmc.codegen import pool, threads
from tvmc.codegen.abi import (
    IMAGE_SLOTS_SYMBOL,
    LAYOUT_BYTES,
    LAYOUT_SYMBOL,
    NUM_THREADS_SYMBOL,
    SCRATCH_FAILED_SYMBOL,
    KernelSignature,
)
from tvmc.codegen.elf import ObjectError, check_object, host_machine
from tvmc.dtypes import numpy_dtype

if TYPE_CHECKING:
    from tvmc.codegen.llvm_cpu import CPUArtifact


class LoadedModule:
    """Callable kernels of one compiled module, plus its thread-count knob."""

    def __init__(
        self,
        kernels: Sequence[KernelSignature],
        address_of: dict[str, int],
        threads_address: int | None,
        keepalive: object,
        layout_address: int | None = None,
        scratch_failed_address: int | None = None,
        image_slots_address: int | None = None,
    ) -> None:
        self.signatures = {k.name: k for k in kernels}
        # copied out now: the digest the code was compiled for, before any of it runs
        self.layout = ctypes.string_at(layout_address, LAYOUT_BYTES) if layout_address else None
        self._keepalive = keepalive  # the CDLL or JIT engine that owns the code
        self.functions = {
            k.name: ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(k.params)))(address_of[k.name])
            for k in kernels
        }
        self._threads = ctypes.c_int32.from_address(threads_address) if threads_address else None
        self._scratch_failed = (
            ctypes.c_int32.from_address(scratch_failed_address) if scratch_failed_address else None
        )  # code compiled before the flag existed has none
        self._image_slots = (
            ctypes.c_int32.from_address(image_slots_address) if image_slots_address else None
        )  # a per-image entry's (from code compiled before it: none, its slots fixed)
        self._image_slots_set = False
        self.max_threads = 1  # the thread count set for this module (set_num_threads)
        threads.register(self)

    def __getitem__(self, name: str) -> ctypes._CFuncPtr:
        return self.functions[name]

    def write_num_threads(self, n: int) -> None:
        """Sets the thread count this module's parallel loops ask the pool for."""
        self.max_threads = n
        self.use_threads(n)

    @property
    def has_parallel_loops(self) -> bool:
        return self._threads is not None

    def scratch_failed(self) -> bool:
        """Whether a kernel found no memory for its heap scratch since the last ask (it skipped
        that work, so the outputs are not valid); asking clears it."""
        flag = self._scratch_failed
        if flag is None or not flag.value:
            return False
        flag.value = 0
        return True

    def hold_image_slots(self, wanted: int) -> int | None:
        """The image workspaces a per-image entry finds in its workspace: `wanted`, set by the
        module's first executor (later ones allocate as many); None where the code fixes its
        own (mod.json's `slots`)."""
        if self._image_slots is None:
            return None
        if not self._image_slots_set:
            self._image_slots.value = wanted
            self._image_slots_set = True
        return self._image_slots.value

    def use_threads(self, n: int) -> None:
        """Runs the next calls on `n` threads without changing the count set (an executor's
        choice for one run: tvmc/runtime/thread_choice.py)."""
        if self._threads is not None and self._threads.value != n:
            self._threads.value = n

    def run(self, name: str, *arrays: np.ndarray) -> None:
        """Calls kernel `name` on numpy arrays after checking shapes, dtypes and contiguity."""
        sig = self.signatures[name]
        if len(arrays) != len(sig.params):
            raise ValueError(f"kernel {name} takes {len(sig.params)} arrays, got {len(arrays)}")
        for (pname, shape, dtype), a in zip(sig.params, arrays):
            if a.shape != shape or a.dtype != numpy_dtype(dtype) or not a.flags.c_contiguous:
                raise ValueError(
                    f"kernel {name}: {pname} wants a C-contiguous {dtype}{list(shape)}, "
                    f"got {a.dtype}{list(a.shape)}"
                )
        self.functions[name](*(ctypes.c_void_p(a.ctypes.data) for a in arrays))


def link_shared(
    object_code: bytes, path: str, cc: str | None = None, options: Sequence[str] = ()
) -> None:
    """Links object bytes into a shared library at `path`: with `cc` (a cross compiler for the
    code's target) and `options`, else the system C compiler. tvmc_parallel_for stays undefined:
    it resolves against the thread pool tvmc loads at run time, on whichever machine runs it."""
    compiler = shutil.which(cc) if cc else shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError(f"no C compiler {cc or 'cc'} to link with" + ("" if cc else
                           "; use load_jit instead"))  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tvmc-link-") as tmp:
        obj = os.path.join(tmp, "mod.o")
        with open(obj, "wb") as f:
            f.write(object_code)
        cmd = [compiler, "-shared", "-o", path, obj, *options, "-lm"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"linking failed ({' '.join(cmd)}):\n{done.stderr.strip()}")


def load_library(path: str, kernels: Sequence[KernelSignature]) -> LoadedModule:
    """Loads a shared library built by link_shared."""
    pool.load_pool()  # first: the library's tvmc_parallel_for resolves against it
    lib = ctypes.CDLL(os.path.abspath(path))
    addresses = {k.name: ctypes.cast(getattr(lib, k.name), ctypes.c_void_p).value for k in kernels}
    try:
        nthreads = ctypes.addressof(ctypes.c_int32.in_dll(lib, NUM_THREADS_SYMBOL))
    except ValueError:
        nthreads = None
    try:
        layout = ctypes.addressof((ctypes.c_char * LAYOUT_BYTES).in_dll(lib, LAYOUT_SYMBOL))
    except ValueError:
        layout = None
    try:
        failed = ctypes.addressof(ctypes.c_int32.in_dll(lib, SCRATCH_FAILED_SYMBOL))
    except ValueError:
        failed = None
    try:
        slots = ctypes.addressof(ctypes.c_int32.in_dll(lib, IMAGE_SLOTS_SYMBOL))
    except ValueError:
        slots = None
    return LoadedModule(kernels, addresses, nthreads, lib, layout, failed,  # type: ignore[arg-type]
                        slots)  # fmt: skip


def load_shared(artifact: CPUArtifact) -> LoadedModule:
    """Links the artifact's object into a temporary .so and loads it with ctypes."""
    _check_native(artifact)
    with tempfile.TemporaryDirectory(prefix="tvmc-so-") as tmp:
        path = os.path.join(tmp, "mod.so")
        link_shared(artifact.object_code, path)
        return load_library(path, artifact.kernels)  # dlopen keeps the mapping after unlink


def load_object(
    object_code: bytes, kernels: Sequence[KernelSignature], probe: bool = False
) -> LoadedModule:  # fmt: skip
    """Loads object bytes without a linker, into a fresh MCJIT engine. LLVM's JIT trusts what
    it reads and aborts or segfaults on a damaged object, so first: where this host's objects
    are ELF, bytes that are not a well-formed object for it raise ObjectError (a RuntimeError;
    `tvmc.codegen.elf`); with `probe` (code from outside), the object is loaded once in a
    forked child (`_probe`), and a child the loader kills raises ObjectError."""
    machine = host_machine()
    if machine is not None:
        check_object(object_code, machine)
    if probe:
        _probe(object_code)
    engine = _engine(object_code)
    addresses = {k.name: engine.get_function_address(k.name) for k in kernels}
    missing = [n for n, a in addresses.items() if not a]
    if missing:
        raise RuntimeError(f"kernels missing from the object: {missing}")
    nthreads = engine.get_global_value_address(NUM_THREADS_SYMBOL) or None
    layout = engine.get_global_value_address(LAYOUT_SYMBOL) or None
    failed = engine.get_global_value_address(SCRATCH_FAILED_SYMBOL) or None
    slots = engine.get_global_value_address(IMAGE_SLOTS_SYMBOL) or None
    return LoadedModule(kernels, addresses, nthreads, engine, layout, failed, slots)


def _engine(object_code: bytes):  # -> llvmlite's ExecutionEngine, the object added and resolved
    import llvmlite.binding as llvm  # here only: a mod.so loads without libLLVM

    from tvmc.codegen.target import init_llvm

    init_llvm()
    pool.load_pool_for_jit()  # its symbols must resolve from the process
    tm = llvm.Target.from_default_triple().create_target_machine(jit=True)
    owner = llvm.parse_assembly("")
    owner.triple = tm.triple
    engine = llvm.create_mcjit_compiler(owner, tm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
    engine.finalize_object()
    return engine


PROBE_RAISED, PROBE_FAILED = 3, 4  # a probe child's exit: a Python exception, anything else


def _probe(object_code: bytes) -> None:
    """Loads the object in a forked child, its stderr (LLVM's messages) discarded: after the
    structure's check LLVM still trusts what it reads (a relocation whose target lands out of
    range, a symbol that resolves nowhere). A child that raised passes: the load here raises
    the same. Without fork (not POSIX), nothing."""
    if not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:  # the child: nothing but the load, then out without Python's cleanup
        status = PROBE_FAILED
        try:
            faulthandler.disable()  # its dump of the crash would go to the parent's stderr
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            _engine(object_code)
            status = 0
        except Exception:
            status = PROBE_RAISED
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        raise ObjectError(f"LLVM's loader died on it (signal {os.WTERMSIG(status)})")
    if os.WEXITSTATUS(status) not in (0, PROBE_RAISED):  # LLVM's fatal errors may exit(1)
        raise ObjectError(f"LLVM's loader died on it (exit status {os.WEXITSTATUS(status)})")


def load_jit(artifact: CPUArtifact) -> LoadedModule:
    """Loads the artifact's object bytes in-process with MCJIT (no linker needed)."""
    _check_native(artifact)
    return load_object(artifact.object_code, artifact.kernels)


def _check_native(artifact: CPUArtifact) -> None:
    if not artifact.target.is_native:
        raise RuntimeError(f"cannot run code for {artifact.target.triple} on this machine")
