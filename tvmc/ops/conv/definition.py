"""Conv and ConvTranspose: shape rules, numpy references and FLOPs (any rank, groups, strides,
dilations, pads, bias). Their lowerings: tvmc.ops.conv.cpu and tvmc.ops.conv.gpu.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import FLOAT_DTYPES, same_dtype
from tvmc.ops.registry import Attrs
from tvmc.ops.window import check_window_attrs, pad_spatial, window_output_shape, windows


def _acc_dtype(dtype: np.dtype) -> np.dtype:
    # float16 matmul in numpy is slow and rounds every partial sum: accumulate in float32
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def conv_nd(
    x: np.ndarray,
    w: np.ndarray,
    pads: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    group: int,
) -> np.ndarray:
    """Grouped N-d convolution as im2col + one batched matmul over groups (no pixel loops)."""
    n, c = x.shape[:2]
    m, cg, *kernel = w.shape
    spatial = len(kernel)
    acc = _acc_dtype(x.dtype)
    xp = pad_spatial(x.astype(acc, copy=False), pads[:spatial], pads[spatial:])
    out_shape = [
        (p - d * (k - 1) - 1) // s + 1
        for p, k, s, d in zip(xp.shape[2:], kernel, strides, dilations)
    ]
    win = windows(xp, kernel, strides, dilations, out_shape)  # (N, C, *O, *K)
    win = win.reshape(n, group, cg, *win.shape[2:])
    # (G, N, *O, Cg, *K): every row of the im2col matrix is one output pixel's receptive field
    perm = (1, 0, *range(3, 3 + spatial), 2, *range(3 + spatial, 3 + 2 * spatial))
    cols = win.transpose(perm).reshape(group, n * math.prod(out_shape), cg * math.prod(kernel))
    mg = m // group
    wg = w.astype(acc, copy=False).reshape(group, mg, cg * math.prod(kernel)).transpose(0, 2, 1)
    out = np.matmul(cols, wg)  # (G, N*O, Mg)
    out = out.reshape(group, n, math.prod(out_shape), mg).transpose(1, 0, 3, 2)
    return out.reshape(n, m, *out_shape).astype(x.dtype, copy=False)


def _bias(out: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    if bias is None:
        return out
    return out + bias.reshape(-1, *([1] * (out.ndim - 2))).astype(out.dtype)


def _check_conv_types(op: str, attrs: Attrs, types: list[TensorType], w_channels: int) -> None:
    """Checks shared by Conv and ConvTranspose; `w_channels`: the output channels of the weight."""
    x, w = types[0], types[1]
    dtype = same_dtype(types, op)
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"{op} needs a float input, got {dtype}")
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ValueError(
            f"{op} needs input (N, C, spatial...) and weight of the same rank >= 3, "
            f"got input {list(x.shape)} and weight {list(w.shape)}"
        )
    check_window_attrs(op, attrs, x.ndim - 2)
    if tuple(attrs["kernel_shape"]) != w.shape[2:]:
        raise ValueError(
            f"{op} kernel_shape {list(attrs['kernel_shape'])} differs from the weight's "
            f"spatial shape {list(w.shape[2:])}"
        )
    if attrs["group"] < 1:
        raise ValueError(f"{op} group must be >= 1, got {attrs['group']}")
    if len(types) == 3 and types[2].shape != (w_channels,):
        raise ValueError(f"{op} bias must have shape [{w_channels}], got {list(types[2].shape)}")


# ---- Conv ----------------------------------------------------------------------------------------
def conv_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, w = types[0], types[1]
    _check_conv_types("Conv", attrs, types, w.shape[0] if w.ndim else 0)
    group = attrs["group"]
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise ValueError(
            f"Conv input has {x.shape[1]} channels, but weight {list(w.shape)} with group "
            f"{group} needs {w.shape[1] * group} and output channels divisible by the group"
        )
    out = window_output_shape(x.shape[2:], attrs)
    pads = attrs["pads"]
    if min(out) < 1:
        raise ValueError(
            f"Conv kernel {list(attrs['kernel_shape'])} (dilations {list(attrs['dilations'])}) "
            f"does not fit the padded input {list(x.shape)} with pads {list(pads)}"
        )
    return [TensorType((x.shape[0], w.shape[0], *out), x.dtype)]


# A Conv attribute only the fold-channel-shuffle pass sets (models cannot: the frontend refuses
# attributes an op does not declare): the input's channels are read through a channel shuffle
# of this many groups, as ShuffleNet's Reshape -> Transpose -> Reshape would have moved them.
CHANNEL_SHUFFLE = "channel_shuffle"


def shuffled_channel(c, groups: int, channels: int):
    """The channel of the unshuffled tensor that channel `c` of the shuffled one holds (an int or
    a kernel IR expression): a shuffle of `groups` moves channel i * (C/g) + j to j * g + i."""
    return (c % groups) * (channels // groups) + c // groups


def conv(attrs, x, w, bias=None):
    """N-d grouped convolution with an optional per-output-channel bias (the input read through
    a channel shuffle where the fold-channel-shuffle pass set `channel_shuffle`)."""
    groups = attrs.get(CHANNEL_SHUFFLE, 1)
    if groups > 1:
        n, c, *spatial = x.shape
        x = x.reshape(n, groups, c // groups, *spatial).swapaxes(1, 2).reshape(x.shape)
    out = conv_nd(x, w, attrs["pads"], attrs["strides"], attrs["dilations"], attrs["group"])
    return _bias(out, bias)


# ---- ConvTranspose -------------------------------------------------------------------------------
def conv_transpose_output_size(
    size: int,
    kernel: int,
    stride: int,
    dilation: int,
    pad_begin: int,
    pad_end: int,
    output_padding: int,
) -> int:
    """Output length of a transposed convolution along one axis."""
    return stride * (size - 1) + output_padding + dilation * (kernel - 1) + 1 - pad_begin - pad_end


def conv_transpose_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, w = types[0], types[1]
    group = attrs["group"]
    _check_conv_types("ConvTranspose", attrs, types, w.shape[1] * group if w.ndim > 1 else 0)
    if x.shape[1] != w.shape[0] or w.shape[0] % group:
        raise ValueError(
            f"ConvTranspose input has {x.shape[1]} channels, but weight {list(w.shape)} needs "
            f"{w.shape[0]}, divisible by group {group}"
        )
    spatial = x.ndim - 2
    pads, output_padding = attrs["pads"], attrs["output_padding"]
    if len(output_padding) != spatial or min(output_padding) < 0:
        raise ValueError(
            f"ConvTranspose output_padding {list(output_padding)} needs {spatial} values >= 0"
        )
    k, s, d = attrs["kernel_shape"], attrs["strides"], attrs["dilations"]
    out = [
        conv_transpose_output_size(
            x.shape[2 + i], k[i], s[i], d[i], pads[i], pads[i + spatial], output_padding[i]
        )
        for i in range(spatial)
    ]
    if min(out) < 1:
        raise ValueError(f"ConvTranspose output shape {out} is empty: pads {list(pads)} too large")
    return [TensorType((x.shape[0], w.shape[1] * group, *out), x.dtype)]


def conv_transpose(attrs, x, w, bias=None):
    """Transposed conv = stride-1 conv of the zero-upsampled input with the flipped kernel."""
    c, mg, *kernel = w.shape
    spatial, group = len(kernel), attrs["group"]
    strides, dilations, pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    up = np.zeros((*x.shape[:2], *((n - 1) * s + 1 for n, s in zip(x.shape[2:], strides))), x.dtype)
    up[(slice(None), slice(None), *(slice(None, None, s) for s in strides))] = x
    full = [d * (k - 1) for k, d in zip(kernel, dilations)]
    begin = [f - p for f, p in zip(full, pads[:spatial])]
    end = [f - p + o for f, p, o in zip(full, pads[spatial:], attrs["output_padding"])]
    # weight (C, M/g, *K) -> (M, C/g, *K), per group, spatially flipped
    cg = c // group
    wt = w.reshape(group, cg, mg, *kernel).swapaxes(1, 2).reshape(group * mg, cg, *kernel)
    wt = wt[(slice(None), slice(None), *(slice(None, None, -1) for _ in kernel))]
    out = conv_nd(up, wt, (*begin, *end), (1,) * spatial, dilations, group)
    return _bias(out, bias)


# ---- FLOPs ---------------------------------------------------------------------------------------
def conv_flops(attrs: Attrs, inputs: list[TensorType], outputs: list[TensorType]) -> int:
    """Two per multiply-add: every output reads ICg x taps inputs."""
    return 2 * math.prod(inputs[1].shape[1:]) * outputs[0].size


def conv_transpose_flops(attrs: Attrs, inputs: list[TensorType], outputs: list[TensorType]) -> int:
    """Two per multiply-add: every input element meets (OC/group) x taps weights."""
    x, w = inputs[0], inputs[1]
    per_output = 2 * math.prod(w.shape[1:])
    return per_output * math.prod(x.shape) // max(x.shape[1], 1) * w.shape[1]


def _window_summary(attrs: Attrs, x: TensorType, out_channels: int) -> str:
    kernel = "x".join(map(str, attrs["kernel_shape"]))
    strides = tuple(attrs["strides"])
    stride = (
        ""
        if set(strides) == {1}
        else "/" + (str(strides[0]) if len(set(strides)) == 1 else "x".join(map(str, strides)))
    )
    group = int(attrs["group"])
    grouping = " dw" if group == x.shape[1] > 1 else (f" g{group}" if group > 1 else "")
    batch = f"{x.shape[0]}x" if x.shape[0] > 1 else ""
    size = "x".join(map(str, x.shape[2:]))
    return f"{kernel}{stride} {x.shape[1]}->{out_channels}{grouping} @{batch}{size}"


def conv_summary(attrs: Attrs, inputs: list[TensorType]) -> str:
    """Kernel/stride, channels in->out (groups), input size: "3x3/2 64->128 @56x56"."""
    return _window_summary(attrs, inputs[0], inputs[1].shape[0])


def conv_transpose_summary(attrs: Attrs, inputs: list[TensorType]) -> str:
    """As Conv's; the output channels are the weight's second dim times the groups."""
    return _window_summary(attrs, inputs[0], inputs[1].shape[1] * int(attrs["group"]))
