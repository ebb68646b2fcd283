"""Normalizations: LayerNormalization, InstanceNormalization (one row-reduction template each:
statistics as stages, then an element pass) and inference BatchNormalization (a compute; the
fold-batch-norm pass usually merges it into the conv before it).

LayerNormalization and InstanceNormalization stay whole: a row-wise kernel (reduce, then scale
in the same pass) is simpler and faster than fusing the reduce-then-broadcast chain they would
lower to. Statistics accumulate in float32 for float16 inputs; the variance is that of the
centred values (a second pass, not E[x^2] - mean^2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, const, sqrt
from tvmc.ops.common import FLOAT_DTYPES, broadcasts_to, normalize_axis, same_dtype
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import (
    Accessor,
    Attrs,
    Epilogue,
    Indices,
    LowerContext,
    TensorRef,
    broadcast_read,
    computed,
)
from tvmc.ops.reduction.softmax import Value, element_store, float_input, wide
from tvmc.ops.registry import BROADCAST, OPAQUE, REQUIRED, OpDef, register
from tvmc.ops.schedule.reduction import (
    Index,
    Results,
    Stage,
    accumulator_dtype,
    loader,
    reduction_kernel,
    row_reduction_lowerings,
)


# ---- LayerNormalization / InstanceNormalization: definitions ----------------------------------
def _layer_norm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x = types[0]
    float_input("LayerNormalization", x)
    same_dtype(types, "LayerNormalization")
    axis = normalize_axis(attrs["axis"], x.ndim, "LayerNormalization")
    row = x.shape[axis:]
    for what, t in zip(("scale", "bias"), types[1:]):
        if not broadcasts_to(t.shape, row):
            raise ValueError(
                f"LayerNormalization {what} of shape {list(t.shape)} does not broadcast to the "
                f"normalized shape {list(row)} (dims {axis}.. of {list(x.shape)})"
            )
    return [x]


def _normalize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    x64 = wide(x)
    mean = np.mean(x64, axis=axes, keepdims=True)
    var = np.mean(np.square(x64 - mean), axis=axes, keepdims=True)
    return (x64 - mean) / np.sqrt(var + epsilon)


def layer_normalization(attrs, x, scale, bias=None):
    """(x - mean) / sqrt(var + epsilon) * scale + bias over the dims from `axis` to the end."""
    axis = normalize_axis(attrs["axis"], x.ndim)
    y = _normalize(x, tuple(range(axis, x.ndim)), attrs["epsilon"]) * scale
    return (y if bias is None else y + bias).astype(x.dtype)


def _instance_norm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, scale, bias = types
    float_input("InstanceNormalization", x)
    same_dtype(types, "InstanceNormalization")
    if x.ndim < 3:
        raise ValueError(f"InstanceNormalization needs an [N,C,D1,...] input, got {list(x.shape)}")
    channels = (x.shape[1],)
    if scale.shape != channels or bias.shape != channels:
        raise ValueError(
            f"InstanceNormalization scale {list(scale.shape)} and bias {list(bias.shape)} "
            f"must both be [{x.shape[1]}] (the channel count of {list(x.shape)})"
        )
    return [x]


def instance_normalization(attrs, x, scale, bias):
    """Per sample and channel, normalize over the spatial dims, then scale and shift per channel."""
    y = _normalize(x, tuple(range(2, x.ndim)), attrs["epsilon"])
    per_channel = (-1,) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(per_channel) + bias.reshape(per_channel)).astype(x.dtype)


# ---- LayerNormalization / InstanceNormalization: templates -------------------------------------
def _moments(load: Value, acc: str, count: int, epsilon: float) -> list[Stage]:
    """Mean, then 1/sqrt(var + epsilon) with the variance of the centred values (two passes)."""

    def centred_square(idx: Index, r: Results) -> Expr:
        c = load(idx, r) - r[0]
        return c * c

    def mean(v: Expr) -> Expr:
        return v / const(count, acc)

    def inverse_std(v: Expr) -> Expr:
        return const(1.0, acc) / sqrt(v / const(count, acc) + const(epsilon, acc))

    return [Stage("sum", acc, load, mean), Stage("sum", acc, centred_square, inverse_std)]


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

    stages = _moments(load, acc, math.prod(row_shape), float(attrs["epsilon"]))
    element = element_store(out, ndim, epilogue, value)
    return [reduction_kernel(ctx, "layer_norm", shape, axes, stages, element=element)]


def instance_normalization_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per (sample, channel) over the spatial dims, then a per-channel scale and shift."""
    x, scale, bias = inputs
    ndim, shape = x.type.ndim, x.shape
    axes = tuple(range(2, ndim))
    acc = accumulator_dtype(x.dtype)
    load = loader(x, acc)

    def value(idx: Index, r: Results) -> Expr:
        c = (idx[1],)
        return (load(idx, r) - r[0]) * (r[1] * scale.read(c).astype(acc)) + bias.read(c).astype(acc)

    stages = _moments(load, acc, math.prod(x.shape[2:]), float(attrs["epsilon"]))
    element = element_store(outputs[0], ndim, epilogue, value)
    return [reduction_kernel(ctx, "instance_norm", shape, axes, stages, element=element)]


# ---- BatchNormalization ----------------------------------------------------------------------
def _batch_norm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x = types[0]
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"BatchNormalization needs a float input, got {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"BatchNormalization needs input (N, C, ...), got shape {list(x.shape)}")
    for what, t in zip(("scale", "bias", "mean", "var"), types[1:]):
        if t.shape != (x.shape[1],):
            raise ValueError(
                f"BatchNormalization {what} must have shape [{x.shape[1]}] (one per channel), "
                f"got {list(t.shape)}"
            )
        if t.dtype not in FLOAT_DTYPES:
            raise ValueError(f"BatchNormalization {what} must be float, got {t.dtype}")
    return [x]


def batch_norm_affine(
    scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray, epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, offset) in float64 so that y = x * multiplier + offset."""
    multiplier = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + epsilon)
    return multiplier, bias.astype(np.float64) - mean.astype(np.float64) * multiplier


def batch_norm(attrs, x, scale, bias, mean, var):
    """Inference-mode batch normalization with the running statistics."""
    multiplier, offset = batch_norm_affine(scale, bias, mean, var, attrs["epsilon"])
    shape = (-1, *([1] * (x.ndim - 2)))
    return (x * multiplier.reshape(shape) + offset.reshape(shape)).astype(x.dtype)


def batch_norm_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """y = (x - mean[c]) * m[c] + bias[c] with m = scale / sqrt(var + eps), c on axis 1.

    Constant statistics equal on every channel become literals (m computed at compile time).
    Otherwise m is computed from per-channel reads: a compute cannot add a table, but those
    reads and the sqrt depend only on c, which the injective schedule keeps out of the innermost
    (vectorized) loop unless the input is 2-D, so LLVM hoists them (kernel params are noalias).
    """
    x, *params = inputs
    dtype = x.dtype
    if all(p.value is not None for p in params):
        scale, bias, mean, var = (p.value.astype(np.float64) for p in params)
        m = scale / np.sqrt(var + attrs["epsilon"])
        if all(np.all(a == a[0]) for a in (m, bias, mean)):
            lm, lb, lmu = (literal(a[0], dtype) for a in (m, bias, mean))
            return [lambda idx: (x.read(idx) - lmu) * lm + lb]
    eps = literal(attrs["epsilon"], dtype)

    def read(idx: Indices) -> Expr:
        s, b, mu, v = (p.read((idx[1],)).astype(dtype) for p in params)
        return (x.read(idx) - mu) * (s / sqrt(v + eps)) + b

    return [read]


def _from_axis(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    return x.shape, tuple(range(int(attrs["axis"]) % x.ndim, x.ndim))


def _spatial(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    return x.shape, tuple(range(2, x.ndim))


DEFINITIONS = [
    OpDef("LayerNormalization", _layer_norm_rule, layer_normalization,
          row_reduction_lowerings(layer_normalization_template, _from_axis),
          attrs={"axis": REQUIRED, "epsilon": 1e-5}, kind=OPAQUE, num_inputs=(2, 3)),
    OpDef("InstanceNormalization", _instance_norm_rule, instance_normalization,
          row_reduction_lowerings(instance_normalization_template, _spatial),
          attrs={"epsilon": 1e-5}, kind=OPAQUE, num_inputs=(3, 3)),
    OpDef("BatchNormalization", _batch_norm_rule, batch_norm, computed(batch_norm_compute),
          attrs={"epsilon": 1e-5}, kind=BROADCAST, num_inputs=(5, 5)),
]  # fmt: skip

for _opdef in DEFINITIONS:
    register(_opdef)
