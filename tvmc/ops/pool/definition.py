"""Pooling ops (MaxPool, AveragePool, LpPool, their Global forms) and LRN: rules and references.

Window attributes are normalized as for Conv (tvmc.ops.window): explicit `kernel_shape`, `strides`,
`dilations` and `pads`; `ceil_mode` stays, since it changes the output size.
"""

from __future__ import annotations

import itertools

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.lowering import Attrs
from tvmc.ops.window import check_window_attrs, pad_spatial, window_output_shape

MAXPOOL_DTYPES = (*FLOAT_DTYPES, "int8", "uint8")


def pool_rule(op: str, dtypes: tuple[str, ...]):
    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        x = types[0]
        if x.dtype not in dtypes:
            raise ValueError(f"{op} does not support dtype {x.dtype} (supported: {list(dtypes)})")
        if x.ndim < 3:
            raise ValueError(f"{op} needs input (N, C, spatial...), got shape {list(x.shape)}")
        check_window_attrs(op, attrs, x.ndim - 2)
        return [TensorType((*x.shape[:2], *_output_spatial(attrs, x.shape)), x.dtype)]

    return rule


def _output_spatial(attrs: Attrs, shape: tuple[int, ...]) -> list[int]:
    out = window_output_shape(shape[2:], attrs, bool(attrs["ceil_mode"]))
    if min(out) < 1:
        raise ValueError(
            f"pooling window {list(attrs['kernel_shape'])} (dilations {list(attrs['dilations'])}) "
            f"does not fit input {list(shape)} with pads {list(attrs['pads'])}"
        )
    return out


def _window_reduce(attrs: Attrs, x: np.ndarray, fill, combine, dtype=None) -> np.ndarray:
    """`combine` the elements of every window, padding with `fill` (ceil-mode overhang included).

    One vector op per kernel offset (k^d of them), never a loop over output pixels.
    """
    kernel, strides, dilations = attrs["kernel_shape"], attrs["strides"], attrs["dilations"]
    spatial = len(kernel)
    shape = x.shape[-spatial:]
    out = _output_spatial(attrs, (0, 0, *shape))
    begin = attrs["pads"][:spatial]
    # ceil mode: the last window may reach past the end pad; pad that overhang with `fill` too
    end = [
        max(pe, (o - 1) * s + d * (k - 1) + 1 - n - pb)
        for o, s, d, k, n, pb, pe in zip(
            out, strides, dilations, kernel, shape, begin, attrs["pads"][spatial:]
        )
    ]
    padded = pad_spatial(x, begin, end, fill).astype(dtype or x.dtype, copy=False)
    result = None
    for offset in itertools.product(*map(range, kernel)):
        index = tuple(
            slice(i * d, i * d + (o - 1) * s + 1, s)
            for i, d, o, s in zip(offset, dilations, out, strides)
        )
        part = padded[(Ellipsis, *index)]
        result = part.copy() if result is None else combine(result, part, out=result)
    return result


def max_pool(attrs, x):
    """Maximum over each window; padding never wins (it is -inf, or the integer minimum)."""
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return _window_reduce(attrs, x, lowest, np.maximum)


def average_pool(attrs, x):
    """Window mean; the divisor counts explicit pads with count_include_pad, never the overhang."""
    spatial = len(attrs["kernel_shape"])
    total = _window_reduce(attrs, x, 0, np.add, np.float64)
    return (total / _window_counts(attrs, x.shape[-spatial:])).astype(x.dtype)


def lp_pool(attrs, x):
    """(sum of |x|**p over each window) ** (1/p); padding cells add nothing."""
    p = int(attrs["p"])
    powered = np.abs(x.astype(np.float64)) ** p
    return (_window_reduce(attrs, powered, 0, np.add) ** (1.0 / p)).astype(x.dtype)


def _window_counts(attrs: Attrs, shape: tuple[int, ...]) -> np.ndarray:
    """Cells each window averages over: a product of per-axis counts, since windows are boxes."""
    spatial, pads = len(shape), attrs["pads"]
    out = _output_spatial(attrs, (0, 0, *shape))
    include = bool(attrs["count_include_pad"])
    count = np.ones((), np.float64)
    for i, (o, k, s, d) in enumerate(
        zip(out, attrs["kernel_shape"], attrs["strides"], attrs["dilations"])
    ):
        lo, hi = (-pads[i], shape[i] + pads[i + spatial]) if include else (0, shape[i])
        cells = (np.arange(o) * s - pads[i])[:, None] + np.arange(k) * d
        axis_count = ((cells >= lo) & (cells < hi)).sum(axis=1)
        count = np.multiply.outer(count, np.maximum(axis_count, 1))
    return count


# ---- global pools --------------------------------------------------------------------------------
def global_rule(op: str, dtypes: tuple[str, ...]):
    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        x = types[0]
        if x.dtype not in dtypes:
            raise ValueError(f"{op} does not support dtype {x.dtype} (supported: {list(dtypes)})")
        if x.ndim < 3:
            raise ValueError(f"{op} needs input (N, C, spatial...), got shape {list(x.shape)}")
        return [TensorType((*x.shape[:2], *([1] * (x.ndim - 2))), x.dtype)]

    return rule


def global_average_pool(attrs, x):
    """Mean over all spatial axes, kept as size-1 axes."""
    axes = tuple(range(2, x.ndim))
    return x.mean(axis=axes, dtype=np.float64, keepdims=True).astype(x.dtype)


def global_max_pool(attrs, x):
    """Maximum over all spatial axes, kept as size-1 axes."""
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)


# ---- LRN -----------------------------------------------------------------------------------------
def lrn_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x = types[0]
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"LRN needs a float input, got {x.dtype}")
    if x.ndim < 3:
        raise ValueError(f"LRN needs input (N, C, spatial...), got shape {list(x.shape)}")
    if attrs["size"] < 1:
        raise ValueError(f"LRN size must be >= 1, got {attrs['size']}")
    return [x]


def lrn(attrs, x):
    """Local response normalization across channels: x / (bias + alpha/size * sum x^2)^beta."""
    size = attrs["size"]
    before = (size - 1) // 2
    squares = np.square(x.astype(np.float64))
    widths = [(0, 0), (before, size - 1 - before)] + [(0, 0)] * (x.ndim - 2)
    padded = np.pad(squares, widths)
    cumulative = np.concatenate([np.zeros_like(padded[:, :1]), np.cumsum(padded, axis=1)], axis=1)
    square_sum = cumulative[:, size:] - cumulative[:, :-size]
    scale = attrs["bias"] + attrs["alpha"] / size * square_sum
    return (x / scale ** attrs["beta"]).astype(x.dtype)


def lp_pool_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    """The window rule, and p a positive integer."""
    if int(attrs["p"]) != attrs["p"] or attrs["p"] < 1:
        raise ValueError(f"LpPool p must be a positive integer, got {attrs['p']}")
    return _lp_window_rule(attrs, types)


max_pool_rule = pool_rule("MaxPool", MAXPOOL_DTYPES)
average_pool_rule = pool_rule("AveragePool", FLOAT_DTYPES)
_lp_window_rule = pool_rule("LpPool", FLOAT_DTYPES)
global_average_pool_rule = global_rule("GlobalAveragePool", FLOAT_DTYPES)
global_max_pool_rule = global_rule("GlobalMaxPool", MAXPOOL_DTYPES)
