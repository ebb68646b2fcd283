"""RoiAlign: each region of interest pooled to a fixed grid of bins, each bin the average (or
maximum) of bilinear samples (Mask R-CNN's heads); one template on both targets.

How many samples a bin takes (`sampling_ratio` 0: ceil of the bin's size) depends on the region,
which is data, so the sample loops have run-time extents: the output shape stays static. One row
(a CPU loop iteration, a GPU thread) per output element recomputes its region's geometry.
Samples follow onnxruntime and the ONNX reference: outside [-1, size] a sample is 0; inside, it
is clamped to the input and interpolated; max mode takes the largest of the four weighted taps.
"""

from __future__ import annotations

import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import (
    Buffer,
    Expr,
    Kernel,
    Stmt,
    allocate,
    ceil,
    const,
    let,
    loop,
    maximum,
    minimum,
    select,
    seq,
)
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TensorRef
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import unflatten
from tvmc.ops.tensor.common import ROWS, check_index_dtype, data_index

ROI_ALIGN_ATTRS = {
    "output_height": 1,
    "output_width": 1,
    "sampling_ratio": 0,
    "spatial_scale": 1.0,
    "mode": "avg",
    "coordinate_transformation_mode": "half_pixel",
}
MAX_SAMPLES = 1 << 20  # per bin and axis: bounds the loops whatever the regions hold


def roi_align_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, rois, batch = types
    if x.ndim != 4 or x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"RoiAlign needs a float (N, C, H, W) input, got {x}")
    if rois.ndim != 2 or rois.shape[1] != 4 or rois.dtype != x.dtype:
        raise ValueError(f"RoiAlign rois must be (num_rois, 4) of {x.dtype}, got {rois}")
    check_index_dtype("RoiAlign", "batch_indices", batch)
    if batch.shape != (rois.shape[0],):
        raise ValueError(f"RoiAlign batch_indices {batch} must hold one index per roi")
    if attrs["mode"] not in ("avg", "max"):
        raise ValueError(f"RoiAlign mode {attrs['mode']!r} is not 'avg' or 'max'")
    ctm = attrs["coordinate_transformation_mode"]
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise ValueError(f"RoiAlign coordinate_transformation_mode {ctm!r} is not one of "
                         "['half_pixel', 'output_half_pixel']")  # fmt: skip
    oh, ow = attrs["output_height"], attrs["output_width"]
    if oh < 1 or ow < 1 or attrs["sampling_ratio"] < 0:
        raise ValueError(f"RoiAlign output {oh}x{ow} and sampling_ratio must be positive")
    return [TensorType((rois.shape[0], x.shape[1], oh, ow), x.dtype)]


# ---- the numpy reference ---------------------------------------------------------------------
def _geometry(attrs: Attrs, roi: np.ndarray, work) -> tuple:
    """(start, bin size, samples per bin) along y and x of one region."""
    offset = work(0.5 if attrs["coordinate_transformation_mode"] == "half_pixel" else 0.0)
    x1, y1, x2, y2 = (roi.astype(work) * work(attrs["spatial_scale"])) - offset
    h, w = y2 - y1, x2 - x1
    if offset == 0:
        h, w = max(h, work(1)), max(w, work(1))
    oh, ow, ratio = attrs["output_height"], attrs["output_width"], attrs["sampling_ratio"]
    bin_h, bin_w = h / work(oh), w / work(ow)
    grid_h = ratio if ratio > 0 else int(np.clip(np.ceil(h / work(oh)), 0, MAX_SAMPLES))
    grid_w = ratio if ratio > 0 else int(np.clip(np.ceil(w / work(ow)), 0, MAX_SAMPLES))
    return (y1, bin_h, grid_h), (x1, bin_w, grid_w)


def _samples(start, size, grid: int, bins: int, length: int, work):
    """Per (bin, sample): whether it is inside [-1, length], low and high taps, their weights."""
    b = np.arange(bins, dtype=work)[:, None]
    i = np.arange(grid, dtype=work)[None, :]
    pos = start + b * size + (i + work(0.5)) * size / work(grid)
    inside = (pos >= -1) & (pos <= length)
    pos = np.maximum(pos, 0)
    low = np.minimum(np.trunc(pos), length - 1)
    at_end = low >= length - 1
    pos = np.where(at_end, low, pos)
    high = np.where(at_end, low, low + 1)
    frac = pos - low
    return inside, low.astype(np.intp), high.astype(np.intp), frac, work(1) - frac


def _pool_region(attrs: Attrs, image: np.ndarray, roi: np.ndarray, work) -> np.ndarray:
    """The (C, oh, ow) bins of one region of `image` (C, H, W)."""
    oh, ow = attrs["output_height"], attrs["output_width"]
    (y1, bh, gh), (x1, bw, gw) = _geometry(attrs, roi, work)
    if gh * gw == 0:
        return np.zeros((image.shape[0], oh, ow), work)
    vy, ylo, yhi, ly, hy = _samples(y1, bh, gh, oh, image.shape[1], work)  # (oh, gh)
    vx, xlo, xhi, lx, hx = _samples(x1, bw, gw, ow, image.shape[2], work)  # (ow, gw)
    yy, xx = (slice(None), slice(None), None, None), (None, None, slice(None), slice(None))

    def tap(yi, xi, wy, wx):  # (C, oh, gh, ow, gw)
        return (wy[yy] * wx[xx]) * image[:, yi[yy], xi[xx]]

    taps = [tap(ylo, xlo, hy, hx), tap(ylo, xhi, hy, lx), tap(yhi, xlo, ly, hx),
            tap(yhi, xhi, ly, lx)]  # fmt: skip
    inside = vy[yy] & vx[xx]
    if attrs["mode"] == "avg":
        value = np.where(inside, taps[0] + taps[1] + taps[2] + taps[3], 0)
        return value.sum(axis=(2, 4)) / work(max(gh * gw, 1))
    return np.where(inside, np.maximum.reduce(taps), 0).max(axis=(2, 4))


def roi_align(attrs, x, rois, batch_indices):
    """Every bin: the mean (or max) of its samples, each bilinear in the region's image."""
    work = np.float64 if x.dtype == np.float64 else np.float32
    out = np.zeros((rois.shape[0], x.shape[1], attrs["output_height"], attrs["output_width"]))
    for r in range(rois.shape[0]):
        out[r] = _pool_region(attrs, x[int(batch_indices[r])].astype(work), rois[r], work)
    return out.astype(x.dtype)


# ---- the template ----------------------------------------------------------------------------
def _sample_count(extent: Expr, bins: int, ratio: int) -> Expr:
    """Samples per bin along one axis: `sampling_ratio`, or ceil(extent / bins) (in range)."""
    if ratio > 0:
        return const(ratio)
    count = ceil(extent / literal(bins, extent.dtype))
    return minimum(maximum(count, literal(0, count.dtype)), literal(MAX_SAMPLES, count.dtype))


def _axis_sample(pos: Expr, length: int) -> tuple[Expr, Expr, Expr, Expr, Expr]:
    """(inside, low, high, low weight, high weight) of one sample position, as `_samples`."""
    work = pos.dtype
    inside = (pos >= literal(-1, work)) & (pos <= literal(length, work))
    pos = maximum(pos, literal(0, work))
    # positions beyond the int32 range are outside: clamping first keeps the conversion defined
    low = minimum(pos, literal(length - 1, work)).astype("int32")
    at_end = low >= const(length - 1)
    frac = select(at_end, literal(0, work), pos - low.astype(work))
    high = select(at_end, low, low + 1)
    return inside, low, high, literal(1, work) - frac, frac


def roi_align_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per output element: its region's geometry, then run-time loops over the bin's samples."""
    x, rois, batch = inputs
    (out,) = outputs
    work = "float64" if x.dtype == "float64" else "float32"
    height, width = x.shape[2], x.shape[3]
    oh, ow, ratio = attrs["output_height"], attrs["output_width"], attrs["sampling_ratio"]
    half = attrs["coordinate_transformation_mode"] == "half_pixel"
    average = attrs["mode"] == "avg"

    def element(flat: Expr) -> Stmt:
        r, c, ph, pw = unflatten(flat, out.shape)
        image = data_index(batch.read((r,)), x.shape[0])

        def corner(k: int) -> Expr:
            scaled = rois.read((r, const(k))).astype(work) * attrs["spatial_scale"]
            return scaled - 0.5 if half else scaled

        def geometry(x1: Expr, y1: Expr, x2: Expr, y2: Expr) -> Stmt:
            h, w = y2 - y1, x2 - x1
            if not half:
                h, w = maximum(h, literal(1, work)), maximum(w, literal(1, work))
            return let("bin_h", h / literal(oh, work), lambda bin_h: let(
                "bin_w", w / literal(ow, work), lambda bin_w: let(
                    "grid_h", _sample_count(h, oh, ratio).astype("int32"), lambda grid_h: let(
                        "grid_w", _sample_count(w, ow, ratio).astype("int32"),
                        lambda grid_w: pool(y1, x1, bin_h, bin_w, grid_h, grid_w)))))  # fmt: skip

        def pool(top, left, bin_h, bin_w, grid_h, grid_w) -> Stmt:
            def body(acc: Buffer) -> Stmt:
                def position(start, bin_, size, grid, i) -> Expr:
                    step = (i.astype(work) + 0.5) * size / grid.astype(work)
                    return start + bin_.astype(work) * size + step

                def sample(iy: Expr, ix: Expr) -> Stmt:
                    in_y, y_lo, y_hi, hy, ly = _axis_sample(
                        position(top, ph, bin_h, grid_h, iy), height)  # fmt: skip
                    in_x, x_lo, x_hi, hx, lx = _axis_sample(
                        position(left, pw, bin_w, grid_w, ix), width)  # fmt: skip
                    taps = [hy * hx * x.read((image, c, y_lo, x_lo)).astype(work),
                            hy * lx * x.read((image, c, y_lo, x_hi)).astype(work),
                            ly * hx * x.read((image, c, y_hi, x_lo)).astype(work),
                            ly * lx * x.read((image, c, y_hi, x_hi)).astype(work)]  # fmt: skip
                    zero = literal(0, work)
                    if average:
                        value = select(in_y & in_x, taps[0] + taps[1] + taps[2] + taps[3], zero)
                        return acc.store(0, acc[0] + value)
                    best = maximum(maximum(taps[0], taps[1]), maximum(taps[2], taps[3]))
                    value = select(in_y & in_x, best, zero)
                    first = iy.eq(0) & ix.eq(0)
                    return acc.store(0, select(first, value, maximum(acc[0], value)))

                samples = loop(
                    "iy", grid_h, lambda iy: loop("ix", grid_w, lambda ix: sample(iy, ix))
                )
                count = maximum(grid_h * grid_w, const(1)).astype(work)
                result = acc[0] / count if average else acc[0]
                return seq(acc.store(0, literal(0, work)), samples,
                           out.store((r, c, ph, pw), result.astype(out.dtype)))  # fmt: skip

            return allocate("acc", (1,), body, work)

        return let("x1", corner(0), lambda x1: let("y1", corner(1), lambda y1: let(
            "x2", corner(2), lambda x2: let("y2", corner(3), lambda y2: geometry(
                x1, y1, x2, y2)))))  # fmt: skip

    per_bin = max(ratio, 2) ** 2 * 4
    body = ROWS[ctx.target.kind](ctx, math.prod(out.shape), math.prod(out.shape) * per_bin, element)
    return [make_kernel(ctx.name("roi_align"), body)]
