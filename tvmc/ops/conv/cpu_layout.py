"""The input transform every CPU conv template starts from (over a `ConvGeometry`).

The transform writes each (n, c) input plane zero-padded and split into stride phases: plane
element `y` of phase `p` holds input `y * stride + p - pad` (0 outside the input). In that layout
every kernel tap of every output pixel is a *constant offset* from the pixel's plane position,
for any stride, dilation or padding, so a conv is a sum of shifted contiguous rows: vector loads
with no bounds checks. ConvTranspose uses the same transform with the input zero-stuffed
(`upsample`) and a stride-1 conv over it. An unphased geometry (`ConvGeometry.unphased`: strided
channels tiles, which broadcast one element at a time) has one phase of stride 1, the input
only padded: taps are constant offsets still, a row's output pixels `stride` apart.

Layout of the transformed input (flat): [n][c][phase][plane dims...], then slack for the
over-reads of lanes that are computed but never stored.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

from tvmc.kernel import (
    MAX_SPAN_STRIDE,
    Buffer,
    Expr,
    Stmt,
    Var,
    const,
    if_then_else,
    loop,
    maximum,
    minimum,
    select,
    seq,
)
from tvmc.ops.conv.geometry import ConvGeometry, through_last_axis
from tvmc.ops.schedule.microkernel import ceil_div, unflatten

MAX_UNROLLED_PHASES = 16  # more phase planes than this are filled by one loop over the phases


def vector_range(lo: int, hi: int, lanes: int, body: Callable[[Expr], Stmt]) -> Stmt:
    """body(i) for i in [lo, hi): a vectorized loop of full vectors, then a scalar tail."""
    n = max(0, hi - lo)
    full = n // lanes
    main = None
    if full:
        main = loop("vo", full, lambda vo: loop(
            "vi", lanes, lambda vi: body(lo + vo * lanes + vi), "vectorized"))  # fmt: skip
    tail = (
        loop("vt", n - full * lanes, lambda t: body(lo + full * lanes + t)) if n % lanes else None
    )
    return seq(main, tail)


def _valid(geo: ConvGeometry, axis: int, z: Expr) -> Expr:
    """Whether position z of the zero-stuffed input along `axis` holds an input element."""
    u, size = geo.upsample[axis], geo.in_shape[axis]
    cond = (z >= 0) & (z < (size - 1) * u + 1)
    return cond & (z % u).eq(0) if u > 1 else cond


def _source(geo: ConvGeometry, axis: int, z: Expr) -> Expr:
    """The input index of zero-stuffed position z (clamped: only read where valid)."""
    u = geo.upsample[axis]
    return minimum(maximum(z // u, 0), geo.in_shape[axis] - 1) if u > 1 else z


def fill_row(
    geo: ConvGeometry, x: Buffer, n: Expr, c: Expr, dst: Buffer, row_base: Expr,
    phase: tuple[int, ...], ys: tuple[Expr, ...], lanes: int,
) -> Stmt:  # fmt: skip
    """One plane row (leading plane indices `ys`) of phase `phase`."""
    # input position z = y * stride + phase - pad, in the zero-stuffed input
    steps = geo.split_strides
    zs = [y * steps[i] + (phase[i] - geo.pad_begin[i]) for i, y in enumerate(ys)]
    lead = tuple(_source(geo, i, z) for i, z in enumerate(zs))
    last, wq, zero = len(geo.plane) - 1, geo.plane[-1], const(0, x.dtype)
    s, p, pb = steps[last], phase[last], geo.pad_begin[last]

    def put(lo: int, hi: int, value: Callable[[Expr], Expr], vectorize: bool = True) -> Stmt:
        def at(i: Expr) -> Stmt:
            return dst.store(row_base + i, value(i))

        return (
            vector_range(lo, hi, lanes, at)
            if vectorize
            else loop("x", max(0, hi - lo), lambda i: at(lo + i))
        )

    if geo.upsample[last] == 1:  # zeros, a contiguous (or strided) copy, zeros
        lo = min(wq, max(0, ceil_div(pb - p, s)))
        hi = max(lo, min(wq, (geo.in_shape[last] - 1 + pb - p) // s + 1))
        copy = seq(
            put(0, lo, lambda i: zero),
            # a small stride is a vector too (one span load and a shuffle): left a scalar loop,
            # LLVM vectorized short rows across rows, with gathers and scatters
            put(
                lo,
                hi,
                lambda i: x[through_last_axis(x, (n, c, *lead, i * s + p - pb))],
                s <= MAX_SPAN_STRIDE,
            ),
            put(hi, wq, lambda i: zero),
        )
    else:

        def element(i: Expr) -> Stmt:
            z = i * s + p - pb
            value = x[through_last_axis(x, (n, c, *lead, _source(geo, last, z)))]
            return dst.store(row_base + i, select(_valid(geo, last, z), value, zero))

        copy = loop("x", wq, element)
    if not zs:
        return copy
    inside = functools.reduce(lambda a, b: a & b, (_valid(geo, i, z) for i, z in enumerate(zs)))
    return if_then_else(inside, copy, put(0, wq, lambda i: zero))


def fill_planes(
    geo: ConvGeometry, x: Buffer, n: Expr, c: Expr, dst: Buffer, base: Expr, lanes: int
) -> Stmt:
    """Writes the transformed planes of input channel (n, c) to dst[base:base+planes_size]."""
    if geo.n_phases > MAX_UNROLLED_PHASES and _phase_values_are_indices(geo):
        return _fill_planes_looped(geo, x, n, c, dst, base)
    lead_shape, wq = geo.plane[:-1], geo.plane[-1]
    rows = math.prod(lead_shape)
    stmts = []
    for index, phase in enumerate(itertools.product(*geo.phases)):
        plane_base = base + index * geo.plane_size

        def row(yr: Expr, plane_base: Expr = plane_base, phase: tuple = phase) -> Stmt:
            ys = unflatten(yr, lead_shape) if lead_shape else ()
            return fill_row(geo, x, n, c, dst, plane_base + yr * wq, phase, ys, lanes)

        stmts.append(loop("y", rows, row) if rows > 1 else row(const(0)))
    return seq(*stmts)


def _phase_values_are_indices(geo: ConvGeometry) -> bool:
    """Phases 0, 1, ... of every axis (no dilation gaps) in an input without stuffed zeros."""
    return all(u == 1 for u in geo.upsample) and all(p == tuple(range(len(p))) for p in geo.phases)


def _fill_planes_looped(
    geo: ConvGeometry, x: Buffer, n: Expr, c: Expr, dst: Buffer, base: Expr
) -> Stmt:
    """Every phase plane by one loop nest over (phase, row, column): a gather that writes 0
    where the position falls in the padding. Patch embeddings (kernel = stride = 16) have 256
    phases; a loop nest each made LLVM take minutes over their strided copies."""
    phase_shape, zero = tuple(len(p) for p in geo.phases), const(0, x.dtype)
    axes = len(phase_shape)

    def element(flat: Expr) -> Stmt:
        index = unflatten(flat, (*phase_shape, *geo.plane))  # [n][c] [phase...][plane...]
        phase, pos = index[:axes], index[axes:]
        z = [y * s + p - pb for y, s, p, pb in zip(pos, geo.split_strides, phase, geo.pad_begin)]
        inside = functools.reduce(
            lambda a, b: a & b, ((zi >= 0) & (zi < size) for zi, size in zip(z, geo.in_shape))
        )
        clamped = tuple(minimum(maximum(zi, 0), size - 1) for zi, size in zip(z, geo.in_shape))
        value = x[through_last_axis(x, (n, c, *clamped))]
        return dst.store(base + flat, select(inside, value, zero))

    return loop("e", geo.planes_size, element)


def transform_kernel_body(
    geo: ConvGeometry, x: Buffer, dst: Buffer, lanes: int, parallel: bool
) -> Stmt:
    """The transform of every (n, c) plane into `dst`, one parallel iteration per plane (its
    `channel_pad` zeroed: lanes that read it are never stored, but garbage could be a slow
    denormal)."""
    zero = const(0, dst.dtype)

    def plane(nc: Var) -> Stmt:
        n, c = nc // geo.channels, nc % geo.channels
        base = nc * geo.channel_stride
        filled = fill_planes(geo, x, n, c, dst, base, lanes)
        if not geo.channel_pad:
            return filled
        pad = vector_range(0, geo.channel_pad, lanes,
                           lambda i: dst.store(base + geo.planes_size + i, zero))  # fmt: skip
        return seq(filled, pad)

    count = geo.batch * geo.channels
    return loop("nc", count, plane, "parallel" if parallel and count > 1 else "serial")
