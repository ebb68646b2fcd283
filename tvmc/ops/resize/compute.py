"""Compute of Resize: per-axis source coordinate, taps and weights, computed in the expression.

A compute cannot carry index or weight tables, so each resized axis recomputes its coordinate
from the output index with the float32 operations of `definition.source_coordinates`, in the same
order, so nearest indices agree bit for bit with the reference. The weighted sum nests axis by
axis (the first axis innermost), as the reference interpolates one axis at a time.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, IntImm, ceil, floor, maximum, minimum, select
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef
from tvmc.ops.resize.definition import source_coordinates

_f32 = np.float32
Tap = tuple[Expr, Expr | None]  # (input index, weight or None when the axis is not weighted)


def identity_axis(attrs: Attrs, axis: int, in_len: int) -> bool:
    """Whether every output index on `axis` samples exactly its own input index.

    Then every mode returns the input element (nearest rounds to it; linear and cubic weights
    are exactly 0 and 1), and no coordinate falls outside, so the axis needs no taps at all:
    also in tf_crop_and_resize, whose batch and channel axes would otherwise multiply the taps.
    """
    if attrs["sizes"][axis] != in_len:
        return False
    roi, ndim = attrs["roi"], len(attrs["sizes"])
    span = (roi[axis], roi[axis + ndim]) if roi is not None else (0.0, 1.0)
    ctm = attrs["coordinate_transformation_mode"]
    x = source_coordinates(ctm, in_len, in_len, attrs["scales"][axis], span)
    return bool(np.array_equal(x, np.arange(in_len)))


def resized_axes(attrs: Attrs, shape: tuple[int, ...]) -> list[int]:
    """The axes an input of `shape` is resized on (`identity_axis` leaves the others out)."""
    return [a for a in range(len(shape)) if not identity_axis(attrs, a, shape[a])]


def source_coordinate(attrs: Attrs, axis: int, i: Expr, in_len: int) -> Expr:
    """The float32 input coordinate of output index `i` on `axis` (`source_coordinates`)."""
    mode = attrs["coordinate_transformation_mode"]
    out_len, ndim = attrs["sizes"][axis], len(attrs["sizes"])
    s, n_in, n_out = _f32(attrs["scales"][axis]), _f32(in_len), _f32(out_len)

    def f(value: float | np.floating) -> Expr:
        return literal(_f32(value), "float32")

    x, half = i.astype("float32"), f(0.5)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        if mode == "pytorch_half_pixel" and out_len <= 1:
            return f(0)
        return (x + half) / f(s) - half
    if mode == "half_pixel_symmetric":
        adjustment = n_out / (s * n_in)
        offset = n_in / _f32(2) * (_f32(1) - adjustment)
        return f(offset) + (x + half) / f(s) - half
    if mode == "align_corners":
        return x * f(n_in - 1) / f(n_out - 1) if out_len > 1 else f(0)
    if mode == "asymmetric":
        return x / f(s)
    if mode == "tf_half_pixel_for_nearest":
        return (x + half) / f(s)
    if mode == "tf_crop_and_resize":
        roi = attrs["roi"]
        start, end = _f32(roi[axis]), _f32(roi[axis + ndim])
        if out_len <= 1:
            return f(_f32(0.5) * (start + end) * (n_in - 1))
        return f(start * (n_in - 1)) + x * f(end - start) * f(n_in - 1) / f(n_out - 1)
    raise ValueError(f"unknown coordinate_transformation_mode {mode!r}")


def _index(position: Expr, last: int) -> Expr:
    """A float position clamped to [0, last], then converted (so the cast never overflows)."""
    zero, top = literal(0, position.dtype), literal(last, position.dtype)
    return minimum(maximum(position, zero), top).astype("int32")


def _nearest(attrs: Attrs, axis: int, x: Expr, last: int) -> list[Tap]:
    # float64: x + 0.5 is exact there, so ties and floors match the reference's
    x = x.astype("float64")
    mode = attrs["nearest_mode"]
    if mode == "simple":  # Resize-10/Upsample: ceil when downsampling, else floor
        mode = "ceil" if attrs["scales"][axis] < 1 else "floor"
    rounded = {
        "round_prefer_floor": lambda: select(
            (x - floor(x)).eq(literal(0.5, x.dtype)), floor(x), floor(x + 0.5)
        ),
        "round_prefer_ceil": lambda: floor(x + 0.5),
        "floor": lambda: floor(x),
        "ceil": lambda: ceil(x),
    }[mode]()
    return [(_index(rounded, last), None)]


def _linear(attrs: Attrs, x: Expr, last: int, work: str) -> list[Tap]:
    x = minimum(maximum(x, literal(0, x.dtype)), literal(last, x.dtype))
    base = floor(x)
    ratio = (x - base).astype(work)  # exact: the fraction bits of x
    return [
        (_index(base, last), literal(1, work) - ratio),
        (_index(base + 1.0, last), ratio),
    ]


def _cubic(attrs: Attrs, x: Expr, last: int, work: str) -> list[Tap]:
    a = attrs["cubic_coeff_a"]
    base = floor(x)
    r = (x - base).astype(work)
    one, two = literal(1, work), literal(2, work)

    def near(d: Expr) -> Expr:  # |d| <= 1
        return (literal(a + 2, work) * d - literal(a + 3, work)) * d * d + one

    def far(d: Expr) -> Expr:  # 1 < |d| < 2; both forms are 0 at d = 1 and far is 0 at 2
        return ((literal(a, work) * d - literal(5 * a, work)) * d + literal(8 * a, work)) * d - (
            literal(4 * a, work)
        )

    weights = [far(r + one), near(r), near(one - r), far(two - r)]
    offsets = (-1.0, 0.0, 1.0, 2.0)
    if attrs["exclude_outside"]:
        zero = literal(0, work)
        for k, off in enumerate(offsets):
            tap = base + off
            inside = (tap >= literal(0, tap.dtype)) & (tap <= literal(last, tap.dtype))
            weights[k] = select(inside, weights[k], zero)
    return [(_index(base + off, last), w) for off, w in zip(offsets, weights)]


def _normalizer(attrs: Attrs, taps: list[Tap]) -> Expr | None:
    """The sum of the weights when exclude_outside dropped some: the axis's sum divides by it
    once, rather than every weight (expressions are trees: each use is emitted again)."""
    if attrs["mode"] != "cubic" or not attrs["exclude_outside"]:
        return None
    weights = [w for _, w in taps if w is not None]
    return weights[0] + weights[1] + weights[2] + weights[3]


def axis_taps(attrs: Attrs, axis: int, i: Expr, in_len: int, work: str) -> list[Tap]:
    """The taps of output index `i` on `axis` (one unweighted tap for nearest)."""
    x = source_coordinate(attrs, axis, i, in_len)
    last = max(in_len - 1, 0)
    if attrs["mode"] == "nearest":
        return _nearest(attrs, axis, x, last)
    if attrs["mode"] == "linear":
        return _linear(attrs, x, last, work)
    return _cubic(attrs, x, last, work)


TAPS = {"nearest": 1, "linear": 2, "cubic": 4}  # input elements read per output, per resized axis


def resize_element_cost(attrs: Attrs, input_types: list[TensorType]) -> int:
    """Input elements one output element reads (each a gather: its offsets are computed), the
    taps of every resized axis multiplied: a bilinear upsample's element costs four copies'."""
    return TAPS[attrs["mode"]] ** len(resized_axes(attrs, input_types[0].shape))


def interpolate(
    attrs: Attrs,
    axes: list[int],
    taps: dict[int, list[Tap]],
    idx: Indices,
    leaf: Accessor,
    work: str,
) -> Expr:
    """The sum over the taps of `axes` (the last outermost, the first innermost, as the
    reference interpolates one axis at a time) of their weights times `leaf` at `idx` with
    those axes' tapped indices; weighed in `work`."""
    chosen = list(idx)

    def over(k: int) -> Expr:  # axes[:k + 1] still to choose
        if k < 0:
            return leaf(tuple(chosen))
        axis = axes[k]
        total: Expr | None = None
        for index, weight in taps[axis]:
            chosen[axis] = index
            inner = over(k - 1)
            if weight is not None:
                inner = inner.astype(work) * weight
            total = inner if total is None else total + inner
        assert total is not None
        norm = _normalizer(attrs, taps[axis])
        return total if norm is None else total / norm

    return over(len(axes) - 1)


def resize_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """Sum over every axis's taps of the product of weights times the tapped input element."""
    (x,) = inputs
    dtype = x.dtype
    work = "float64" if dtype == "float64" else "float32"  # float16 interpolates in float32
    resized = resized_axes(attrs, x.shape)
    crop = attrs["coordinate_transformation_mode"] == "tf_crop_and_resize"

    def read(idx: Indices) -> Expr:
        taps = {a: axis_taps(attrs, a, idx[a], x.shape[a], work) for a in resized}
        value = interpolate(attrs, resized, taps, idx, x.read, work).astype(dtype)
        if crop:
            outside = _outside(attrs, idx, x.shape, resized)
            value = select(outside, literal(attrs["extrapolation_value"], dtype), value)
        return value

    return [read]


def _outside(attrs: Attrs, idx: Indices, shape: tuple[int, ...], resized: list[int]) -> Expr:
    """tf_crop_and_resize: whether any axis's coordinate falls outside [0, in_len - 1]."""
    cond: Expr = IntImm(0, "bool")
    for a in resized:
        x = source_coordinate(attrs, a, idx[a], shape[a])
        out = (x < literal(0, "float32")) | (x > literal(shape[a] - 1, "float32"))
        cond = out if isinstance(cond, IntImm) else cond | out
    return cond
