"""GPU templates for Conv (any rank, groups, strides, dilations, pads) and ConvTranspose.

Conv has three schedules (knob `schedule`):

- "gemm" (implicit GEMM, the default unless each output reads one input channel): per group,
  out[oc, pixel] = sum over (ic, taps) of W[oc, (ic, taps)] * X[(ic, taps), pixel], through
  `tiled_gemm`'s shared-memory tiles and per-thread register tiles (its knobs tile_m, tile_n,
  tile_k, unroll_k, split_k, double_buffer). The im2col matrix is never stored: the B-tile loader
  gathers the input behind the padding test (a pointwise conv's B is the input itself, loaded in
  runs of pixels); constant weights are packed at compile time as an [OC, K] matrix.
- "tiled" (2-D convs): direct, with the input patch of a block's output tile and its weights
  staged in shared memory (`gpu_tiled.py`; it reads the GEMM's tile knobs).
- "direct" (default for depthwise): one thread per output, a loop over its channels and taps
  (`block` threads per block).

Bias and the fused epilogue are applied as each output is stored. ConvTranspose is one thread
per output gathering the inputs whose stride phase lands on it (`block` threads per block).
"""

from __future__ import annotations

import math

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, Stmt, allocate, const, if_then_else, loop, seq
from tvmc.ops.conv.definition import CHANNEL_SHUFFLE, conv_rule, shuffled_channel
from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.conv.gpu_operands import output_store, weight_read
from tvmc.ops.conv.gpu_tiled import conv_tiled
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, LoweringTarget, Template, TensorRef
from tvmc.ops.schedule.gemm_gpu import (
    gemm_defaults,
    gemm_space,
    span,
    tile_candidates,
    vector_width,
)
from tvmc.ops.schedule.gemm_gpu_kernel import GemmProblem, tiled_gemm
from tvmc.ops.schedule.gpu_launch import (
    BLOCKS,
    DEFAULT_BLOCK,
    GPUConfigError,
    block_of,
    grid_loop,
    window_loops,
)
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import accumulator_dtype, mac, unflatten
from tvmc.ops.space import ConfigSpace


def _schedule(ctx: LowerContext, geo: ConvGeometry) -> str:
    schedule = str(ctx.config.get("schedule", "direct" if geo.icg == 1 else "gemm"))
    if schedule not in SCHEDULES:
        raise GPUConfigError(f"conv schedule {schedule!r}: one of {', '.join(SCHEDULES)}")
    return schedule


def block_space() -> ConfigSpace:
    """Threads per block of a thread-per-output kernel, the default first measured."""
    space = ConfigSpace().other("block", BLOCKS)
    space.default_index = space.index_of({"block": DEFAULT_BLOCK})
    return space


def conv_gpu_space(
    attrs: Attrs, input_types: list[TensorType], target: LoweringTarget
) -> ConfigSpace:
    """The implicit GEMM's knobs (threads per block for a depthwise conv's direct kernel), and
    for 2-D convs the `schedule` knob that offers the tiled direct form over the same tiles."""
    w = input_types[1].shape
    out = conv_rule(attrs, input_types)[0].shape
    pixels = out[0] * math.prod(out[2:])  # the GEMM's N: tiles clamp to it
    two_d = len(w) == 4
    if w[1] == 1:
        space = ConfigSpace().other("block", BLOCKS)
        defaults: dict = {"block": DEFAULT_BLOCK}
        if two_d:
            space.other("schedule", ["direct", "tiled"])
            space.other("tile_n", tile_candidates(math.prod(out[2:])))
            defaults |= {"schedule": "direct", "tile_n": space.knobs[-1].candidates[0]}
    else:
        m, k = w[0] // attrs["group"], math.prod(w[1:])
        space = gemm_space(attrs["group"], m, pixels, k)
        defaults = gemm_defaults(attrs["group"], m, pixels, k)
        if two_d:
            space.other("schedule", ["gemm", "tiled"])
            defaults["schedule"] = "gemm"
    space.default_index = space.index_of(defaults)
    return space


def conv_implicit_gemm(
    ctx: LowerContext,
    geo: ConvGeometry,
    x: TensorRef,
    w: TensorRef,
    bias: TensorRef | None,
    out: Buffer,
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """The conv as `group` GEMMs of [OCg, ICg*taps] x [ICg*taps, N*pixels]."""
    acc = accumulator_dtype(out.dtype)
    pixels = (geo.batch, *geo.out_shape)
    taps = (geo.icg, *geo.kernel)
    weight = weight_read(ctx, w, geo)
    store = output_store(geo, bias, out, epilogue, acc)

    def gather(g: Expr, kk: Expr, j: Expr) -> tuple[tuple[Expr, ...], Expr | None]:
        b, *o = unflatten(j, pixels)
        ic, *t = unflatten(kk, taps)
        pos = geo.position(tuple(o), tuple(t))
        return (b, g * geo.icg + ic, *pos), geo.inside(pos)

    def pixel_run(g: Expr, kk: Expr, j: Expr, lanes: int) -> Expr:
        """`lanes` consecutive pixels of a pointwise conv: one run along the input's last axis."""
        b, *o = unflatten(j, pixels)
        return x.read((b, g * geo.icg + kk, *o[:-1], span(o[-1], lanes)))

    # float4 loads: packed weights are contiguous along K; a pointwise conv's B is the input
    # itself, contiguous along pixels within a row of the last axis
    packed = w.value is not None
    pointwise = (
        all(k == 1 for k in geo.kernel)
        and not any(geo.pad_begin)
        and all(s == 1 for s in (*geo.strides, *geo.dilations))
    )
    gemm = GemmProblem(
        name="conv",
        groups=geo.group,
        m=geo.ocg,
        n=math.prod(pixels),
        k=math.prod(taps),
        dtype=acc,
        a_read=lambda g, i, kk, lanes: weight(g * geo.ocg + i, span(kk, lanes)),
        b_read=pixel_run if pointwise else lambda g, kk, j, lanes: x.read(gather(g, kk, j)[0]),
        store=lambda g, i, j, v: store(g * geo.ocg + i, unflatten(j, pixels), v),
        b_valid=None if pointwise else lambda g, kk, j: gather(g, kk, j)[1],
        a_vector=4 if packed else 1,
        b_vector=vector_width(4, geo.out_shape[-1]) if pointwise else 1,
    )
    return tiled_gemm(ctx, gemm)


def conv_direct(
    ctx: LowerContext,
    geo: ConvGeometry,
    x: TensorRef,
    w: TensorRef,
    bias: TensorRef | None,
    out: Buffer,
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """One thread per output: its channels and taps in a register accumulator."""
    acc_t = accumulator_dtype(out.dtype)
    weight = weight_read(ctx, w, geo)
    store = output_store(geo, bias, out, epilogue, acc_t)
    taps = math.prod(geo.kernel)

    def output(flat: Expr) -> Stmt:
        b, oc, *o = unflatten(flat, out.shape)
        g = oc // geo.ocg if geo.group > 1 else const(0)

        def body(acc: Buffer) -> Stmt:
            def tap(ic: Expr, *t: Expr) -> Stmt:
                pos = geo.position(tuple(o), t)
                kk = ic * taps + sum_taps(t, geo.kernel)
                v = mac(
                    x.read((b, g * geo.icg + ic, *pos)).astype(acc_t),
                    weight(oc, kk).astype(acc_t),
                    acc[0],
                )
                cond = geo.inside(pos)
                st = acc.store(0, v)
                return if_then_else(cond, st) if cond is not None else st

            channels = (
                loop("ic", geo.icg, lambda ic: window_loops(geo.kernel, lambda *t: tap(ic, *t)))
                if geo.icg > 1
                else window_loops(geo.kernel, lambda *t: tap(const(0), *t))
            )
            return seq(acc.store(0, const(0, acc_t)), channels, store(oc, (b, *o), acc[0]))

        return allocate("acc", (1,), body, acc_t)

    return [make_kernel(ctx.name("conv_direct"), grid_loop(out.size, output, block_of(ctx)))]


def sum_taps(t: tuple[Expr, ...], kernel: tuple[int, ...]) -> Expr:
    """Row-major position of tap `t` in the window."""
    pos: Expr = const(0)
    for v, k in zip(t, kernel):
        pos = pos * k + v
    return pos


SCHEDULES = {"gemm": conv_implicit_gemm, "direct": conv_direct, "tiled": conv_tiled}


def conv_gpu(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Conv as an implicit GEMM through shared memory, or direct (depthwise)."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    geo = ConvGeometry.of_node("Conv", attrs, x.shape, w.shape, outputs[0].shape)
    groups = attrs.get(CHANNEL_SHUFFLE, 1)
    if groups > 1:  # every schedule reads the input by index: read through the shuffle
        read, channels = x.read, x.shape[1]
        x = TensorRef(x.name, x.type, lambda idx: read(
            (idx[0], shuffled_channel(idx[1], groups, channels), *idx[2:])))  # fmt: skip
    build = SCHEDULES[_schedule(ctx, geo)]
    return build(ctx, geo, x, w, bias, outputs[0], epilogue)


def conv_transpose_gpu_space(
    attrs: Attrs, input_types: list[TensorType], target: LoweringTarget
) -> ConfigSpace:
    """Threads per block of the gather kernel."""
    return block_space()


def conv_transpose_gpu(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """One thread per output: the inputs and taps whose stride phase lands on it."""
    x, w, out = inputs[0], inputs[1], outputs[0]
    bias = inputs[2] if len(inputs) > 2 else None
    geo = ConvGeometry.of_node("ConvTranspose", attrs, x.shape, w.shape, out.shape)
    acc_t = accumulator_dtype(out.dtype)
    store = output_store(geo, bias, out, epilogue, acc_t)

    def output(flat: Expr) -> Stmt:
        b, oc, *o = unflatten(flat, out.shape)
        g, m = (oc // geo.ocg, oc % geo.ocg) if geo.group > 1 else (const(0), oc)

        def body(acc: Buffer) -> Stmt:
            def tap(ic: Expr, *t: Expr) -> Stmt:
                z = [o[d] + geo.pad_begin[d] - t[d] * geo.dilations[d] for d in range(len(t))]
                cond: Expr | None = None
                for d, zd in enumerate(z):
                    s = geo.strides[d]
                    test = (zd >= 0) & (zd < geo.in_shape[d] * s)
                    test = test & (zd % s).eq(0) if s > 1 else test
                    cond = test if cond is None else cond & test
                q = tuple(
                    zd // geo.strides[d] if geo.strides[d] > 1 else zd for d, zd in enumerate(z)
                )
                c = g * geo.icg + ic
                v = mac(x.read((b, c, *q)).astype(acc_t), w.read((c, m, *t)).astype(acc_t), acc[0])
                return if_then_else(cond, acc.store(0, v))

            channels = loop(
                "ic", geo.icg, lambda ic: window_loops(geo.kernel, lambda *t: tap(ic, *t))
            )
            return seq(acc.store(0, const(0, acc_t)), channels, store(oc, (b, *o), acc[0]))

        return allocate("acc", (1,), body, acc_t)

    return [make_kernel(ctx.name("conv_transpose"), grid_loop(out.size, output, block_of(ctx)))]


CONV = Template(conv_gpu, conv_gpu_space, epilogue=True)
CONV_TRANSPOSE = Template(conv_transpose_gpu, conv_transpose_gpu_space, epilogue=True)
