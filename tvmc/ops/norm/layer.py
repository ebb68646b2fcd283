"""LayerNormalization and RMSNormalization: normalize every row of the dims from `axis` to the
end, then scale (and shift). One row-reduction template each: statistics as stages, then an
element pass; the statistics helpers here serve the other norms too.

They stay whole: a row-wise kernel (reduce, then scale in the same pass) is simpler and faster
than fusing the reduce-then-broadcast chain they would lower to. Statistics accumulate in
float32 for float16 inputs, and in the stash_type of the ops that have one; the variance is that
of the centred values (a second pass, not E[x^2] - mean^2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, const, sqrt
from tvmc.ops.common import broadcasts_to, normalize_axis, same_dtype
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TensorRef, broadcast_read
from tvmc.ops.reduction.softmax import Value, element_store, float_input, wide
from tvmc.ops.registry import OPAQUE, REQUIRED, OpDef
from tvmc.ops.schedule.reduction import (
    Index,
    Results,
    Stage,
    accumulator_dtype,
    loader,
    reduction_kernel,
    row_reduction_lowerings,
)

STASH_DTYPES = ("float32", "float64")  # stash_type values: the precision of the statistics


# ---- statistics shared by the norms -------------------------------------------------------------
def normalize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    """(x - mean) / sqrt(var + epsilon) over `axes`, in float64."""
    x64 = wide(x)
    mean = np.mean(x64, axis=axes, keepdims=True)
    var = np.mean(np.square(x64 - mean), axis=axes, keepdims=True)
    return (x64 - mean) / np.sqrt(var + epsilon)


def moments(load: Value, acc: str, count: int, epsilon: float) -> list[Stage]:
    """Mean, then 1/sqrt(var + epsilon) with the variance of the centred values (two passes)."""

    def centred_square(idx: Index, r: Results) -> Expr:
        c = load(idx, r) - r[0]
        return c * c

    def mean(v: Expr) -> Expr:
        return v / const(count, acc)

    def inverse_std(v: Expr) -> Expr:
        return const(1.0, acc) / sqrt(v / const(count, acc) + const(epsilon, acc))

    return [Stage("sum", acc, load, mean), Stage("sum", acc, centred_square, inverse_std)]


def statistics_dtype(stash: str) -> str:
    """The dtype the norms with a stash_type compute in: that type, as the ONNX functions do
    (float32 statistics for a float64 input unless stash_type says double)."""
    if stash not in STASH_DTYPES:
        raise ValueError(f"stash_type {stash} is not supported (supported: {list(STASH_DTYPES)})")
    return stash


def from_axis(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    """The row geometry of the norms over the dims from `axis` to the end."""
    return x.shape, tuple(range(int(attrs["axis"]) % x.ndim, x.ndim))


def _row_norm_rule(op: str):
    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        if len(types) < 2:
            raise ValueError(f"{op} needs inputs X and scale, got {len(types)} input(s)")
        x = types[0]
        float_input(op, x)
        same_dtype(types, op)
        statistics_dtype(attrs.get("stash_type", "float32"))
        axis = normalize_axis(attrs["axis"], x.ndim, op)
        row = x.shape[axis:]
        for what, t in zip(("scale", "bias"), types[1:]):
            if not broadcasts_to(t.shape, row):
                raise ValueError(
                    f"{op} {what} of shape {list(t.shape)} does not broadcast to the "
                    f"normalized shape {list(row)} (dims {axis}.. of {list(x.shape)})"
                )
        return [x]

    return rule


# ---- LayerNormalization -----------------------------------------------------------------------
def layer_normalization(attrs, x, scale, bias=None):
    """(x - mean) / sqrt(var + epsilon) * scale + bias over the dims from `axis` to the end."""
    axis = normalize_axis(attrs["axis"], x.ndim)
    y = normalize(x, tuple(range(axis, x.ndim)), attrs["epsilon"]) * scale
    return (y if bias is None else y + bias).astype(x.dtype)


def layer_normalization_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per row over dims axis..: mean, inverse std, then (x - mean) * inv * scale + bias."""
    x, out = inputs[0], outputs[0]
    ndim, shape = x.type.ndim, x.shape
    axis = int(attrs["axis"]) % ndim
    axes = tuple(range(axis, ndim))
    acc = accumulator_dtype(x.dtype)
    load = loader(x, acc)
    row_shape = x.shape[axis:]
    scale = broadcast_read(inputs[1], row_shape)
    bias = broadcast_read(inputs[2], row_shape) if len(inputs) > 2 else None

    def value(idx: Index, r: Results) -> Expr:
        row = tuple(idx[a] for a in axes)
        y = (load(idx, r) - r[0]) * r[1] * scale(row).astype(acc)
        return y + bias(row).astype(acc) if bias is not None else y

    stages = moments(load, acc, math.prod(row_shape), float(attrs["epsilon"]))
    element = element_store(out, ndim, epilogue, value)
    return [reduction_kernel(ctx, "layer_norm", shape, axes, stages, element=element)]


# ---- RMSNormalization -------------------------------------------------------------------------
def rms_normalization(attrs, x, scale):
    """x / sqrt(mean(x^2) + epsilon) * scale over the dims from `axis` to the end."""
    axis = normalize_axis(attrs["axis"], x.ndim)
    x64 = wide(x)
    mean_square = np.mean(np.square(x64), axis=tuple(range(axis, x.ndim)), keepdims=True)
    return (x64 / np.sqrt(mean_square + attrs["epsilon"]) * scale).astype(x.dtype)


def rms_normalization_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per row over dims axis..: one pass for 1/sqrt(mean(x^2) + eps), then x * that * scale."""
    x, out = inputs[0], outputs[0]
    ndim = x.type.ndim
    axis = int(attrs["axis"]) % ndim
    axes = tuple(range(axis, ndim))
    acc = statistics_dtype(attrs["stash_type"])
    load = loader(x, acc)
    row_shape = x.shape[axis:]
    scale = broadcast_read(inputs[1], row_shape)
    count, epsilon = math.prod(row_shape), float(attrs["epsilon"])

    def square(idx: Index, r: Results) -> Expr:
        v = load(idx, r)
        return v * v

    def inverse_rms(v: Expr) -> Expr:
        return const(1.0, acc) / sqrt(v / const(count, acc) + const(epsilon, acc))

    def value(idx: Index, r: Results) -> Expr:
        return load(idx, r) * r[0] * scale(tuple(idx[a] for a in axes)).astype(acc)

    stages = [Stage("sum", acc, square, inverse_rms)]
    element = element_store(out, ndim, epilogue, value)
    return [reduction_kernel(ctx, "rms_norm", x.shape, axes, stages, element=element)]


DEFINITIONS = [
    OpDef("LayerNormalization", _row_norm_rule("LayerNormalization"), layer_normalization,
          row_reduction_lowerings(layer_normalization_template, from_axis),
          attrs={"axis": REQUIRED, "epsilon": 1e-5}, kind=OPAQUE, num_inputs=(2, 3)),
    OpDef("RMSNormalization", _row_norm_rule("RMSNormalization"), rms_normalization,
          row_reduction_lowerings(rms_normalization_template, from_axis),
          attrs={"axis": REQUIRED, "epsilon": 1e-5, "stash_type": "float32"}, kind=OPAQUE,
          num_inputs=(2, 2)),
]  # fmt: skip
