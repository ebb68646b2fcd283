"""Reference interpreter: runs a Kernel on numpy arrays (a test oracle for small shapes).

The kernel is translated once into Python source (see `python_source`) and executed. Semantics:
every loop kind runs serially, except GPU thread loops that contain a Barrier, which run their
threads in lockstep between barriers (each thread is a Python generator that yields at a
barrier). A WarpShuffle meets the same way: every thread posts its value, all yield, each reads
its partner's post, all yield again. Shared scratch is race-checked: a thread that reads or
writes a shared element another thread wrote (or writes one another thread read) since the
last barrier is an error, as it would be a race on a GPU whatever order this interpreter ran
them in. Every load and store is bounds-checked; scratch buffers
start as NaN (floats) or a sentinel (integers) so reading before writing shows up in results.
Intrinsics are computed in float64 and rounded once, so the interpreter is at least as accurate
as any backend.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tvmc.dtypes import FLOATS, numpy_dtype
from tvmc.kernel.expr import CIRCULAR, KernelIRError
from tvmc.kernel.interpret_emit import PythonEmitter
from tvmc.kernel.legalize import legalize
from tvmc.kernel.stmt import Kernel
from tvmc.kernel.validate import validate

_CACHE: weakref.WeakKeyDictionary[Kernel, Callable[..., None]] = weakref.WeakKeyDictionary()


def interpret(kernel: Kernel, *arrays: np.ndarray) -> None:
    """Runs `kernel` on `arrays` (one per param, C-contiguous, right shape and dtype) in place."""
    if len(arrays) != len(kernel.params):
        raise KernelIRError(f"kernel {kernel.name} takes {len(kernel.params)} arrays")
    for buf, arr in zip(kernel.params, arrays):
        want = (buf.shape, numpy_dtype(buf.dtype))
        if (arr.shape, arr.dtype) != want or not arr.flags.c_contiguous:
            raise KernelIRError(
                f"kernel {kernel.name}: param {buf.name} wants a C-contiguous {buf.dtype}"
                f"{list(buf.shape)}, got {arr.dtype}{list(arr.shape)}"
            )
    fn = _CACHE.get(kernel)
    if fn is None:
        fn = _CACHE[kernel] = _compile(kernel)
    with np.errstate(all="ignore"):  # inf/nan arithmetic is legitimate kernel behaviour
        fn(*arrays)


def python_source(kernel: Kernel) -> str:
    """The Python function the interpreter runs for `kernel` (for debugging templates)."""
    return PythonEmitter(_legal(kernel)).source()


def _compile(kernel: Kernel) -> Callable[..., None]:
    emitter = PythonEmitter(_legal(kernel))
    code = compile(emitter.source(), f"<kernel {kernel.name}>", "exec")
    namespace: dict[str, Any] = {**_RUNTIME, **emitter.constants}
    exec(code, namespace)
    SHARED_SITES[kernel] = emitter.sites
    return namespace[emitter.function_name]


def _legal(kernel: Kernel) -> Kernel:
    """`kernel` validated, its narrow types legalized (and validated again if that changed it)."""
    legal = legalize(validate(kernel))
    return legal if legal is kernel else validate(legal)


# per compiled kernel, its shared-memory access sites ("a_tile load 2", ...), by site number
SHARED_SITES: weakref.WeakKeyDictionary[Kernel, list[str]] = weakref.WeakKeyDictionary()


# ---- runtime helpers the generated source calls --------------------------------------------------
def _check(buf: np.ndarray, name: str, idx: tuple[Any, ...]) -> Any:
    """The row-major element number of `idx` in `buf`: every axis in range, except that the
    last may run on into the rows after it (compiled code reads a flat offset through the last
    axis so, e.g. a pointwise conv's plane read as one row) while the whole stays in `buf`."""
    flat: Any = 0
    for axis, (i, dim) in enumerate(zip(idx, buf.shape)):
        lo, hi = (np.min(i), np.max(i)) if isinstance(i, np.ndarray) else (i, i)
        through = axis == len(idx) - 1 and axis > 0  # a flat offset may run on into next rows
        if lo < 0 or (hi >= dim and not through):
            raise IndexError(f"{name}: index {i!r} out of bounds [0, {dim}) on axis {axis}")
        flat = flat * dim + i
    if (np.max(flat) if isinstance(flat, np.ndarray) else flat) >= buf.size:
        raise IndexError(f"{name}: index {idx!r} out of bounds: past its {buf.size} elements")
    return flat


def _ld(buf: np.ndarray, name: str, idx: tuple[Any, ...]) -> Any:
    v = buf.reshape(-1)[_check(buf, name, idx)]
    if buf.dtype.kind in "iu":
        return int(v)
    return bool(v) if buf.dtype.kind == "b" else v


def _vld(buf: np.ndarray, name: str, idx: tuple[Any, ...], lanes: int) -> np.ndarray:
    idx = tuple(np.broadcast_to(np.asarray(i, np.int64), (lanes,)) for i in idx)
    v = buf.reshape(-1)[_check(buf, name, idx)]
    return v.astype(np.int64) if buf.dtype.kind in "iu" else v


def _st(buf: np.ndarray, name: str, idx: tuple[Any, ...], value: Any) -> None:
    buf.reshape(-1)[_check(buf, name, idx)] = value


def _vst(buf: np.ndarray, name: str, idx: tuple[Any, ...], value: Any, lanes: int) -> None:
    idx = tuple(np.broadcast_to(np.asarray(i, np.int64), (lanes,)) for i in idx)
    flat, out = _check(buf, name, idx), buf.reshape(-1)
    value = np.broadcast_to(value, (lanes,))
    for k in range(lanes):  # lane order, so overlapping lanes behave like the serial loop
        out[flat[k]] = value[k]


def _alloc(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    dt = numpy_dtype(dtype)
    if dt.kind in "iu":
        fill: Any = np.iinfo(dt).max // 3
    else:  # floats (narrow ones too: float4 has no NaN, numpy gives it a zero), bool, int4...
        fill = True if dt.kind == "b" else np.nan if dtype in FLOATS else 1
    return np.full(shape, fill, dt)


# ---- shared-memory race checking -----------------------------------------------------------------
# Between two barriers a GPU's threads run in any order, so a shared element one thread writes and
# another reads or writes in the same phase is a race, whatever this interpreter's order shows.
_BARRIER = "barrier"  # what a thread yields at a Barrier (a warp shuffle's meetings yield None)
_NOW = [0, 0]  # [the block's barrier phase, the thread running now]


class _Shared(np.ndarray):
    """A shared scratch array that remembers, per element, who last wrote and read it when."""

    writer: np.ndarray  # [phase, thread] of the last write
    reader: np.ndarray  # [phase, thread, 1 if several threads read] of this phase's reads


def _shared_alloc(shape: tuple[int, ...], dtype: str) -> _Shared:
    array = _alloc(shape, dtype).view(_Shared)
    array.writer = np.full((array.size, 2), -1, np.int64)
    array.reader = np.full((array.size, 3), -1, np.int64)
    return array


def _race(buf: _Shared, name: str, flat: Any, write: bool) -> None:
    """`flat`: the accessed element numbers (`_check`'s)."""
    phase, me = _NOW
    for f in np.unique(np.atleast_1d(flat)):
        w, r = buf.writer[f], buf.reader[f]
        other_write = w[0] == phase and w[1] != me
        other_read = write and r[0] == phase and (r[1] != me or r[2] == 1)
        if other_write or other_read:
            what = "writes" if write else "reads"
            other = f"thread {w[1]} wrote" if other_write else "another thread read"
            raise KernelIRError(
                f"shared-memory race on {name} (element {int(f)}): thread {me} {what} what "
                f"{other} since the last barrier"
            )
        if write:
            buf.writer[f] = (phase, me)
        elif r[0] != phase:
            buf.reader[f] = (phase, me, 0)
        elif r[1] != me:
            r[2] = 1


# what watches shared accesses (tvmc.kernel.bank_conflicts), else None
ACCESS_HOOK: list[Callable[[_Shared, tuple[Any, ...], int], None] | None] = [None]


def _shared_access(buf: _Shared, name: str, idx: tuple[Any, ...], write: bool, site: int) -> None:
    _race(buf, name, _check(buf, name, idx), write)
    hook = ACCESS_HOOK[0]
    if hook is not None:
        hook(buf, idx, site)


def _sld(buf: _Shared, name: str, idx: tuple[Any, ...], site: int) -> Any:
    _shared_access(buf, name, idx, False, site)
    return _ld(buf.view(np.ndarray), name, idx)


def _svld(buf: _Shared, name: str, idx: tuple[Any, ...], lanes: int, site: int) -> np.ndarray:
    idx = tuple(np.broadcast_to(np.asarray(i, np.int64), (lanes,)) for i in idx)
    _shared_access(buf, name, idx, False, site)
    return _vld(buf.view(np.ndarray), name, idx, lanes)


def _sst(buf: _Shared, name: str, idx: tuple[Any, ...], value: Any, site: int) -> None:
    _shared_access(buf, name, idx, True, site)
    _st(buf.view(np.ndarray), name, idx, value)


def _svst(buf: _Shared, name: str, idx: tuple[Any, ...], value: Any, lanes: int, site: int) -> None:
    idx = tuple(np.broadcast_to(np.asarray(i, np.int64), (lanes,)) for i in idx)
    _shared_access(buf, name, idx, True, site)
    _vst(buf.view(np.ndarray), name, idx, value, lanes)


def _tdiv(a: Any, b: Any) -> Any:
    q = np.abs(a) // np.abs(b)
    return q * np.sign(a) * np.sign(b) if isinstance(q, np.ndarray) else int(q * _sign(a * b))


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _sel(c: Any, t: Any, f: Any) -> Any:
    return t if c else f


def _icast(x: Any, dtype: str, lanes: int) -> Any:
    wrapped = np.asarray(x).astype(np.int64).astype(dtype).astype(np.int64)
    return wrapped if lanes > 1 else int(wrapped)


def _reinterpret(x: Any, src: str, dst: str, lanes: int) -> Any:
    s, d = numpy_dtype(src), numpy_dtype(dst)
    # native integers are Python ints or int64 vectors: wrapped to their width first
    raw = np.asarray(x).astype(np.int64).astype(s) if s.kind in "iu" else np.asarray(x, s)
    out = raw.view(d)
    if d.kind in "iu":
        return out.astype(np.int64) if lanes > 1 else int(out)
    return out if lanes > 1 else out[()]


def _shift(a: Any, n: Any, dtype: str, lanes: int, left: bool) -> Any:
    """a << n or a >> n in `dtype` (integers held as int64); amounts outside [0, bits) shift
    every bit out, leaving the sign fill of a right shift."""
    x = np.asarray(_wrap(a, dtype, lanes)).astype(dtype)
    bits = x.dtype.itemsize * 8
    k = np.asarray(n).astype(np.int64) if lanes > 1 else np.int64(_wrap(n, "int64", 1))
    inside = (k >= 0) & (k < bits)
    amount = np.where(inside, k, 0).astype(dtype)
    if left:
        out = np.where(inside, np.left_shift(x, amount), x.dtype.type(0))
    else:
        fill = np.right_shift(x, bits - 1) if x.dtype.kind == "i" else np.zeros_like(x)
        out = np.where(inside, np.right_shift(x, amount), fill)
    return _wrap(out, dtype, lanes)


def _wrap(x: Any, dtype: str, lanes: int) -> Any:
    """Integer bits wrapped to `dtype`: an int64 vector, or a scalar's value as a Python int
    (so a uint64 scalar stays non-negative, as loads give it)."""
    if lanes > 1:
        return np.asarray(x).astype(np.int64).astype(dtype).astype(np.int64)
    bits = numpy_dtype(dtype).itemsize * 8
    value = int(x) & ((1 << bits) - 1)
    signed = numpy_dtype(dtype).kind == "i"
    return value - (1 << bits) if signed and value >> (bits - 1) else value


def _f64(fn: Callable[..., Any], dtype: str, *args: Any) -> Any:
    result = np.asarray(fn(*(np.asarray(a, np.float64) for a in args)))
    return result.astype(dtype) if result.ndim else numpy_dtype(dtype).type(result)


_erf = np.frompyfunc(math.erf, 1, 1)

_MATH: dict[str, Callable[..., Any]] = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "tanh": np.tanh,
    "erf": lambda x: np.asarray(_erf(x), dtype=np.float64),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "sqrt": np.sqrt,
    **{name: getattr(np, "arc" + name[1:] if name[0] == "a" else name) for name in CIRCULAR},
    "fabs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    "round_even": np.rint,
    "pow": np.power,
    "fma": lambda a, b, c: a * b + c,  # exact product in float64, then one rounding to float32
}


def _reduce(kind: str, x: np.ndarray, dtype: str) -> Any:
    if kind == "add":
        total = np.sum(x, dtype=np.float64 if x.dtype.kind == "f" else np.int64)
    else:
        total = np.max(x) if kind == "max" else np.min(x)
    return numpy_dtype(dtype).type(total) if x.dtype.kind == "f" else int(total)


def _lockstep(threads: list[Iterator[str | None]]) -> Iterator[str | None]:
    """Advances every thread to its next barrier, yields once per barrier, until all finish;
    a barrier all threads reached starts a new phase for the race check."""
    while True:
        finished, met = 0, None
        for i, t in enumerate(threads):
            _NOW[1] = i
            try:
                met = next(t)
            except StopIteration:
                finished += 1
        if finished == len(threads):
            return
        if finished:
            raise KernelIRError("barrier divergence: some threads finished, others wait at one")
        if met == _BARRIER:
            _NOW[0] += 1
        yield met


def _drain(gen: Iterator[None]) -> None:
    for _ in gen:
        pass


_RUNTIME: dict[str, Any] = {
    "np": np,
    "_ld": _ld,
    "_vld": _vld,
    "_st": _st,
    "_vst": _vst,
    "_alloc": _alloc,
    "_shared_alloc": _shared_alloc,
    "_sld": _sld,
    "_svld": _svld,
    "_sst": _sst,
    "_svst": _svst,
    "_BARRIER": _BARRIER,
    "_NOW": _NOW,
    "_tdiv": _tdiv,
    "_sel": _sel,
    "_icast": _icast,
    "_reinterpret": _reinterpret,
    "_shift": _shift,
    "_wrap": _wrap,
    "_f64": _f64,
    "_MATH": _MATH,
    "_reduce": _reduce,
    "_lockstep": _lockstep,
    "_drain": _drain,
}
