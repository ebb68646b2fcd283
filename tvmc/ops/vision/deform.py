"""DeformableColumns: the im2col of a deformable convolution (ONNX DeformConv), a compute.

Row c * K + k of the columns (K = kH * kW taps) holds channel c sampled at tap k of every output
position, moved by its learned offset: bilinear, 0 outside the image (torchvision's rule), times
the tap's mask. The frontend multiplies the columns by the weights with one grouped MatMul, so
each sample is computed once, not once per output channel. 2-D, as ONNX's reference and
onnxruntime.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, const, floor, select
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef
from tvmc.ops.registry import REQUIRED
from tvmc.ops.tensor.common import clamp

DEFORM_ATTRS = {"kernel_shape": REQUIRED, "strides": REQUIRED, "pads": REQUIRED,
                "dilations": REQUIRED, "offset_group": 1}  # fmt: skip


def output_size(attrs: Attrs, size: tuple[int, int]) -> tuple[int, int]:
    k, s, d, p = attrs["kernel_shape"], attrs["strides"], attrs["dilations"], attrs["pads"]
    return tuple((size[a] + p[a] + p[a + 2] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in (0, 1))


def deform_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, offset = types[:2]
    if x.ndim != 4 or x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"DeformConv takes a float (N, C, H, W) input, got {x}")
    taps, groups = int(np.prod(attrs["kernel_shape"])), attrs["offset_group"]
    out = output_size(attrs, x.shape[2:])
    if min(out) < 1 or groups < 1 or x.shape[1] % groups:
        raise ValueError(f"DeformConv window or offset_group {groups} does not fit input {x}")
    expected = (x.shape[0], groups * taps * 2, *out)
    if offset.shape != expected or offset.dtype != x.dtype:
        raise ValueError(f"DeformConv offset {offset} must be {x.dtype}{list(expected)}")
    if len(types) > 2:
        mask = types[2]
        if mask.shape != (x.shape[0], groups * taps, *out) or mask.dtype != x.dtype:
            raise ValueError(f"DeformConv mask {mask} must be {x.dtype}[{x.shape[0]}, "
                             f"{groups * taps}, {out[0]}, {out[1]}]")  # fmt: skip
    return [TensorType((x.shape[0], x.shape[1] * taps, *out), x.dtype)]


def _bilinear(image: np.ndarray, h: np.ndarray, w: np.ndarray) -> np.ndarray:
    """image (N, C, H, W) at positions h, w (N, ...): (N, C, ...), 0 outside."""
    height, width = image.shape[2:]
    h0, w0 = np.floor(h), np.floor(w)
    lh, lw = h - h0, w - w0
    n = np.arange(image.shape[0]).reshape((-1,) + (1,) * (h.ndim - 1))
    total = 0
    for dy, wy in ((0, 1 - lh), (1, lh)):
        for dx, wx in ((0, 1 - lw), (1, lw)):
            y, x = h0 + dy, w0 + dx
            inside = (y >= 0) & (y <= height - 1) & (x >= 0) & (x <= width - 1)
            yi, xi = (
                np.clip(y, 0, height - 1).astype(np.intp),
                np.clip(x, 0, width - 1).astype(np.intp),
            )
            value = np.moveaxis(image[n, :, yi, xi], -1, 1)  # (N, C, ...)
            total = total + np.where(inside, wy * wx, 0)[:, None] * value
    return total


def deformable_columns(attrs, x, offset, mask=None):
    """Every channel at every tap of every output position, moved by its offset, masked."""
    n, c = x.shape[:2]
    (kh, kw), groups = attrs["kernel_shape"], attrs["offset_group"]
    oh, ow = offset.shape[2:]
    work = np.float64 if x.dtype == np.float64 else np.float32
    s, d, p = attrs["strides"], attrs["dilations"], attrs["pads"]
    base_h = (np.arange(oh) * s[0] - p[0])[None, :, None] + (np.arange(kh) * d[0])[:, None, None]
    base_w = (np.arange(ow) * s[1] - p[1])[None, None, :] + (np.arange(kw) * d[1])[:, None, None]
    base_h = np.repeat(base_h, kw, axis=0)  # (K, oh, 1): tap k = (k // kw, k % kw)
    base_w = np.tile(base_w, (kh, 1, 1))  # (K, 1, ow)
    moves = offset.astype(work).reshape(n, groups, kh * kw, 2, oh, ow)
    masks = (mask.astype(work).reshape(n, groups, kh * kw, oh, ow) if mask is not None
             else np.ones((n, groups, kh * kw, oh, ow), work))  # fmt: skip
    per_group = c // groups
    out = np.empty((n, c, kh * kw, oh, ow), work)
    for g in range(groups):
        h = base_h.astype(work) + moves[:, g, :, 0]
        w = base_w.astype(work) + moves[:, g, :, 1]
        image = x[:, g * per_group : (g + 1) * per_group].astype(work)
        out[:, g * per_group : (g + 1) * per_group] = _bilinear(image, h, w) * masks[:, g, None]
    return out.reshape(n, c * kh * kw, oh, ow).astype(x.dtype)


def deformable_columns_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """The sample of one (channel, tap, position): 4 corners, each 0 outside the image."""
    x, offset = inputs[:2]
    mask = inputs[2] if len(inputs) > 2 else None
    (kh, kw), groups = attrs["kernel_shape"], attrs["offset_group"]
    taps, per_group = kh * kw, x.shape[1] // groups
    height, width = x.shape[2:]
    s, d, p = attrs["strides"], attrs["dilations"], attrs["pads"]
    work = "float64" if x.dtype == "float64" else "float32"

    def read(idx: Indices) -> Expr:
        n, row, i, j = idx
        c, k = row // taps, row % taps
        g = c // per_group if groups > 1 else const(0)
        move = g * (2 * taps) + k * 2
        h = (i * s[0] - p[0] + (k // kw) * d[0]).astype(work) + offset.read(
            (n, move, i, j)).astype(work)  # fmt: skip
        w = (j * s[1] - p[1] + (k % kw) * d[1]).astype(work) + offset.read(
            (n, move + 1, i, j)).astype(work)  # fmt: skip
        h0, w0 = floor(h), floor(w)
        lh, lw = h - h0, w - w0
        one, zero = literal(1, work), literal(0, work)
        total: Expr | None = None
        for dy, wy in ((0, one - lh), (1, lh)):
            for dx, wx in ((0, one - lw), (1, lw)):
                y, xx = h0 + dy if dy else h0, w0 + dx if dx else w0
                inside = ((y >= zero) & (y <= literal(height - 1, work)) & (xx >= zero)
                          & (xx <= literal(width - 1, work)))  # fmt: skip
                at = (n, c, clamp(y, 0, height - 1).astype("int32"),
                      clamp(xx, 0, width - 1).astype("int32"))  # fmt: skip
                term = select(inside, wy * wx, zero) * x.read(at).astype(work)
                total = term if total is None else total + term
        assert total is not None
        if mask is not None:
            total = total * mask.read((n, g * taps + k, i, j)).astype(work)
        return total.astype(x.dtype)

    return [read]
