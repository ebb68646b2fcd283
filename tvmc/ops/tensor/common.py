"""What the tensor ops share: index dtypes, pad modes, index clamping, CPU vector loops."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, IntImm, Stmt, const, loop, maximum, minimum, select, seq
from tvmc.ops.lowering import LowerContext
from tvmc.ops.schedule.gpu_launch import grid_loop
from tvmc.ops.schedule.reduction import parallel_kind

MANY = (1, 1 << 16)  # the input count of the variadic ops (Concat)
INDEX_DTYPES = ("int32", "int64")
PAD_MODES = ("constant", "reflect", "edge", "wrap")
ZERO = IntImm(0, "int32")


def clamp(i: Expr, lo: int, hi: int) -> Expr:
    """`i` limited to [lo, hi] (bounds known at compile time)."""
    return minimum(maximum(i, const(lo, i.dtype)), const(hi, i.dtype))


def data_index(i: Expr, dim: int) -> Expr:
    """An index read from data as an int32 position in [0, dim): negative counts from the end,
    and out-of-range values (undefined in ONNX) are clamped, so no kernel reads out of bounds."""
    i = select(i < const(0, i.dtype), i + const(dim, i.dtype), i)
    return clamp(i, 0, max(dim - 1, 0)).astype("int32")  # after clamping it fits the int32 index


def vector_loop(extent: int, lanes: int, body: Callable[[Expr], Stmt]) -> Stmt:
    """`body(i)` for i in [0, extent): vectors of `lanes` (a vectorized loop), then a scalar
    tail; short extents stay one scalar loop."""
    if extent < 2 * lanes:
        return loop("i", extent, body)
    full = extent // lanes
    main = loop("io", full, lambda io: loop(
        "ii", lanes, lambda ii: body(io * lanes + ii), kind="vectorized"))  # fmt: skip
    tail = extent - full * lanes
    return seq(main, loop("it", tail, lambda it: body(it + full * lanes)) if tail else None)


def at(buffer: Buffer, idx: Sequence[Expr]) -> tuple[Expr, ...]:
    """Store indices of `buffer` for tensor indices `idx` (a scalar lives in a (1,) buffer)."""
    return tuple(idx) if len(idx) == buffer.ndim else (ZERO,)


def check_index_dtype(op: str, what: str, t: TensorType) -> None:
    """ValueError unless `t` holds int32 or int64 indices."""
    if t.dtype not in INDEX_DTYPES:
        raise ValueError(f"{op} {what} must be int32 or int64, got {t.dtype}")


def wrapped(op: str, indices: np.ndarray, dim: int) -> np.ndarray:
    """Indices with negative ones counted from the end (references); IndexError names any
    outside [-dim, dim)."""
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        raise IndexError(f"{op} index out of range [{-dim}, {dim - 1}]")
    return np.where(indices < 0, indices + dim, indices).astype(np.int64)


Body = Callable[[Expr], Stmt]


def cpu_rows(ctx: LowerContext, count: int, work: int, body: Body) -> Stmt:
    """`body(row)` for every row, split over threads when `work` (element visits) pays."""
    return loop("row", count, body, kind=parallel_kind(ctx, work, count))


def gpu_rows(ctx: LowerContext, count: int, work: int, body: Body) -> Stmt:
    """`body(row)` for every row, one thread each."""
    return grid_loop(count, body)


# Target kind -> how the templates that process independent rows sequentially run them.
ROWS: dict[str, Callable[[LowerContext, int, int, Body], Stmt]] = {
    "cpu": cpu_rows,
    "cuda": gpu_rows,
}
