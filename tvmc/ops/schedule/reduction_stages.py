"""The stages of a row reduction and the pieces both targets' reduction kernels share.

A `Stage` is one sum/prod/max/min/argmax/argmin pass over the reduced axes that may read the
results of the stages before it; an `Emit` stores one value per output or rewrites every element
of the reduced region. The kernels that run stages: reduction_cpu and reduction_gpu, routed by
target kind in tvmc.ops.schedule.reduction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tvmc.kernel import (
    Buffer,
    Expr,
    Stmt,
    const,
    loop,
    maximum,
    minimum,
)
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef
from tvmc.ops.schedule.injective import PARALLEL_MIN_ELEMENTS

Index = dict[int, Expr]  # input axis -> index expression
Results = tuple[Expr, ...]  # the results of the stages run so far
Term = Callable[[Index, Results], Expr]
Emit = Callable[[Index, Results], Stmt]
Accumulators = list[tuple[Buffer, Buffer | None]]  # per stage: values, argmax positions
ARG_KINDS = ("argmax", "argmin")
REDUCTION_PARALLEL_MIN = 1 << 17  # element visits (elements x passes) worth a parallel loop


@dataclass(frozen=True)
class Stage:
    """One pass over the reduced axes combining `term` of every element with `kind`.

    argmax/argmin track the row-major position of the extreme within the reduced axes (int32),
    and that position is their result. `post` maps the finished value (e.g. sum -> mean) and
    keeps its dtype; `keep` also stores each term in that input-shaped buffer (softmax's exps).
    """

    kind: str  # sum, prod, max, min, argmax, argmin
    dtype: str  # accumulator dtype
    term: Term
    post: Callable[[Expr], Expr] | None = None
    keep: Buffer | None = None
    last: bool = False  # argmax/argmin: the last of equal extremes wins


def identity(kind: str, dtype: str) -> Expr:
    """The value an accumulator of `kind` starts from (+-inf or the integer limits for max/min)."""
    floating = dtype.startswith("float")
    if kind in ("max", "argmax"):
        return const(-math.inf if floating else int(np.iinfo(dtype).min), dtype)
    if kind in ("min", "argmin"):
        return const(math.inf if floating else int(np.iinfo(dtype).max), dtype)
    return const(1 if kind == "prod" else 0, dtype)


def combine(kind: str, a: Expr, b: Expr) -> Expr:
    """Two partial results of a sum/prod/max/min merged."""
    if kind == "sum":
        return a + b
    if kind == "prod":
        return a * b
    return maximum(a, b) if kind == "max" else minimum(a, b)


def combine_all(kind: str, values: list[Expr]) -> Expr:
    """A balanced tree of `combine` over `values` (short dependency chains)."""
    while len(values) > 1:
        pairs = [combine(kind, a, b) for a, b in zip(values[::2], values[1::2])]
        values = pairs + values[len(pairs) * 2 :]
    return values[0]


def flat_position(idx: Index, shape: Sequence[int], axes: Sequence[int]) -> Expr:
    """Row-major position of `idx` within the sub-tensor of `axes` (int32)."""
    pos: Expr = const(0)
    for a in axes:
        pos = pos * shape[a] + idx[a]
    return pos


def accumulator_dtype(dtype: str, float_math: bool = False) -> str:
    """float16 and bfloat16 accumulate in float32, bool as uint8, integers feeding exp/log/sqrt
    in float64."""
    if dtype in ("float16", "bfloat16"):
        return "float32"
    if dtype == "bool":
        return "uint8"
    return "float64" if float_math and not dtype.startswith("float") else dtype


def output_index(idx: Index, ndim: int, axes: Sequence[int], keepdims: bool) -> tuple[Expr, ...]:
    """Indices into the reduced tensor (rank `ndim` with keepdims, else without `axes`)."""
    if keepdims:
        return tuple(const(0) if a in axes else idx[a] for a in range(ndim))
    return tuple(idx[a] for a in range(ndim) if a not in axes)


def storer(
    out: Buffer,
    epilogue: Epilogue | None,
    index: Callable[[Index], tuple[Expr, ...]],
    value: Callable[[Index, Results], Expr],
) -> Emit:
    """An `Emit` storing `value`, cast to the output dtype and through the epilogue, at `index`."""

    def emit(idx: Index, results: Results) -> Stmt:
        where = index(idx)
        v = value(idx, results).astype(out.dtype)
        v = epilogue(where, v) if epilogue is not None else v
        return out.store(where if where else (const(0),), v)  # rank 0 lives in a (1,) buffer

    return emit


def flat_loop(
    name: str, axes: Sequence[int], shape: Sequence[int], body: Callable[[Index], Stmt], kind: str
) -> Stmt:
    """One loop over the product of `axes`, split back into per-axis indices with // and %."""
    if not axes:
        return body({})

    def split(v: Expr) -> Stmt:
        idx: Index = {}
        for a in reversed(axes[1:]):
            idx[a], v = v % shape[a], v // shape[a]
        idx[axes[0]] = v
        return body(idx)

    return loop(name, math.prod(shape[a] for a in axes), split, kind=kind)


def parallel_kind(
    ctx: LowerContext, work: int, iterations: int, threshold: int = PARALLEL_MIN_ELEMENTS
) -> str:
    """`parallel` when `work` (element visits) pays for a fork/join and there are iterations
    to share; the knob `parallel_min_elements` overrides `threshold`."""
    threshold = int(ctx.config.get("parallel_min_elements", threshold))
    return "parallel" if work >= threshold and iterations > 1 else "serial"


def loader(x: TensorRef, dtype: str) -> Callable[[Index, Results], Expr]:
    """A stage term reading `x` at the element index, cast to the accumulator dtype."""
    ndim = x.type.ndim
    return lambda idx, results: x.read(tuple(idx[a] for a in range(ndim))).astype(dtype)
