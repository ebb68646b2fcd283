"""Templates for Conv and ConvTranspose (any rank, groups, strides, dilations, pads, bias).

Every conv runs as: (1) a transform kernel writing the input zero-padded and split into stride
phases (conv_layout; skipped when the input is already in that form, e.g. a 1x1 stride-1
unpadded conv), (2) one parallel kernel of register tiles (conv_schedules), storing each result
through bias and the epilogue into the NCHW output. Weights are packed for the chosen tile at
compile time; runtime weights are packed by a gather kernel into a temp. Depthwise convs fuse
the transform into the tile loop (each channel's planes are built in local scratch, in cache).
ConvTranspose is a stride-1 conv over the zero-stuffed input with the flipped, transposed
weights: the same kernels, paying for the zeros (correct, not tuned).

Knobs (ctx.config):
- schedule: "pixels", "channels" or "depthwise" (default: the cheapest by `_estimate`).
- tile_vectors / tile_rows: the NV and MR limits the chosen schedule picks its register tile
  under (defaults: 8 / 6 for "pixels" and "depthwise", 4 / 14 for "channels").
- plan: [schedule, tile_vectors, tile_rows] or [..., order] in one knob (what the tuning space
  offers, so that no two configs differ only in knobs their schedule does not read); it
  overrides the three (four).
- unroll_taps: "all" kernel taps, one kernel "row" or "none" (default) unrolled per step of
  the tap loop. Unrolled taps of a stride-1 row read overlapping inputs; LLVM then shares those
  loads across taps and runs out of registers.
- in_place: read an input already in plane form (1x1 stride-1 unpadded) where it is (default
  True); its vectors run across rows through the flat offset, which the kernel IR interpreter's
  per-axis bounds check rejects, so interpreted runs set it False.
- order: "pixels_outer" (consecutive tiles share input rows; default when the weights are
  smaller than the input) or "channels_outer" (they share a weight block).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, Stmt, allocate, const, loop, seq
from tvmc.ops.conv_layout import ConvGeometry, fill_planes, transform_kernel_body, vector_range
from tvmc.ops.conv_schedules import (
    ChannelTiling,
    Operands,
    PixelTiling,
    Reduction,
    channel_reads_end,
    channel_tile,
    channel_tiling,
    density,
    pack_channels,
    pack_pixels,
    pixel_reads_end,
    pixel_tile,
    pixel_tiling,
)
from tvmc.ops.conv_space import DEFAULTS as TILE_DEFAULTS
from tvmc.ops.conv_space import conv_geometry, conv_space, conv_transpose_space
from tvmc.ops.lowering import (
    Epilogue,
    LowerContext,
    LoweringTarget,
    TensorRef,
    make_kernel,
    template,
)
from tvmc.ops.microkernel import (
    accumulator_dtype,
    ceil_div,
    lane_index,
    let_all,
    packed_operand,
    unflatten,
)
from tvmc.ops.registry import Attrs
from tvmc.ops.space import ConfigSpace

PARALLEL_MIN_FLOPS = 1 << 18  # below this a fork/join costs more than the split saves
PARALLEL_MIN_ELEMENTS = 1 << 16  # the same for the input transform (a copy)
STORE_COST = 3.0  # instructions per output element of the channels schedule's transposing store


def _estimate(
    geo: ConvGeometry, lanes: int, pix: PixelTiling, pix_eff: float, ch: ChannelTiling,
    ch_eff: float,
) -> str:  # fmt: skip
    """The schedule with the higher estimated useful multiply-adds per cycle (a model)."""
    pixels = pix_eff * density(pix.mr, pix.nv)
    store = 1 + STORE_COST * lanes / (geo.icg * len(geo.taps))
    channels = ch_eff * density(ch.mr, ch.nv) / store
    return "channels" if channels > pixels else "pixels"


@dataclass(frozen=True)
class Plan:
    """The chosen schedule and its tiling (knobs read once, here)."""

    schedule: str
    tiling: PixelTiling | ChannelTiling  # a ChannelTiling for "channels" only
    order: str
    unroll_taps: str
    in_place: bool


def plan(cfg: Mapping[str, Any], geo: ConvGeometry, lanes: int) -> Plan:
    """The knobs of `cfg`, with defaults chosen for `geo`."""
    cfg = dict(cfg)
    if "plan" in cfg:
        cfg["schedule"], cfg["tile_vectors"], cfg["tile_rows"], *order = cfg.pop("plan")
        cfg.update(zip(["order"], order))

    def limits(default: tuple[int, int]) -> tuple[int, int]:
        return int(cfg.get("tile_vectors", default[0])), int(cfg.get("tile_rows", default[1]))

    pix, pix_eff = pixel_tiling(geo, lanes, *limits(TILE_DEFAULTS["pixels"]))
    chn, chn_eff = channel_tiling(geo, lanes, *limits(TILE_DEFAULTS["channels"]))
    depthwise = geo.icg == 1 and geo.group > 1 and geo.ocg <= 8
    default = "depthwise" if depthwise else _estimate(geo, lanes, pix, pix_eff, chn, chn_eff)
    schedule = str(cfg.get("schedule", default))
    if schedule == "depthwise" and geo.icg != 1:
        schedule = "pixels"  # a tile loop builds the planes of one input channel only
    # the operand read once sits in the outer loop; the other is read again per outer step
    weights = geo.out_channels * geo.icg * len(geo.taps)
    outer = "channels_outer" if weights > geo.channels * geo.plane_size else "pixels_outer"
    return Plan(
        schedule, chn if schedule == "channels" else pix, str(cfg.get("order", outer)),
        str(cfg.get("unroll_taps", "none")), bool(cfg.get("in_place", True)),
    )  # fmt: skip


def conv_lowering(
    ctx: LowerContext,
    geo: ConvGeometry,
    x: TensorRef,
    w: TensorRef,
    weight_fn: Callable[[np.ndarray], np.ndarray],
    bias: TensorRef | None,
    out: Buffer,
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Kernels computing `out` = conv(x, weight_fn(w)) + bias, then the epilogue."""
    acc = accumulator_dtype(out.dtype)
    lanes = ctx.target.lanes(acc)
    p = plan(ctx.config, geo, lanes)
    parallel = 2 * math.prod(out.shape) * geo.icg * len(geo.taps) >= PARALLEL_MIN_FLOPS

    def pack(v: np.ndarray) -> np.ndarray:
        if isinstance(p.tiling, ChannelTiling):
            return pack_channels(weight_fn(v), geo, p.tiling.nv * lanes)
        return pack_pixels(weight_fn(v), geo, p.tiling.mr)

    weights, kernels = packed_operand(ctx, w, pack, "w")
    per_step = {"all": len(geo.taps), "row": geo.kernel[-1], "none": 1}[p.unroll_taps]
    steps = Reduction.offsets(geo, per_step)
    table = ctx.param(np.array(steps, np.int32), "taps") if len(steps) > 1 else None
    x_buf = x.buffer
    assert x_buf is not None, "a conv input is a buffer"

    def operands(
        load: Callable[[Expr, int], Expr], base: Callable[[Expr, Expr], Expr], stride: int
    ) -> Operands:
        red = Reduction(geo, per_step, table)
        return Operands(geo, load, base, stride, weights, red, bias, out, epilogue, acc, lanes)

    if p.schedule == "depthwise":
        assert isinstance(p.tiling, PixelTiling)
        body = _depthwise(geo, p.tiling, x_buf, operands, lanes, parallel)
        return [*kernels, make_kernel(ctx.name("conv_dw"), body)]

    if isinstance(p.tiling, ChannelTiling):
        reads_end = channel_reads_end(geo, p.tiling)
    else:
        reads_end = pixel_reads_end(geo, p.tiling, lanes)
    cs, planes = geo.channel_stride, geo.batch * geo.channels

    def base(n: Expr, c: Expr) -> Expr:
        return (n * geo.channels + c) * cs

    if geo.is_identity and reads_end <= cs and p.in_place:
        rank = x_buf.ndim

        def load(off: Expr, w: int) -> Expr:  # a flat offset through the last axis (row-major)
            return x_buf[(*(const(0),) * (rank - 1), lane_index(off, w))]

        ops = operands(load, base, cs)
    else:
        size = (planes - 1) * cs + max(cs, reads_end)
        xt = ctx.temp((size,), x_buf.dtype, "x")
        slack = vector_range(planes * cs, size, lanes, lambda i: xt.store(i, const(0, xt.dtype)))
        split = parallel and planes * cs >= PARALLEL_MIN_ELEMENTS
        body = seq(transform_kernel_body(geo, x_buf, xt, lanes, split), slack)
        kernels.append(make_kernel(ctx.name("conv_input"), body))
        ops = operands(lambda off, w: xt[lane_index(off, w)], base, cs)

    if isinstance(p.tiling, ChannelTiling):
        main = _channel_loop(geo, p.tiling, ops, p.order, parallel)
    else:
        main = _pixel_loop(geo, p.tiling, ops, p.order, parallel)
    return [*kernels, make_kernel(ctx.name("conv"), main)]


def _tile_loop(
    pixel_dims: tuple[int, ...], channel_dims: tuple[int, int], order: str, parallel: bool,
    body: Callable[[tuple[Expr, ...], Expr, Expr], Stmt],
) -> Stmt:  # fmt: skip
    """One loop over all tiles: body(pixel coordinates, group, channel block)."""
    outer_pixels = order != "channels_outer"
    shape = (*pixel_dims, *channel_dims) if outer_pixels else (*channel_dims, *pixel_dims)
    np_ = len(pixel_dims)

    def coordinates(idx: tuple[Expr, ...]) -> Stmt:
        pix, chans = (idx[:np_], idx[np_:]) if outer_pixels else (idx[2:], idx[:2])
        return body(pix, chans[0], chans[1])

    def tile(t: Expr) -> Stmt:
        return let_all("c", unflatten(t, shape), coordinates)

    total = math.prod(shape)
    return loop("t", total, tile, "parallel" if parallel and total > 1 else "serial")


def _pixel_loop(
    geo: ConvGeometry, tiling: PixelTiling, ops: Operands, order: str, parallel: bool
) -> Stmt:
    blocks, _, outer = tiling.cover(geo)
    dims = (geo.batch, outer, blocks, tiling.chunks)

    def body(p: tuple[Expr, ...], g: Expr, ob: Expr) -> Stmt:
        n, o, rb, ch = p
        lead = unflatten(o, geo.out_shape[:-2]) if len(geo.out_shape) > 2 else ()
        return pixel_tile(ops, tiling, n, g, ob, lead, rb, ch)

    return _tile_loop(dims, (geo.group, ceil_div(geo.ocg, tiling.mr)), order, parallel, body)


def _channel_loop(
    geo: ConvGeometry, tiling: ChannelTiling, ops: Operands, order: str, parallel: bool
) -> Stmt:
    rows = math.prod(geo.out_shape[:-1])
    dims = (geo.batch, rows, tiling.chunks(geo))
    width = tiling.nv * ops.lanes

    def body(p: tuple[Expr, ...], g: Expr, ob: Expr) -> Stmt:
        n, row, pc = p
        return channel_tile(ops, tiling, n, g, ob, unflatten(row, geo.out_shape[:-1]), pc)

    return _tile_loop(dims, (geo.group, ceil_div(geo.ocg, width)), order, parallel, body)


def _depthwise(
    geo: ConvGeometry, tiling: PixelTiling, x: Buffer,
    operands: Callable[..., Operands], lanes: int, parallel: bool,
) -> Stmt:  # fmt: skip
    """Per (n, group): build the channel's planes in local scratch, then every pixel tile."""
    size = max(geo.channel_stride, pixel_reads_end(geo, tiling, lanes))
    blocks, _, outer = tiling.cover(geo)
    oblocks = ceil_div(geo.ocg, tiling.mr)

    def body(s: Buffer, n: Expr, g: Expr) -> Stmt:
        ops = operands(lambda off, w: s[lane_index(off, w)], lambda n_, c_: const(0), 0)

        def at(idx: tuple[Expr, ...]) -> Stmt:
            o, rb, ch, ob = idx
            lead = unflatten(o, geo.out_shape[:-2]) if len(geo.out_shape) > 2 else ()
            return pixel_tile(ops, tiling, n, g, ob, lead, rb, ch)

        def tile(t: Expr) -> Stmt:
            return let_all("c", unflatten(t, (outer, blocks, tiling.chunks, oblocks)), at)

        zero = const(0, s.dtype)
        return seq(
            fill_planes(geo, x, n, g, s, const(0), lanes),
            vector_range(geo.channel_stride, size, lanes, lambda i: s.store(i, zero)),
            loop("t", outer * blocks * tiling.chunks * oblocks, tile),
        )

    def channel(ng: Expr) -> Stmt:
        def scratch(ids: tuple[Expr, ...]) -> Stmt:
            return allocate("planes", (size,), lambda s: body(s, *ids), x.dtype)

        return let_all("c", (ng // geo.group, ng % geo.group), scratch)

    count = geo.batch * geo.group
    return loop("ng", count, channel, "parallel" if parallel and count > 1 else "serial")


# ---- templates -----------------------------------------------------------------------------------
def _geometry(
    attrs: Attrs, x: TensorRef, out: Buffer, out_channels: int, upsample: bool
) -> ConvGeometry:
    spatial = x.type.ndim - 2
    kernel = tuple(attrs["kernel_shape"])
    pads, dil = tuple(attrs["pads"]), tuple(attrs["dilations"])
    strides = tuple(attrs["strides"])
    out_shape = tuple(out.shape[2:])
    if not upsample:
        return ConvGeometry(x.shape[0], x.shape[1], out_channels, attrs["group"],
                            tuple(x.shape[2:]), kernel, strides, dil, pads[:spatial],
                            out_shape, (1,) * spatial)  # fmt: skip
    # ConvTranspose: pad the stuffed input so that a stride-1 conv gives exactly `out_shape`
    begin = tuple(d * (k - 1) - p for k, d, p in zip(kernel, dil, pads[:spatial]))
    return ConvGeometry(x.shape[0], x.shape[1], out_channels, attrs["group"], tuple(x.shape[2:]),
                        kernel, (1,) * spatial, dil, begin, out_shape, strides)  # fmt: skip


def _with_default(
    space_fn: Callable[[Attrs, list[TensorType], LoweringTarget], ConfigSpace], op: str
) -> Callable[[Attrs, list[TensorType], LoweringTarget], ConfigSpace]:
    """`space_fn` with `default_index` set: the config whose plan is the one `{}` gets."""

    def space(attrs: Attrs, input_types: list[TensorType], target: LoweringTarget) -> ConfigSpace:
        configs = space_fn(attrs, input_types, target)
        geo = conv_geometry(attrs, input_types, op)
        lanes = target.lanes(accumulator_dtype(input_types[0].dtype))
        want = plan({}, geo, lanes)
        configs.default_index = next(
            (i for i in range(len(configs)) if plan(configs.get(i).values, geo, lanes) == want),
            None,
        )
        return configs

    space.__doc__ = space_fn.__doc__
    return space


@template("Conv", epilogue=True, space=_with_default(conv_space, "Conv"))
def conv_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Conv of any rank through the transform + register-tile kernels."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    geo = _geometry(attrs, x, outputs[0], w.shape[0], upsample=False)
    return conv_lowering(ctx, geo, x, w, lambda v: v, bias, outputs[0], epilogue)


@template(
    "ConvTranspose", epilogue=True, space=_with_default(conv_transpose_space, "ConvTranspose")
)
def conv_transpose_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """ConvTranspose as a stride-1 conv of the zero-stuffed input with flipped weights."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    group, (c, mg, *kernel) = attrs["group"], w.shape
    spatial = len(kernel)

    def flip(v: np.ndarray) -> np.ndarray:
        # (C, M/g, *K) -> (M, C/g, *K) per group, spatially flipped
        t = v.reshape(group, c // group, mg, *kernel).swapaxes(1, 2)
        t = t.reshape(group * mg, c // group, *kernel)
        return t[(slice(None), slice(None), *(slice(None, None, -1),) * spatial)]

    geo = _geometry(attrs, x, outputs[0], group * mg, upsample=True)
    return conv_lowering(ctx, geo, x, w, flip, bias, outputs[0], epilogue)
