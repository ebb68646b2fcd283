"""Reductions over a static set of axes (ReduceSum, ReduceMean, ...) and ArgMax/ArgMin.

Canonical form: `axes` is a sorted tuple of non-negative axes and names exactly the dims reduced;
an empty tuple reduces nothing (the frontend turns ONNX's "empty axes = all axes" into the full
tuple). `keepdims` is a bool.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import normalize_axes, normalize_axis
from tvmc.ops.registry import REDUCTION, REQUIRED, Attrs, register

_NUMERIC = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
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


def _register_reduction(name: str) -> None:
    compute = REDUCTIONS[name]
    dtypes = _MAX_MIN_DTYPES if name in ("ReduceMax", "ReduceMin") else _NUMERIC

    def reference(attrs, x):
        axes = reduce_axes(attrs, x.ndim, name)
        return compute(x, axes, bool(attrs["keepdims"]))

    reference.__doc__ = f"{name} over the dims in `axes` (none when empty)."
    register(name, _reduce_rule(name, dtypes), attrs={"axes": REQUIRED, "keepdims": True},
             kind=REDUCTION)(reference)  # fmt: skip


for _name in REDUCTIONS:
    _register_reduction(_name)


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


@register("ArgMax", _arg_rule("ArgMax"), attrs=_ARG_ATTRS, kind=REDUCTION)
def argmax(attrs, x):
    """Index (int64) of the largest element along `axis`; first or last of ties."""
    return _arg(np.argmax, attrs, x)


@register("ArgMin", _arg_rule("ArgMin"), attrs=_ARG_ATTRS, kind=REDUCTION)
def argmin(attrs, x):
    """Index (int64) of the smallest element along `axis`; first or last of ties."""
    return _arg(np.argmin, attrs, x)
