"""The per-channel norms. InstanceNormalization and GroupNormalization: per sample, normalize
each channel (each group of consecutive channels) over the spatial dims, then scale and shift
per channel; one row-reduction template each. Inference BatchNormalization: a compute with the
running statistics (the fold-batch-norm pass usually merges it into the conv before it).

GroupNormalization reduces over a view of the input as (N, G, C/G, spatial...): its template
reads and stores the input's element (n, g * C/G + j, ...), so no copy or Reshape is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, sqrt
from tvmc.ops.common import FLOAT_DTYPES, same_dtype
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import (
    Accessor,
    Attrs,
    Epilogue,
    Indices,
    LowerContext,
    TensorRef,
    computed,
)
from tvmc.ops.norm.layer import moments, normalize, statistics_dtype
from tvmc.ops.reduction.softmax import element_store, float_input
from tvmc.ops.registry import BROADCAST, OPAQUE, REQUIRED, OpDef
from tvmc.ops.schedule.reduction import (
    Index,
    Results,
    accumulator_dtype,
    loader,
    reduction_kernel,
    row_reduction_lowerings,
    storer,
)


def _per_channel_params(op: str, types: list[TensorType], least_rank: int) -> TensorType:
    """The input, after checking float dtypes, its rank and [C] scale and bias."""
    x, scale, bias = types
    float_input(op, x)
    same_dtype(types, op)
    if x.ndim < least_rank:
        dims = "N,C,D1,..." if least_rank > 2 else "N,C,..."
        raise ValueError(f"{op} needs an [{dims}] input, got {list(x.shape)}")
    channels = (x.shape[1],)
    if scale.shape != channels or bias.shape != channels:
        raise ValueError(
            f"{op} scale {list(scale.shape)} and bias {list(bias.shape)} must both be "
            f"[{x.shape[1]}] (the channel count of {list(x.shape)})"
        )
    return x


def _affine(y, x, scale, bias):
    per_channel = (-1,) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(per_channel) + bias.reshape(per_channel)).astype(x.dtype)


# ---- InstanceNormalization --------------------------------------------------------------------
def _instance_norm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    return [_per_channel_params("InstanceNormalization", types, 3)]


def instance_normalization(attrs, x, scale, bias):
    """Per sample and channel, normalize over the spatial dims, then scale and shift per channel."""
    return _affine(normalize(x, tuple(range(2, x.ndim)), attrs["epsilon"]), x, scale, bias)


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

    stages = moments(load, acc, math.prod(x.shape[2:]), float(attrs["epsilon"]))
    element = element_store(outputs[0], ndim, epilogue, value)
    return [reduction_kernel(ctx, "instance_norm", shape, axes, stages, element=element)]


def _spatial(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    return x.shape, tuple(range(2, x.ndim))


# ---- GroupNormalization -----------------------------------------------------------------------
def _group_norm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x = _per_channel_params("GroupNormalization", types, 2)
    statistics_dtype(attrs["stash_type"])
    groups, channels = int(attrs["num_groups"]), x.shape[1]
    if groups < 1 or channels % groups:
        raise ValueError(
            f"GroupNormalization num_groups {groups} must be positive and divide the "
            f"{channels} channels of {list(x.shape)}"
        )
    return [x]


def group_normalization(attrs, x, scale, bias):
    """Per sample and group of C/num_groups channels, normalize over the group's channels and
    the spatial dims, then scale and shift per channel."""
    grouped = x.reshape(x.shape[0], int(attrs["num_groups"]), -1)
    y = normalize(grouped, (2,), attrs["epsilon"]).reshape(x.shape)
    return _affine(y, x, scale, bias)


def _groups(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    """The input seen as (N, G, C/G, spatial...), reduced over every dim from the third."""
    groups = int(attrs["num_groups"])
    shape = (x.shape[0], groups, x.shape[1] // groups, *x.shape[2:])
    return shape, tuple(range(2, len(shape)))


def group_normalization_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per (sample, group) over its channels and the spatial dims, then a per-channel affine."""
    x, scale, bias = inputs
    shape, axes = _groups(attrs, x.type)
    per_group = shape[2]
    acc = statistics_dtype(attrs["stash_type"])

    def element_of(idx: Index) -> tuple[Expr, ...]:
        """The input (and output) index of view index `idx`."""
        return (idx[0], idx[1] * per_group + idx[2], *(idx[a] for a in range(3, len(shape))))

    def load(idx: Index, r: Results) -> Expr:
        return x.read(element_of(idx)).astype(acc)

    def value(idx: Index, r: Results) -> Expr:
        c = (idx[1] * per_group + idx[2],)
        return (load(idx, r) - r[0]) * (r[1] * scale.read(c).astype(acc)) + bias.read(c).astype(acc)

    stages = moments(load, acc, math.prod(shape[2:]), float(attrs["epsilon"]))
    element = storer(outputs[0], epilogue, element_of, value)
    return [reduction_kernel(ctx, "group_norm", shape, axes, stages, element=element)]


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


DEFINITIONS = [
    OpDef("InstanceNormalization", _instance_norm_rule, instance_normalization,
          row_reduction_lowerings(instance_normalization_template, _spatial),
          attrs={"epsilon": 1e-5}, kind=OPAQUE, num_inputs=(3, 3)),
    OpDef("GroupNormalization", _group_norm_rule, group_normalization,
          row_reduction_lowerings(group_normalization_template, _groups),
          attrs={"num_groups": REQUIRED, "epsilon": 1e-5, "stash_type": "float32"}, kind=OPAQUE,
          num_inputs=(3, 3)),
    OpDef("BatchNormalization", _batch_norm_rule, batch_norm, computed(batch_norm_compute),
          attrs={"epsilon": 1e-5}, kind=BROADCAST, num_inputs=(5, 5)),
]  # fmt: skip
