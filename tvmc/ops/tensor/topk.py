"""TopK: the k largest (or smallest) elements along an axis, sorted, with their indices.

One template on both targets: each row (all positions but the axis) is scanned once in order
while its k output slots hold the best elements so far, sorted; an element better than the
last slot is inserted by shifting the worse ones down (O(n k) per row: k is small in real
models). Only strictly better elements move ahead, so equal values keep their order: the lower
index first, as onnxruntime does; NaN ranks above every number, as there. The slots are the
outputs themselves, so no scratch of size k is needed. Rows run in parallel: over threads on
the CPU, one GPU thread each on CUDA. `sorted=0` leaves the order unspecified in ONNX (and
onnxruntime returns a heap order); the result is sorted all the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import (
    GT,
    LT,
    Buffer,
    Expr,
    Kernel,
    Stmt,
    const,
    if_then_else,
    is_float,
    let,
    loop,
    maximum,
    seq,
)
from tvmc.ops.common import normalize_axis
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, Template, TensorRef
from tvmc.ops.registry import OPAQUE, REQUIRED, OpDef
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import unflatten
from tvmc.ops.tensor.common import ROWS


def _topk_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    if x.ndim == 0 or x.dtype == "bool":
        raise ValueError(f"TopK needs a numeric input of rank >= 1, got {x}")
    axis = normalize_axis(attrs["axis"], x.ndim, "TopK")
    k = int(attrs["k"])
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"TopK k={k} is outside [0, {x.shape[axis]}] (axis {axis} of {x})")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1 :]
    return [TensorType(shape, x.dtype), TensorType(shape, "int64")]


def topk(attrs, x):
    """The k largest (`largest`) or smallest elements along `axis` and their indices, best
    first; of equal values the lower index comes first."""
    axis, k = normalize_axis(attrs["axis"], x.ndim), int(attrs["k"])
    if attrs["largest"]:  # a stable descending order: sort the reversed axis, then reverse
        flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        order = x.shape[axis] - 1 - np.flip(flipped, axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, range(k), axis=axis)
    return np.take_along_axis(x, indices, axis=axis), indices.astype(np.int64)


def topk_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per row, insertion into the k output slots while scanning the row once."""
    (x,) = inputs
    values, indices = outputs
    axis, k = normalize_axis(attrs["axis"], x.type.ndim), int(attrs["k"])
    n = x.shape[axis]
    if k == 0:  # nothing to select: empty outputs
        return []
    others = x.shape[:axis] + x.shape[axis + 1 :]
    beats = _order(bool(attrs["largest"]), x.dtype)

    def row(flat: Expr) -> Stmt:
        coords = unflatten(flat, others)

        def at(i: Expr) -> tuple[Expr, ...]:
            return (*coords[:axis], i, *coords[axis:])

        def element(j: Expr) -> Stmt:
            def insert(v: Expr) -> Stmt:
                def better(s: Expr) -> Expr:  # slots from j on are still empty
                    return (s >= j) | beats(v, values[at(s)])

                def slot(t: Expr) -> Stmt:
                    s = const(k - 1) - t
                    above = maximum(s - 1, 0)
                    move = (s > 0) & better(above)
                    shift = [values.store(at(s), values[at(above)]),
                             indices.store(at(s), indices[at(above)])]  # fmt: skip
                    place = [values.store(at(s), v), indices.store(at(s), j.astype("int64"))]
                    return if_then_else(move, seq(*shift), if_then_else(better(s), seq(*place)))

                return if_then_else(better(const(k - 1)), loop("t", k, slot))

            return let("v", x.read(at(j)), insert)

        return loop("j", n, element)

    count = math.prod(others)
    body = ROWS[ctx.target.kind](ctx, count, x.type.size * max(1, min(k, 8)), row)
    return [make_kernel(ctx.name("topk"), body)]


def _order(largest: bool, dtype: str) -> Callable[[Expr, Expr], Expr]:
    """beats(v, w): v goes strictly before w. NaN ranks above every number, as in onnxruntime
    (first when largest, last when smallest)."""
    if not is_float(dtype):
        return GT if largest else LT
    if largest:
        return lambda v, w: (v > w) | (v.ne(v) & w.eq(w))
    return lambda v, w: (v < w) | (v.eq(v) & w.ne(w))


DEFINITIONS = [
    OpDef("TopK", _topk_rule, topk,
          {"cpu": Template(topk_template), "cuda": Template(topk_template)},
          attrs={"k": REQUIRED, "axis": -1, "largest": 1, "sorted": 1}, kind=OPAQUE),
]  # fmt: skip
