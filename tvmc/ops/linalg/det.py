"""Det: the determinant of each square matrix in a batch (*, M, M), by Gaussian elimination with
partial pivoting (LU, as onnxruntime's Eigen does), one template on both targets.

Each matrix is a row (a CPU loop iteration, a GPU thread) that eliminates a copy of itself in the
workspace, in float64: the product of the pivots, its sign flipped per row exchange.
"""

from __future__ import annotations

import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import (
    Buffer,
    Expr,
    Kernel,
    Stmt,
    allocate,
    const,
    fabs,
    if_then_else,
    let,
    loop,
    nest,
    seq,
)
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TensorRef
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import unflatten
from tvmc.ops.tensor.common import ROWS

WORK = "float64"


def det_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"Det needs float square matrices (..., M, M), got {x}")
    return [TensorType(x.shape[:-2], x.dtype)]


def det(attrs, x):
    """The determinant of every matrix in the batch (LU in float64)."""
    return np.linalg.det(x.astype(np.float64)).astype(x.dtype)


def _column(lu: Buffer, at, m: int, k: Expr, acc: Buffer, pivot: Buffer) -> Stmt:
    """Elimination step k: the largest |a[i, k]| (i >= k) becomes the pivot, its row swapped
    with row k (the sign flips), the determinant multiplied by it, the rows below cleared."""

    def search(t: Expr) -> Stmt:
        i = t + k + 1
        return if_then_else(fabs(lu[at(i, k)]) > fabs(lu[at(pivot[0], k)]), pivot.store(0, i))

    def swap(j: Expr) -> Stmt:
        p = pivot[0]
        return let("v", lu[at(k, j)], lambda v: seq(
            lu.store(at(k, j), lu[at(p, j)]), lu.store(at(p, j), v)))  # fmt: skip

    def clear(p: Expr, t: Expr) -> Stmt:
        i = t + k + 1

        def update(f: Expr) -> Stmt:
            def one(u: Expr) -> Stmt:
                j = u + k + 1
                return lu.store(at(i, j), lu[at(i, j)] - f * lu[at(k, j)])

            return loop("u", m - 1 - k, one)

        return let("f", lu[at(i, k)] / p, update)

    def eliminate(p: Expr) -> Stmt:
        below = loop("t", m - 1 - k, lambda t: clear(p, t))
        return seq(acc.store(0, acc[0] * p), if_then_else(p.ne(const(0, WORK)), below))

    exchange = if_then_else(pivot[0].ne(k), seq(loop("j", m, swap), acc.store(0, -acc[0])))
    return seq(pivot.store(0, k), loop("t", m - 1 - k, search), exchange,
               let("p", lu[at(k, k)], eliminate))  # fmt: skip


def det_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per matrix: a float64 copy in the workspace, then `_column` for every column."""
    (x,), (out,) = inputs, outputs
    m, batch = x.shape[-1], x.shape[:-2]
    count = math.prod(batch)
    lu = ctx.temp((count, m * m), WORK, "lu")

    def matrix(flat: Expr) -> Stmt:
        lead = unflatten(flat, batch) if batch else ()

        def at(i: Expr, j: Expr) -> tuple[Expr, Expr]:
            return (flat, i * m + j)

        def steps(acc: Buffer, pivot: Buffer) -> Stmt:
            columns = loop("k", m, lambda k: _column(lu, at, m, k, acc, pivot))
            result = out.store(lead if batch else (const(0),), acc[0].astype(out.dtype))
            return seq(acc.store(0, const(1, WORK)), columns, result)

        def load(i: Expr, j: Expr) -> Stmt:
            return lu.store(at(i, j), x.read((*lead, i, j)).astype(WORK))

        copy = nest([("i", m), ("j", m)], load)
        scalars = allocate("det", (1,), lambda acc: allocate(
            "pivot", (1,), lambda pivot: steps(acc, pivot), "int32"), WORK)  # fmt: skip
        return seq(copy, scalars)

    body = ROWS[ctx.target.kind](ctx, count, count * m * m * m, matrix)
    return [make_kernel(ctx.name("det"), body)]
