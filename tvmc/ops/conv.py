"""Convolutions (Conv, ConvTranspose), the sliding-window helpers pools share, and the
BatchNormalization that usually follows a conv (the fold-batch-norm pass pairs them).

Normalized form: `kernel_shape`, `strides`, `dilations` and `pads` (begin values of every spatial
axis, then end values) are always explicit; the frontend resolves `auto_pad` and `output_shape`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tvmc.graph import TensorType
from tvmc.ops.common import FLOAT_DTYPES, same_dtype
from tvmc.ops.registry import BROADCAST, COMPLEX, REQUIRED, Attrs, register

WINDOW_ATTRS = {
    "kernel_shape": REQUIRED,
    "strides": REQUIRED,
    "pads": REQUIRED,
    "dilations": REQUIRED,
}


# ---- sliding-window helpers (shared with ops/pool.py and the frontend) ---------------------------
def check_window_attrs(op: str, attrs: Attrs, spatial: int) -> None:
    """ValueError unless the window attributes fit `spatial` spatial axes."""
    for key, length, least in (
        ("kernel_shape", spatial, 1),
        ("strides", spatial, 1),
        ("dilations", spatial, 1),
        ("pads", 2 * spatial, 0),
    ):
        value = attrs[key]
        if len(value) != length:
            raise ValueError(
                f"{op} {key} {list(value)} needs {length} values for {spatial} spatial axes"
            )
        if any(v < least for v in value):
            raise ValueError(f"{op} {key} {list(value)} must all be >= {least}")


def window_output_size(
    size: int,
    kernel: int,
    stride: int,
    dilation: int,
    pad_begin: int,
    pad_end: int,
    ceil_mode: bool = False,
) -> int:
    """Window positions along one axis; ceil mode drops windows that start in the end padding."""
    span = dilation * (kernel - 1) + 1
    room = size + pad_begin + pad_end - span
    if room < 0:
        return 0
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def window_output_shape(
    spatial_shape: Sequence[int], attrs: Attrs, ceil_mode: bool = False
) -> list[int]:
    """Window positions along every spatial axis, by the window attributes in `attrs`."""
    k, s, d, pads = attrs["kernel_shape"], attrs["strides"], attrs["dilations"], attrs["pads"]
    n = len(spatial_shape)
    return [
        window_output_size(spatial_shape[i], k[i], s[i], d[i], pads[i], pads[i + n], ceil_mode)
        for i in range(n)
    ]


def same_pads(size: int, kernel: int, stride: int, dilation: int, mode: str) -> tuple[int, int]:
    """(begin, end) padding of auto_pad SAME_UPPER/SAME_LOWER: output size ceil(size / stride)."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + dilation * (kernel - 1) + 1 - size)
    small, large = total // 2, total - total // 2
    return (small, large) if mode == "SAME_UPPER" else (large, small)


def pad_spatial(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value=0) -> np.ndarray:
    """`x` padded (or, for negative amounts, cropped) on its trailing spatial axes."""
    lead = x.ndim - len(begin)
    crop = tuple(
        slice(max(-b, 0), x.shape[lead + i] - max(-e, 0))
        for i, (b, e) in enumerate(zip(begin, end))
    )
    x = x[(slice(None),) * lead + crop]
    widths = [(0, 0)] * lead + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if not any(w for pair in widths for w in pair):
        return x
    return np.pad(x, widths, constant_values=value)


def windows(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
) -> np.ndarray:
    """A view (..., *out, *kernel) of every window of an already padded `x` (no copy)."""
    lead = x.ndim - len(kernel)
    spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilations))
    view = sliding_window_view(x, spans, axis=tuple(range(lead, x.ndim)))
    index = (slice(None),) * lead
    index += tuple(slice(0, o * s, s) for o, s in zip(out_shape, strides))
    index += tuple(slice(None, None, d) for d in dilations)
    return view[index]


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
def _conv_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
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


@register("Conv", _conv_rule, attrs={**WINDOW_ATTRS, "group": 1}, kind=COMPLEX, num_inputs=(2, 3))
def conv(attrs, x, w, bias=None):
    """N-d grouped convolution with an optional per-output-channel bias."""
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


def _conv_transpose_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
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


@register(
    "ConvTranspose",
    _conv_transpose_rule,
    attrs={**WINDOW_ATTRS, "output_padding": REQUIRED, "group": 1},
    kind=COMPLEX,
    num_inputs=(2, 3),
)
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


# ---- normalization used after conv ---------------------------------------------------------------
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


@register(
    "BatchNormalization", _batch_norm_rule, attrs={"epsilon": 1e-5}, kind=BROADCAST, num_inputs=5
)
def batch_norm(attrs, x, scale, bias, mean, var):
    """Inference-mode batch normalization with the running statistics."""
    multiplier, offset = batch_norm_affine(scale, bias, mean, var, attrs["epsilon"])
    shape = (-1, *([1] * (x.ndim - 2)))
    return (x * multiplier.reshape(shape) + offset.reshape(shape)).astype(x.dtype)
