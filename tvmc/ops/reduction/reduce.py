"""Reductions over a static set of axes (ReduceSum, ReduceMean, ...) and ArgMax/ArgMin: rules,
references and their one template (a `reduction_kernel`, on either target).

Canonical form: `axes` is a sorted tuple of non-negative axes and names exactly the dims reduced;
an empty tuple reduces nothing (the frontend turns ONNX's "empty axes = all axes" into the full
tuple). `keepdims` is a bool.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, const, exp, fabs, log, select, sqrt
from tvmc.ops.common import normalize_axes, normalize_axis
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TemplateFn, TensorRef, buffer_shape
from tvmc.ops.registry import REDUCTION, REQUIRED, OpDef
from tvmc.ops.schedule.reduction import (
    Index,
    Results,
    Stage,
    accumulator_dtype,
    loader,
    output_index,
    reduction_kernel,
    row_reduction_lowerings,
    storer,
)

_NUMERIC = ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
            "uint8", "uint16", "uint32", "uint64")  # fmt: skip


def reduce_axes(attrs: Attrs, ndim: int, op: str) -> tuple[int, ...]:
    """The attribute `axes` checked against the rank: in range, no repeats, sorted."""
    axes = normalize_axes(attrs["axes"], ndim, op)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op} axes {list(attrs['axes'])} name a dimension twice")
    return tuple(sorted(axes))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    """`shape` with `axes` reduced to 1 (keepdims) or removed."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_rule(op: str, dtypes: tuple[str, ...]):
    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        x = types[0]
        if x.dtype not in dtypes:
            raise ValueError(f"{op} does not support dtype {x.dtype}; supported: {list(dtypes)}")
        axes = reduce_axes(attrs, x.ndim, op)
        return [TensorType(reduced_shape(x.shape, axes, attrs["keepdims"]), x.dtype)]

    return rule


def _with_float(fn):
    """Run `fn` in float64 for float16/float32 (a reference: precision first), then cast back."""

    def apply(x, axes, keepdims):
        wide = x.astype(np.float64) if x.dtype.kind == "f" else x
        return np.asarray(fn(wide, axes, keepdims)).astype(x.dtype)

    return apply


def _sum(x, axes, keepdims):
    return np.sum(x, axis=axes, keepdims=keepdims)


def _mean(x, axes, keepdims):
    if x.dtype.kind in "iu":  # integer mean truncates toward zero, as onnxruntime does
        count = int(np.prod([x.shape[a] for a in axes]))
        total = np.sum(x, axis=axes, keepdims=keepdims)
        return (np.sign(total) * (np.abs(total) // max(count, 1))).astype(x.dtype)
    return np.mean(x, axis=axes, keepdims=keepdims)


def _log_sum_exp(x, axes, keepdims):
    if not x.size:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdims))
    peak = np.max(x, axis=axes, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # all -inf rows: log(0) = -inf, not nan
    out = np.log(np.sum(np.exp(x - peak), axis=axes, keepdims=True)) + peak
    return out if keepdims else np.squeeze(out, axis=axes)


def _l1(x, axes, keepdims):
    return np.sum(np.abs(x), axis=axes, keepdims=keepdims)


def _sum_square(x, axes, keepdims):
    return np.sum(x * x, axis=axes, keepdims=keepdims)


def _l2(x, axes, keepdims):
    return np.sqrt(_sum_square(x, axes, keepdims))


def _log_sum(x, axes, keepdims):
    return np.log(np.sum(x, axis=axes, keepdims=keepdims))


def _lowest(dtype: np.dtype):
    """The identity of max: an empty reduction yields it (-inf for floats, as ONNX says)."""
    if dtype == np.bool_:
        return False
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype: np.dtype):
    if dtype == np.bool_:
        return True
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


# name -> computation on (x, axes, keepdims); results are cast back to the input dtype
REDUCTIONS = {
    "ReduceSum": _with_float(_sum),
    "ReduceMean": _with_float(_mean),
    "ReduceMax": lambda x, axes, keepdims: np.max(
        x, axis=axes, keepdims=keepdims, initial=_lowest(x.dtype)
    ),
    "ReduceMin": lambda x, axes, keepdims: np.min(
        x, axis=axes, keepdims=keepdims, initial=_highest(x.dtype)
    ),
    "ReduceProd": _with_float(lambda x, axes, keepdims: np.prod(x, axis=axes, keepdims=keepdims)),
    "ReduceL1": _with_float(_l1),
    "ReduceL2": _with_float(_l2),
    "ReduceSumSquare": _with_float(_sum_square),
    "ReduceLogSum": _with_float(_log_sum),
    "ReduceLogSumExp": _with_float(_log_sum_exp),
}
_MAX_MIN_DTYPES = (*_NUMERIC, "bool")  # bool from opset 20: any / all


# ---- ArgMax / ArgMin ---------------------------------------------------------------------------
def _arg_rule(op: str):
    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        x = types[0]
        if x.dtype not in _NUMERIC:
            raise ValueError(f"{op} does not support dtype {x.dtype}")
        if x.ndim == 0:
            raise ValueError(f"{op} needs an input of rank >= 1")
        axis = normalize_axis(attrs["axis"], x.ndim, op)
        if x.shape[axis] == 0:
            raise ValueError(f"{op} over an empty axis {axis} of shape {list(x.shape)}")
        return [TensorType(reduced_shape(x.shape, (axis,), attrs["keepdims"]), "int64")]

    return rule


def _arg(fn, attrs, x):
    axis = normalize_axis(attrs["axis"], x.ndim)
    if attrs["select_last_index"]:  # the last of equal extremes: search the reversed axis
        index = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis, keepdims=True)
    else:
        index = fn(x, axis=axis, keepdims=True)
    return index if attrs["keepdims"] else np.squeeze(index, axis=axis)


_ARG_ATTRS = {"axis": 0, "keepdims": True, "select_last_index": False}


def argmax(attrs, x):
    """Index (int64) of the largest element along `axis`; first or last of ties."""
    return _arg(np.argmax, attrs, x)


def argmin(attrs, x):
    """Index (int64) of the smallest element along `axis`; first or last of ties."""
    return _arg(np.argmin, attrs, x)


# ---- the template ------------------------------------------------------------------------------
_FLOAT_MATH = ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp")


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


def reduce_template(op: str) -> TemplateFn:
    """The template of reduction `op`."""

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
    return lower


def arg_template(op: str) -> TemplateFn:
    """The template of ArgMax or ArgMin."""
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
    return lower


# ---- the ops -------------------------------------------------------------------------------------
def listed_axes(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    """The rows a reduction template reduces: the `axes` of its input."""
    return buffer_shape(x.shape), tuple(attrs["axes"])


def one_axis(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    """The rows ArgMax/ArgMin reduce: along `axis`."""
    return x.shape, (int(attrs["axis"]) % x.ndim,)


def _reduction(name: str) -> OpDef:
    compute = REDUCTIONS[name]
    dtypes = _MAX_MIN_DTYPES if name in ("ReduceMax", "ReduceMin") else _NUMERIC

    def reference(attrs, x):
        axes = reduce_axes(attrs, x.ndim, name)
        return compute(x, axes, bool(attrs["keepdims"]))

    reference.__doc__ = f"{name} over the dims in `axes` (none when empty)."
    return OpDef(name, _reduce_rule(name, dtypes), reference,
                 row_reduction_lowerings(reduce_template(name), listed_axes),
                 attrs={"axes": REQUIRED, "keepdims": True}, kind=REDUCTION)  # fmt: skip


DEFINITIONS = [
    *(_reduction(name) for name in REDUCTIONS),
    OpDef("ArgMax", _arg_rule("ArgMax"), argmax,
          row_reduction_lowerings(arg_template("ArgMax"), one_axis), _ARG_ATTRS, REDUCTION),
    OpDef("ArgMin", _arg_rule("ArgMin"), argmin,
          row_reduction_lowerings(arg_template("ArgMin"), one_axis), _ARG_ATTRS, REDUCTION),
]  # fmt: skip
