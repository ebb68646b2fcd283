"""Templates for ReduceSum, ReduceMean, ..., ReduceLogSumExp and ArgMax/ArgMin.

Each op is one `reduction_kernel` (tvmc.ops.reduce_schedule): a single stage for most ops, the
max then the sum of shifted exponentials for ReduceLogSumExp (no overflow), an argmax/argmin
stage tracking positions for ArgMax/ArgMin. Integers accumulate in their own dtype (wrapping,
as onnxruntime does), float16 in float32 and bool as uint8; ReduceL2, ReduceLogSum and
ReduceLogSumExp of integers compute in float64, like the references.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tvmc.kernel import Buffer, Expr, Kernel, const, exp, fabs, log, select, sqrt
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef, buffer_shape, template
from tvmc.ops.reduce_schedule import (
    Index,
    Results,
    Stage,
    accumulator_dtype,
    output_index,
    reduction_kernel,
    storer,
)
from tvmc.ops.registry import Attrs

REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")  # fmt: skip
_FLOAT_MATH = ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp")


def loader(x: TensorRef, dtype: str) -> Callable[[Index, Results], Expr]:
    """A stage term reading `x` at the element index, cast to the accumulator dtype."""
    ndim = x.type.ndim
    return lambda idx, results: x.read(tuple(idx[a] for a in range(ndim))).astype(dtype)


def _finite(m: Expr) -> Expr:
    """`m`, or 0 when infinite: an all-(-inf) row then gives log(0) = -inf instead of nan."""
    return select(fabs(m) < const(math.inf, m.dtype), m, const(0.0, m.dtype))


def _stages(op: str, load: Callable[[Index, Results], Expr], acc: str, count: int) -> list[Stage]:
    def square(idx: Index, r: Results) -> Expr:
        v = load(idx, r)
        return v * v

    def magnitude(idx: Index, r: Results) -> Expr:
        v = load(idx, r)
        if acc.startswith("float"):
            return fabs(v)
        return select(v < const(0, acc), const(0, acc) - v, v)

    def mean(v: Expr) -> Expr:
        return v / const(count, acc)  # truncates towards zero for integers, as onnxruntime

    def shifted(idx: Index, r: Results) -> Expr:
        return exp(load(idx, r) - _finite(r[0]))

    if op == "ReduceLogSumExp":
        return [Stage("max", acc, load), Stage("sum", acc, shifted)]
    kind, term, post = {
        "ReduceSum": ("sum", load, None),
        "ReduceMean": ("sum", load, mean),
        "ReduceMax": ("max", load, None),
        "ReduceMin": ("min", load, None),
        "ReduceProd": ("prod", load, None),
        "ReduceL1": ("sum", magnitude, None),
        "ReduceL2": ("sum", square, sqrt),
        "ReduceSumSquare": ("sum", square, None),
        "ReduceLogSum": ("sum", load, log),
    }[op]
    return [Stage(kind, acc, term, post)]


def _reduce_template(op: str) -> None:
    def lower(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        x = inputs[0]
        ndim, axes, keepdims = x.type.ndim, tuple(attrs["axes"]), bool(attrs["keepdims"])
        acc = accumulator_dtype(x.dtype, op in _FLOAT_MATH)
        stages = _stages(op, loader(x, acc), acc, math.prod(x.shape[a] for a in axes))

        def value(idx: Index, results: Results) -> Expr:
            if op == "ReduceLogSumExp":
                return log(results[1]) + _finite(results[0])
            return results[0]

        def index(idx: Index) -> tuple[Expr, ...]:
            return output_index(idx, ndim, axes, keepdims)

        emit = storer(outputs[0], epilogue, index, value)
        shape = buffer_shape(x.shape)
        return [reduction_kernel(ctx, op.lower(), shape, axes, stages, result=emit)]

    lower.__doc__ = f"{op} as one reduction kernel."
    template(op, epilogue=True)(lower)


def _arg_template(op: str) -> None:
    kind = op.lower()

    def lower(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        x = inputs[0]
        ndim, keepdims = x.type.ndim, bool(attrs["keepdims"])
        axis = int(attrs["axis"]) % ndim
        acc = accumulator_dtype(x.dtype)
        stage = Stage(kind, acc, loader(x, acc), last=bool(attrs["select_last_index"]))

        def index(idx: Index) -> tuple[Expr, ...]:
            return output_index(idx, ndim, (axis,), keepdims)

        emit = storer(outputs[0], epilogue, index, lambda idx, results: results[0])
        return [reduction_kernel(ctx, kind, x.shape, (axis,), [stage], result=emit)]

    lower.__doc__ = f"{op}: positions of the extremes along `axis`, stored as int64."
    template(op, epilogue=True)(lower)


for _op in REDUCE_OPS:
    _reduce_template(_op)
_arg_template("ArgMax")
_arg_template("ArgMin")
