"""Normalizations: Softmax, LogSoftmax, Hardmax, LayerNormalization, InstanceNormalization.

Softmax-like ops take `axes`, a sorted tuple of non-negative axes normalized together: one axis
for ONNX opset >= 13, every dim from `axis` to the end for the older "coerce to 2-D" semantics,
so neither form needs a Reshape. LayerNormalization and InstanceNormalization stay whole: a
row-wise kernel (reduce, then scale in the same pass) is simpler and faster than fusing the
reduce-then-broadcast chain they would lower to.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import FLOAT_DTYPES, broadcasts_to, normalize_axis, same_dtype
from tvmc.ops.reduce import reduce_axes
from tvmc.ops.registry import OPAQUE, REQUIRED, Attrs, register


def _float_input(op: str, x: TensorType) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{op} needs a floating-point input, got {x.dtype}")


def _softmax_rule(op: str):
    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        x = types[0]
        _float_input(op, x)
        if not attrs["axes"]:
            raise ValueError(f"{op} needs at least one axis")
        reduce_axes(attrs, x.ndim, op)
        return [x]

    return rule


def _wide(x: np.ndarray) -> np.ndarray:
    """float64 working precision: these are references, and exp/log/rsqrt lose bits in float32."""
    return x.astype(np.float64)


_SOFTMAX_ATTRS = {"axes": REQUIRED}


@register("Softmax", _softmax_rule("Softmax"), attrs=_SOFTMAX_ATTRS, kind=OPAQUE)
def softmax(attrs, x):
    """exp(x) / sum(exp(x)) over `axes` (max-subtracted for range)."""
    axes = reduce_axes(attrs, x.ndim, "Softmax")
    e = np.exp(_wide(x) - np.max(x, axis=axes, keepdims=True))
    return (e / np.sum(e, axis=axes, keepdims=True)).astype(x.dtype)


@register("LogSoftmax", _softmax_rule("LogSoftmax"), attrs=_SOFTMAX_ATTRS, kind=OPAQUE)
def log_softmax(attrs, x):
    """x - log(sum(exp(x))) over `axes` (max-subtracted for range)."""
    axes = reduce_axes(attrs, x.ndim, "LogSoftmax")
    shifted = _wide(x) - np.max(x, axis=axes, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axes, keepdims=True))).astype(x.dtype)


@register("Hardmax", _softmax_rule("Hardmax"), attrs=_SOFTMAX_ATTRS, kind=OPAQUE)
def hardmax(attrs, x):
    """One-hot of the first largest element over `axes` (taken together, row-major)."""
    axes = reduce_axes(attrs, x.ndim, "Hardmax")
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, rest + list(axes))  # reduced dims last, then one flat row
    rows = moved.reshape(moved.shape[: len(rest)] + (-1,))
    onehot = np.zeros_like(rows)
    np.put_along_axis(onehot, np.argmax(rows, axis=-1)[..., None], 1, axis=-1)
    return np.transpose(onehot.reshape(moved.shape), np.argsort(rest + list(axes)))


# ---- LayerNormalization / InstanceNormalization ------------------------------------------------
def _layer_norm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x = types[0]
    _float_input("LayerNormalization", x)
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
    wide = _wide(x)
    mean = np.mean(wide, axis=axes, keepdims=True)
    var = np.mean(np.square(wide - mean), axis=axes, keepdims=True)
    return (wide - mean) / np.sqrt(var + epsilon)


@register(
    "LayerNormalization",
    _layer_norm_rule,
    attrs={"axis": REQUIRED, "epsilon": 1e-5},
    kind=OPAQUE,
    num_inputs=(2, 3),
)
def layer_normalization(attrs, x, scale, bias=None):
    """(x - mean) / sqrt(var + epsilon) * scale + bias over the dims from `axis` to the end."""
    axis = normalize_axis(attrs["axis"], x.ndim)
    y = _normalize(x, tuple(range(axis, x.ndim)), attrs["epsilon"]) * scale
    return (y if bias is None else y + bias).astype(x.dtype)


def _instance_norm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, scale, bias = types
    _float_input("InstanceNormalization", x)
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


@register(
    "InstanceNormalization",
    _instance_norm_rule,
    attrs={"epsilon": 1e-5},
    kind=OPAQUE,
    num_inputs=3,
)
def instance_normalization(attrs, x, scale, bias):
    """Per sample and channel, normalize over the spatial dims, then scale and shift per channel."""
    y = _normalize(x, tuple(range(2, x.ndim)), attrs["epsilon"])
    per_channel = (-1,) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(per_channel) + bias.reshape(per_channel)).astype(x.dtype)
