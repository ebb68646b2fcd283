"""Converters of the transformer blocks around attention: RotaryEmbedding, SwiGLU and
CausalConvWithState, each decomposed into our primitive ops (Gather, Slice, Concat, Mul,
Sigmoid, Conv, ...), which fuse into few kernels on every target.
"""

from __future__ import annotations

import numpy as np

from tvmc.errors import UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter
from tvmc.ops.common import FLOAT_DTYPES

_ACTIVATIONS = ("none", "silu", "swish")  # CausalConvWithState: swish is silu's other name


def _float_input(ctx: ConvertContext, node: OnnxNode) -> str:
    """The element type of the node's first input, which must be a float type."""
    dtype = ctx.type(node.inputs[0]).dtype
    if dtype not in FLOAT_DTYPES:
        raise UnsupportedModelError(f"{node.describe()}: element type {dtype} is not supported")
    return dtype


def _last_axis_slice(ctx: ConvertContext, x: str, start: int, stop: int, step: int = 1) -> str:
    """x[..., start:stop:step]."""
    shape = ctx.type(x).shape
    starts, ends, steps = [0] * len(shape), list(shape), [1] * len(shape)
    starts[-1], ends[-1], steps[-1] = start, stop, step
    return ctx.add("Slice", [x], {"starts": starts, "ends": ends, "steps": steps})[0]


@converter("RotaryEmbedding")
def RotaryEmbedding(ctx: ConvertContext, node: OnnxNode) -> None:
    """RoPE: the first rotary_embedding_dim features of each head turn by the angles of each
    token's position (cos/sin caches gathered by position_ids), as halves or interleaved pairs."""
    _float_input(ctx, node)
    x, cos, sin = node.inputs[:3]
    shape = ctx.type(x).shape
    if len(shape) == 4:  # [B, H, S, D]: one angle per (batch, token), broadcast over heads
        b, _, s, d = shape
        angles, work = (b, 1, s), x
    elif len(shape) == 3:  # [B, S, H*D], seen as [B, S, H, D]
        heads = node.attrs.get("num_heads", 0)
        b, s, hidden = shape
        if heads <= 0 or hidden % heads:
            raise ValueError(f"3-D input needs num_heads dividing its hidden size {hidden}, "
                             f"got num_heads={heads}")  # fmt: skip
        d = hidden // heads
        angles = (b, s, 1)
        (work,) = ctx.add("Reshape", [x], {"shape": (b, s, heads, d)})
    else:
        raise ValueError(f"input must be 3-D or 4-D, got shape {list(shape)}")
    rot = node.attrs.get("rotary_embedding_dim", 0) or d
    if rot % 2 or not 0 < rot <= d:
        raise ValueError(f"rotary_embedding_dim {rot} must be even and at most head size {d}")
    half = rot // 2
    cos, sin = (_angle_table(ctx, node, t, (b, s, half)) for t in (cos, sin))
    cos, sin = (ctx.add("Reshape", [t], {"shape": (*angles, half)})[0] for t in (cos, sin))
    interleaved = bool(node.attrs.get("interleaved", 0))
    if interleaved:  # pairs (x0, x1), (x2, x3), ...
        x1, x2 = _last_axis_slice(ctx, work, 0, rot, 2), _last_axis_slice(ctx, work, 1, rot, 2)
    else:  # halves
        x1, x2 = _last_axis_slice(ctx, work, 0, half), _last_axis_slice(ctx, work, half, rot)
    real = _sum_of_products(ctx, "Sub", (cos, x1), (sin, x2))
    imag = _sum_of_products(ctx, "Add", (sin, x1), (cos, x2))
    if interleaved:
        pair_shape = (*ctx.type(real).shape, 1)
        real, imag = (ctx.add("Reshape", [t], {"shape": pair_shape})[0] for t in (real, imag))
        (pairs,) = ctx.add("Concat", [real, imag], {"axis": len(pair_shape) - 1})
        (rotated,) = ctx.add("Reshape", [pairs], {"shape": (*pair_shape[:-2], rot)})
    else:
        (rotated,) = ctx.add("Concat", [real, imag], {"axis": len(ctx.type(real).shape) - 1})
    if rot < d:
        kept = _last_axis_slice(ctx, work, rot, d)
        (rotated,) = ctx.add("Concat", [rotated, kept], {"axis": len(ctx.type(kept).shape) - 1})
    ctx.add("Reshape", [rotated], {"shape": shape}, outputs=node.outputs[:1])


def _angle_table(ctx: ConvertContext, node: OnnxNode, cache: str,
                 want: tuple[int, int, int]) -> str:  # fmt: skip
    """A cos or sin cache as [B, S, rot/2]: gathered by position_ids, else given so."""
    positions = node.input(3)
    shape = ctx.type(cache).shape
    if positions:
        if len(shape) != 2 or shape[1] != want[2]:
            raise ValueError(f"caches must be [max_position, {want[2]}] with position_ids, "
                             f"got {list(shape)}")  # fmt: skip
        if ctx.type(positions).shape != want[:2]:
            raise ValueError(f"position_ids must be {list(want[:2])}, "
                             f"got {list(ctx.type(positions).shape)}")  # fmt: skip
        return ctx.add("Gather", [cache, positions], {"axis": 0})[0]
    if shape != want:
        raise ValueError(f"caches must be {list(want)} without position_ids, got {list(shape)}")
    return cache


def _sum_of_products(ctx: ConvertContext, op: str, *pairs: tuple[str, str]) -> str:
    """a*b op c*d."""
    (left,), (right,) = (ctx.add("Mul", list(pair)) for pair in pairs)
    return ctx.add(op, [left, right])[0]


@converter("SwiGLU")
def SwiGLU(ctx: ConvertContext, node: OnnxNode) -> None:
    """Y = A * Sigmoid(alpha * A) * B (Swish-gated linear unit); A and B of one shape."""
    dtype = _float_input(ctx, node)
    a, b = node.inputs[:2]
    if ctx.type(a).shape != ctx.type(b).shape:
        raise ValueError(f"A {list(ctx.type(a).shape)} and B {list(ctx.type(b).shape)} must "
                         "have one shape (SwiGLU does not broadcast)")  # fmt: skip
    alpha = float(node.attrs.get("alpha", 1.0))
    scaled = a
    if alpha != 1.0:
        (scaled,) = ctx.add("Mul", [a, ctx.add_const(np.array(alpha, dtype=dtype))])
    (gate,) = ctx.add("Sigmoid", [scaled])
    (swish,) = ctx.add("Mul", [a, gate])
    ctx.add("Mul", [swish, b], outputs=node.outputs[:1])


@converter("CausalConvWithState")
def CausalConvWithState(ctx: ConvertContext, node: OnnxNode) -> None:
    """A depthwise 1-D conv over past_state ++ input (zeros without a past), optionally SiLU;
    present_state is the last k-1 positions of that padded input."""
    dtype = _float_input(ctx, node)
    activation = node.attrs.get("activation", "none")
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {list(_ACTIVATIONS)}, got {activation!r}")
    x, weight, bias, past = node.inputs[0], node.inputs[1], node.input(2), node.input(3)
    shape, wshape = ctx.type(x).shape, ctx.type(weight).shape
    if len(shape) != 3 or len(wshape) != 3 or wshape[:2] != (shape[1], 1) or wshape[2] < 1:
        raise ValueError(f"input must be [batch, channels, length] and weight [channels, 1, k], "
                         f"got {list(shape)} and {list(wshape)}")  # fmt: skip
    b, c, length = shape
    k = wshape[2]
    if past:
        if ctx.type(past).shape != (b, c, k - 1):
            raise ValueError(f"past_state must be {[b, c, k - 1]}, "
                             f"got {list(ctx.type(past).shape)}")  # fmt: skip
    else:
        past = ctx.add_const(np.zeros((b, c, k - 1), dtype=dtype))
    (padded,) = ctx.add("Concat", [past, x], {"axis": 2}) if k > 1 else (x,)
    attrs = {"kernel_shape": [k], "strides": [1], "pads": [0, 0], "dilations": [1], "group": c}
    conv_out = None if activation != "none" else node.outputs[:1]
    (y,) = ctx.add("Conv", [padded, weight, *([bias] if bias else [])], attrs, outputs=conv_out)
    if activation != "none":
        (gate,) = ctx.add("Sigmoid", [y])
        ctx.add("Mul", [y, gate], outputs=node.outputs[:1])
    if len(node.outputs) > 1 and node.outputs[1]:
        present = _last_axis_slice(ctx, padded, length, length + k - 1)
        ctx.add("Identity", [present], outputs=[node.outputs[1]])
