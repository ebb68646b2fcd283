"""Resize (ONNX Resize and Upsample): nearest, linear and cubic interpolation over any axes.

The frontend resolves everything static: `sizes` is the output shape, `scales` the per-axis scale
that the coordinate transformation uses (as given, or sizes / input dims), `roi` the per-axis
[starts..., ends...] of tf_crop_and_resize. Interpolation is separable, so the reference resizes
one axis at a time from per-axis index and weight tables (`axis_taps`), which kernels can share.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.lowering import Attrs
from tvmc.ops.registry import REQUIRED

RESIZE_ATTRS = {
    "sizes": REQUIRED,
    "scales": REQUIRED,
    "mode": "nearest",
    "coordinate_transformation_mode": "half_pixel",
    "nearest_mode": "round_prefer_floor",
    "cubic_coeff_a": -0.75,
    "exclude_outside": 0,
    "extrapolation_value": 0.0,
    "roi": None,
}
MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nearest",
    "tf_crop_and_resize",
)
# "simple" is Resize-10's and Upsample's rule (as onnxruntime): ceil when downsampling, else floor.
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")

_f32 = np.float32


def source_coordinates(
    mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float] = (0.0, 1.0)
) -> np.ndarray:
    """Input coordinate of each output index along one axis, in float32 as onnxruntime does."""
    x = np.arange(out_len, dtype=_f32)
    s, n_in, n_out = _f32(scale), _f32(in_len), _f32(out_len)
    half = _f32(0.5)
    if mode == "half_pixel":
        return (x + half) / s - half
    if mode == "half_pixel_symmetric":
        adjustment = n_out / (s * n_in)
        offset = n_in / _f32(2) * (_f32(1) - adjustment)
        return offset + (x + half) / s - half
    if mode == "pytorch_half_pixel":
        return (x + half) / s - half if out_len > 1 else np.zeros_like(x)
    if mode == "align_corners":
        return x * (n_in - 1) / (n_out - 1) if out_len > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / s
    if mode == "tf_half_pixel_for_nearest":
        return (x + half) / s
    if mode == "tf_crop_and_resize":
        start, end = _f32(roi[0]), _f32(roi[1])
        if out_len > 1:
            return start * (n_in - 1) + x * (end - start) * (n_in - 1) / (n_out - 1)
        return np.full_like(x, _f32(0.5) * (start + end) * (n_in - 1))
    raise ValueError(f"unknown coordinate_transformation_mode {mode!r}")


def _nearest(x: np.ndarray, mode: str, downsampling: bool) -> np.ndarray:
    x = x.astype(np.float64)  # exact: float32 x plus 0.5 cannot round here
    if mode == "round_prefer_floor":
        return np.where(x - np.floor(x) == 0.5, np.floor(x), np.floor(x + 0.5))
    if mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if mode == "floor" or (mode == "simple" and not downsampling):
        return np.floor(x)
    return np.ceil(x)


def _cubic_weights(r: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution weights of taps at offsets -1, 0, 1, 2 from floor(x)."""
    d = np.stack([r + 1, r, 1 - r, 2 - r], axis=-1)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, far)


def axis_taps(
    attrs: Attrs, axis: int, in_len: int
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(indices [out, taps], weights [out, taps] or None for nearest, extrapolated mask or None)."""
    out_len, scale, ndim = attrs["sizes"][axis], attrs["scales"][axis], len(attrs["sizes"])
    ctm = attrs["coordinate_transformation_mode"]
    roi = attrs["roi"]
    span = (roi[axis], roi[axis + ndim]) if roi is not None else (0.0, 1.0)
    x = source_coordinates(ctm, out_len, in_len, scale, span)
    outside = ((x < 0) | (x > in_len - 1)) if ctm == "tf_crop_and_resize" else None
    last = max(in_len - 1, 0)
    if attrs["mode"] == "nearest":
        index = _nearest(x, attrs["nearest_mode"], scale < 1)
        return np.clip(index, 0, last).astype(np.intp)[:, None], None, outside
    x = x.astype(np.float64)
    if attrs["mode"] == "linear":
        x = np.clip(x, 0, last)
        base = np.floor(x)
        ratio = (x - base)[:, None]
        index = base[:, None] + np.arange(2)
        weights = np.concatenate([1 - ratio, ratio], axis=1)
    else:
        base = np.floor(x)
        index = base[:, None] + np.arange(-1, 3)
        weights = _cubic_weights(x - base, attrs["cubic_coeff_a"])
        if attrs["exclude_outside"]:
            weights = np.where((index < 0) | (index > last), 0.0, weights)
            weights /= weights.sum(axis=1, keepdims=True)
    return np.clip(index, 0, last).astype(np.intp), weights, outside


def resize_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    sizes, scales, roi = attrs["sizes"], attrs["scales"], attrs["roi"]
    if len(sizes) != x.ndim or len(scales) != x.ndim:
        raise ValueError(f"Resize needs one size and one scale per axis of {x}")
    if any(s < 0 for s in sizes) or any(s <= 0 for s in scales):
        raise ValueError(f"Resize sizes {list(sizes)} / scales {list(scales)} must be positive")
    for key, valid in (
        ("mode", MODES),
        ("coordinate_transformation_mode", COORDINATE_MODES),
        ("nearest_mode", NEAREST_MODES),
    ):
        if attrs[key] not in valid:
            raise ValueError(f"Resize {key} {attrs[key]!r} is not one of {list(valid)}")
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        if roi is None or len(roi) != 2 * x.ndim:
            raise ValueError(f"tf_crop_and_resize needs an roi of {2 * x.ndim} values")
    if attrs["mode"] != "nearest" and x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"Resize {attrs['mode']} needs a float input, got {x.dtype}")
    if x.size == 0 and any(sizes):
        raise ValueError(f"Resize of an empty tensor {x} to {list(sizes)}")
    return [TensorType(tuple(sizes), x.dtype)]


def _unchanged(attrs: Attrs, axis: int, in_len: int) -> bool:
    """Every output index samples exactly its own input index (any mode gives the input back)."""
    ctm = attrs["coordinate_transformation_mode"]
    if attrs["sizes"][axis] != in_len or ctm == "tf_crop_and_resize":
        return False
    x = source_coordinates(ctm, in_len, in_len, attrs["scales"][axis])
    return bool(np.array_equal(x, np.arange(in_len)))


def resize(attrs, x):
    """One axis at a time: gather the taps of each output index, then weight and sum them."""
    out = x
    for axis in range(x.ndim):
        if _unchanged(attrs, axis, x.shape[axis]):
            continue
        index, weights, outside = axis_taps(attrs, axis, x.shape[axis])
        if weights is None:
            out = np.take(out, index[:, 0], axis=axis)
        else:  # one gather per tap keeps intermediates the size of the output
            trailing = (1,) * (x.ndim - axis - 1)
            src = out.astype(np.float64)
            out = sum(
                np.take(src, index[:, t], axis=axis) * weights[:, t].reshape((-1, *trailing))
                for t in range(index.shape[1])
            )
        if outside is not None:
            mask = outside.reshape((-1,) + (1,) * (x.ndim - axis - 1))
            out = np.where(mask, attrs["extrapolation_value"], out)
    return out.astype(x.dtype)
