"""GridSample: X sampled at the normalized positions of a grid (spatial transformers, optical
flow warping), N-D, nearest/linear/cubic, zeros/border/reflection padding; a compute.

Positions follow PyTorch's grid_sample, as onnxruntime and the ONNX reference do: the grid holds
(x, y[, z]), the last spatial axis first, in [-1, 1]. A position outside the padding bounds is
first clamped (border) or reflected (reflection) into them, except in cubic mode, where only its
taps are (as in PyTorch and onnxruntime; the ONNX reference clamps the position too, which only
changes border padding). Each tap outside the input then reads 0 (zeros), the nearest edge
element (border) or its mirror image (reflection).
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, IntImm, floor, round_even, select
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef
from tvmc.ops.tensor.common import clamp

GRID_SAMPLE_ATTRS = {"mode": "linear", "padding_mode": "zeros", "align_corners": 0}
MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_A = -0.75  # PyTorch's bicubic coefficient


def grid_sample_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, grid = types
    k = x.ndim - 2
    if k < 1:
        raise ValueError(f"GridSample needs an input of rank >= 3 (N, C, spatial...), got {x}")
    if grid.ndim != x.ndim or grid.shape[0] != x.shape[0] or grid.shape[-1] != k:
        raise ValueError(
            f"GridSample grid {list(grid.shape)} must be (N, out spatial..., {k}) for input "
            f"{list(x.shape)}"
        )
    if x.dtype not in FLOAT_DTYPES or grid.dtype not in FLOAT_DTYPES:
        raise ValueError(f"GridSample takes float input and grid, got {x.dtype}, {grid.dtype}")
    if attrs["mode"] not in MODES:
        raise ValueError(f"GridSample mode {attrs['mode']!r} is not one of {list(MODES)}")
    if attrs["padding_mode"] not in PADDING_MODES:
        raise ValueError(
            f"GridSample padding_mode {attrs['padding_mode']!r} is not one of {list(PADDING_MODES)}"
        )
    if attrs["mode"] == "cubic" and k != 2:
        raise ValueError(f"GridSample cubic mode takes 4-D inputs only, got {x}")
    return [TensorType((*x.shape[:2], *grid.shape[1:-1]), x.dtype)]


def bounds(size: int, align_corners: bool) -> tuple[float, float]:
    """The range a coordinate is clamped or reflected into: pixel centres or pixel edges."""
    return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)


# ---- the numpy reference ---------------------------------------------------------------------
def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """`x` mirrored at lo and hi until inside [lo, hi]."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below = x < lo
    dx = np.where(below, lo - x, x - hi)
    n = np.trunc(dx / span)
    r = dx - n * span
    even = np.fmod(n, 2) == 0
    mirrored = np.where(below == even, lo + r, hi - r)
    return np.where((x < lo) | (x > hi), mirrored, x).astype(x.dtype)


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a = CUBIC_A

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _axis_taps(attrs: Attrs, g: np.ndarray, size: int, work) -> list[tuple]:
    """(index, weight or None, inside mask or None) of every tap of positions `g` on one axis."""
    one, two = work(1), work(2)
    ac, padding, mode = attrs["align_corners"], attrs["padding_mode"], attrs["mode"]
    x = (g + one) / two * work(size - 1) if ac else ((g + one) * work(size) - one) / two
    lo, hi = bounds(size, ac)
    if mode == "nearest":
        x = np.rint(x)
    if mode != "cubic" and padding == "border":
        x = np.where((x < lo) | (x > hi), np.clip(x, 0, size - 1), x)
    elif mode != "cubic" and padding == "reflection":
        x = _reflect(x, lo, hi)
    if mode == "nearest":
        base, offsets, weights = x, (0,), [None]
    else:
        base = np.floor(x)
        t = x - base
        offsets = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
        weights = [one - t, t] if mode == "linear" else _cubic_weights(t)
    taps = []
    for off, w in zip(offsets, weights):
        i = base + off
        inside = None
        if padding == "zeros":
            inside = (i >= 0) & (i <= size - 1)
        elif padding == "reflection":
            i = np.trunc(_reflect(i, lo, hi))
        taps.append((np.clip(i, 0, size - 1).astype(np.intp), w, inside))
    return taps


def grid_sample(attrs, x, grid):
    """Every output element interpolates the taps around its grid position, last axis innermost."""
    k = x.ndim - 2
    work = np.float64 if x.dtype == np.float64 else np.float32
    g = grid.astype(work)
    taps = [_axis_taps(attrs, g[..., k - 1 - a], x.shape[2 + a], work) for a in range(k)]
    n = np.arange(x.shape[0]).reshape((-1,) + (1,) * k)
    data = np.moveaxis(x.astype(work), 1, -1)  # (N, spatial..., C): gathers keep C last

    def interpolate(a: int, chosen: list, inside) -> np.ndarray:
        if a == k:
            value = data[(n, *chosen)]
            return value if inside is None else np.where(inside[..., None], value, 0)
        total = None
        for index, weight, ok in taps[a]:
            both = ok if inside is None else (inside if ok is None else inside & ok)
            part = interpolate(a + 1, [*chosen, index], both)
            part = part if weight is None else weight[..., None] * part
            total = part if total is None else total + part
        return total

    return np.moveaxis(interpolate(0, [], None), -1, 1).astype(x.dtype)


# ---- the compute -----------------------------------------------------------------------------
Tap = tuple[Expr, Expr | None, Expr | None]  # (int32 index, weight or None, inside or None)


def _reflect_expr(x: Expr, lo: float, hi: float) -> Expr:
    """`_reflect` in kernel IR: parity by floor(n / 2) == n / 2 (n may exceed any integer)."""
    span = hi - lo
    if span <= 0:
        return literal(lo, x.dtype)
    below, above = x < literal(lo, x.dtype), x > literal(hi, x.dtype)
    dx = select(below, lo - x, x - hi)
    n = floor(dx / span)
    r = dx - n * span
    half = n * 0.5
    odd = floor(half).ne(half)
    from_lo, from_hi = r + lo, literal(hi, x.dtype) - r
    mirrored = select(below, select(odd, from_hi, from_lo), select(odd, from_lo, from_hi))
    return select(below | above, mirrored, x)


def _axis_taps_expr(attrs: Attrs, g: Expr, size: int) -> list[Tap]:
    """`_axis_taps` of one position: the same float operations in the same order."""
    work = g.dtype
    ac, padding, mode = attrs["align_corners"], attrs["padding_mode"], attrs["mode"]
    one, two = literal(1, work), literal(2, work)
    x = (g + one) / two * literal(size - 1, work) if ac else ((g + one) * size - one) / two
    lo, hi = bounds(size, ac)
    if mode == "nearest":
        x = round_even(x)
    outside = (x < literal(lo, work)) | (x > literal(hi, work))
    if mode != "cubic" and padding == "border":
        x = select(outside, clamp(x, 0, size - 1), x)
    elif mode != "cubic" and padding == "reflection":
        x = _reflect_expr(x, lo, hi)
    if mode == "nearest":
        base, offsets, weights = x, (0,), [None]
    else:
        base = floor(x)
        t = x - base
        offsets = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
        weights = [one - t, t] if mode == "linear" else _cubic_weights(t)
    taps: list[Tap] = []
    for off, w in zip(offsets, weights):
        i = base + off if off else base
        inside = None
        if padding == "zeros":
            inside = (i >= literal(0, work)) & (i <= literal(size - 1, work))
        elif padding == "reflection":
            i = _reflect_expr(i, lo, hi)  # >= -0.5: the int32 conversion truncates as trunc
        taps.append((clamp(i, 0, size - 1).astype("int32"), w, inside))
    return taps


def grid_sample_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """Nested sums over each axis's taps of weight times tapped element, as `grid_sample`."""
    x, grid = inputs
    k = x.type.ndim - 2
    work = "float64" if x.dtype == "float64" else "float32"

    def read(idx: Indices) -> Expr:
        n, c, out = idx[0], idx[1], idx[2:]
        taps = []
        for a in range(k):
            g = grid.read((n, *out, IntImm(k - 1 - a, "int32"))).astype(work)
            taps.append(_axis_taps_expr(attrs, g, x.shape[2 + a]))

        def interpolate(a: int, chosen: list[Expr], inside: Expr | None) -> Expr:
            if a == k:
                value = x.read((n, c, *chosen)).astype(work)
                return value if inside is None else select(inside, value, literal(0, work))
            total: Expr | None = None
            for index, weight, ok in taps[a]:
                both = ok if inside is None else (inside if ok is None else inside & ok)
                part = interpolate(a + 1, [*chosen, index], both)
                part = part if weight is None else weight * part
                total = part if total is None else total + part
            assert total is not None
            return total

        return interpolate(0, [], None).astype(x.dtype)

    return [read]
