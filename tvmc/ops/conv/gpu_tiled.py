"""The direct GPU conv with shared-memory tiling (2-D convs, any groups, strides, dilations, pads).

One block computes OCb output channels (of one group) by an OHb x OWb tile of output pixels of
one image. Per step of ICb input channels, the block's threads load into shared memory the input
patch that tile reads ((OHb - 1) * sh + (kh - 1) * dh + 1 rows, likewise columns; zeros in the
padding) and the ICb x taps x OCb weights, a barrier, then each thread accumulates its OCt
channels x PXt pixels: per channel and tap, OCt weights (one vector load) and PXt inputs from
shared memory, an outer product; a barrier. Each input element is read from global memory once
per block and step, where the implicit GEMM reads it once per tap.

A thread's PXt pixels are interleaved along the row (pixel tx + p * OWb / PXt): neighbouring
threads read neighbouring patch columns.

Knobs: the implicit GEMM's (one space, `schedule` "tiled" picks this form), read as `tile_m`
[OCb, OCt], `tile_n` [pixels per block, PXt] (OWb: that many pixels, at most the row rounded up
to a power of two; OHb: the rest), `tile_k` ICb (clamped to the group's input channels),
`unroll_k` (unroll the taps), `split_k` (the channel steps cut across blocks, summed by a second
kernel: late layers with few output tiles), `double_buffer` (the next step's patch and weights
fetched into registers while this step multiplies, stored into the other half of two shared
buffers after it, as the GEMM does). Defaults: the implicit GEMM's tiles, 8 channels per step,
split-K as the GEMM picks it, no double buffering.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmc.kernel import (
    Barrier,
    Buffer,
    Expr,
    Kernel,
    Stmt,
    allocate,
    const,
    if_then_else,
    loop,
    nest,
    seq,
)
from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.conv.gpu_operands import output_store, weight_read
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef
from tvmc.ops.schedule.gemm_gpu import (
    BANK_PAD,
    MAX_STAGED,
    ItemFn,
    default_tiles,
    span,
    split_k,
    stage_item,
    store_item,
    thread_chunks,
    unstage_item,
    vector_width,
)
from tvmc.ops.schedule.gpu_launch import (
    MAX_SHARED_BYTES,
    MAX_THREADS,
    GPUConfigError,
    all_of,
    grid_loop,
    pow2_at_least,
)
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import accumulator_dtype, ceil_div, let_all, mac, unflatten

DEFAULT_CHANNELS = 8  # input channels per step unless tile_k says otherwise
UNROLL_TAPS = 32  # windows up to this many taps are unrolled unless unroll_k says so
WARP, BANKS = 32, 32


@dataclass(frozen=True)
class TiledPlan:
    """OCb x (OHb x OWb) outputs per block, OCt x PXt per thread, ICb channels per step."""

    ocb: int
    oct: int
    ohb: int
    owb: int
    pxt: int
    icb: int
    unroll: bool
    patch: tuple[int, int]  # rows and columns of input the block's pixel tile reads
    pitch: int  # the patch's row pitch in shared memory (>= its columns: see patch_pitch)
    packed: bool  # constant weights, packed [K, OC]: a warp loads consecutive channels
    double_buffer: bool = False
    wvec: int = 1  # weights per load: packed ones move in float4 (or float2) runs of channels

    @property
    def threads(self) -> int:
        return (self.ocb // self.oct) * self.ohb * (self.owb // self.pxt)

    def staged(self, taps: int) -> tuple[int, int]:
        """Values per thread double buffering holds in registers: patch, weights."""
        patch = ceil_div(self.icb * self.patch[0] * self.pitch, self.threads)
        chunks = self.icb * taps * self.ocb // self.wvec
        return patch, ceil_div(chunks, self.threads) * self.wvec

    @property
    def pad(self) -> int:
        """Unpacked weights load with consecutive threads on consecutive taps, so a warp's
        stores run down a column of the [taps, OCb] tile: padded rows spread them over banks
        (4 keeps rows 16-byte aligned for the vector reads where OCb allows)."""
        if self.packed:
            return 0
        return BANK_PAD if self.ocb % BANK_PAD == 0 else 1

    def shared_bytes(self, taps: int, itemsize: int) -> int:
        weights = taps * (self.ocb + self.pad)
        per_step = self.icb * (self.patch[0] * self.pitch + weights) * itemsize
        return per_step * (2 if self.double_buffer else 1)


def patch_pitch(ohb: int, cols: int, per_oc: int, columns: int, strides: tuple[int, ...]) -> int:
    """The patch row pitch (from `columns` up) with the fewest bank conflicts when a warp reads
    the patch: thread (row ty, column tx) reads word ty * sh * pitch + tx * sw (every tap and
    pixel shifts all threads alike, so one pattern decides), e.g. 20 instead of 17 for a
    stride-2 tile of 4 x 4 threads."""
    sh, sw = strides
    lanes = [(t % per_oc // cols, t % cols) for t in range(min(WARP, per_oc * 32))]

    def conflicts(pitch: int) -> int:
        words = {ty * sh * pitch + tx * sw for ty, tx in lanes}
        banks = [sum(1 for w in words if w % BANKS == b) for b in range(BANKS)]
        return max(banks)

    return min(range(columns, columns + BANKS), key=lambda p: (conflicts(p), p))


def tiled_plan(config: Any, geo: ConvGeometry, packed: bool = True) -> TiledPlan:
    """The plan a config asks for (defaults sized to the conv), checked against the limits;
    `packed`: the weights are constants (packed [K, OC] at compile time)."""
    if len(geo.kernel) != 2:
        raise GPUConfigError("the tiled direct conv is for 2-D convs")
    oh, ow = geo.out_shape
    (ocb, oct), (pixels, pxt) = default_tiles(geo.batch * geo.group, geo.ocg, oh * ow)
    ocb, oct = (int(v) for v in config.get("tile_m", (ocb, oct)))
    pixels, pxt = (int(v) for v in config.get("tile_n", (pixels, pxt)))
    icb = min(int(config.get("tile_k", DEFAULT_CHANNELS)), geo.icg)
    if ocb % oct or pixels % pxt:
        raise GPUConfigError(f"thread tile {oct}x{pxt} does not divide block tile {ocb}x{pixels}")
    owb = min(pixels, pow2_at_least(ow))
    ohb, pxt = pixels // owb, min(pxt, owb)
    ph, pw = (
        (t - 1) * s + (k - 1) * d + 1
        for t, s, k, d in zip((ohb, owb), geo.strides, geo.kernel, geo.dilations)
    )
    cols = owb // pxt
    pitch = patch_pitch(ohb, cols, ohb * cols, pw, geo.strides)  # type: ignore[arg-type]
    unroll, double = bool(config.get("unroll_k", False)), bool(config.get("double_buffer", False))
    wvec = vector_width(4, ocb, geo.ocg, geo.out_channels) if packed else 1
    plan = TiledPlan(ocb, oct, ohb, owb, pxt, icb, unroll, (ph, pw), pitch, packed, double, wvec)
    staged = sum(plan.staged(math.prod(geo.kernel)))
    if double and staged > MAX_STAGED:
        raise GPUConfigError(
            f"double buffering would stage {staged} values per thread (at most {MAX_STAGED})"
        )
    if plan.threads > MAX_THREADS:
        raise GPUConfigError(f"{plan.threads} threads per block (at most {MAX_THREADS})")
    need = plan.shared_bytes(math.prod(geo.kernel), 4)
    if need > MAX_SHARED_BYTES:
        raise GPUConfigError(f"the patch and weights need {need} bytes of shared memory "
                             f"(at most {MAX_SHARED_BYTES})")  # fmt: skip
    return plan


def conv_tiled(
    ctx: LowerContext,
    geo: ConvGeometry,
    x: TensorRef,
    w: TensorRef,
    bias: TensorRef | None,
    out: Buffer,
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """A 2-D conv as blocks of output tiles over shared-memory input patches."""
    plan = tiled_plan(ctx.config, geo, packed=w.value is not None)
    acc_t = accumulator_dtype(out.dtype)
    weight = weight_read(ctx, w, geo)
    k = geo.icg * math.prod(geo.kernel)
    packed = (
        ctx.param(np.ascontiguousarray(w.value.reshape(geo.out_channels, k).T), "w_t")
        if w.value is not None
        else None
    )  # [K, OC]: a warp loads consecutive channels of one tap (coalesced, no bank conflicts)
    store = output_store(geo, bias, out, epilogue, acc_t)
    (h, wd), (oh, ow), (kh, kw) = geo.in_shape, geo.out_shape, geo.kernel
    (sh, sw), (dh, dw), (pad_h, pad_w) = geo.strides, geo.dilations, geo.pad_begin
    ocb, oct, ohb, owb, pxt, icb = plan.ocb, plan.oct, plan.ohb, plan.owb, plan.pxt, plan.icb
    ph, pw = plan.patch
    taps, threads, cols = kh * kw, plan.threads, owb // pxt
    tiles = (geo.batch, geo.group, ceil_div(geo.ocg, ocb), ceil_div(oh, ohb), ceil_div(ow, owb))
    steps = ceil_div(geo.icg, icb)
    split = split_k(ctx.config, math.prod(tiles), steps)  # input channels cut across blocks
    per = steps // split
    grid = (split, *tiles)
    partial = (
        ctx.temp((split, geo.batch, geo.out_channels, oh, ow), acc_t, "conv_split")
        if split > 1
        else None
    )
    zero = const(0, acc_t)
    wvec = plan.wvec
    double = plan.double_buffer and per > 1
    staged = plan.staged(taps)  # registers per thread: patch, weights

    def reach(tiles: int, tile: int, patch: int, stride: int, pad: int, size: int) -> bool:
        """Whether the last tile's patch runs past the input's end."""
        return (tiles - 1) * tile * stride - pad + patch > size

    past_h = reach(tiles[3], ohb, ph, sh, pad_h, h)
    past_w = reach(tiles[4], owb, pw, sw, pad_w, wd)

    def tile(sk: Expr, n: Expr, g: Expr, oi: Expr, yi: Expr, xi: Expr) -> Stmt:
        oc0, y0, x0 = oi * ocb, yi * ohb, xi * owb

        def patch_items(t: Expr, ic0: Expr, body: ItemFn) -> Stmt:
            """body(round, 1, item) for this thread's share of the step's input patch."""

            def put(rnd: Expr, r: Expr, px: Expr) -> Stmt:
                def at(c: Expr, py: Expr, iy: Expr, ix: Expr) -> Stmt:
                    ic = ic0 + c
                    tests = [ic < geo.icg] if geo.icg % icb else []
                    tests += [iy >= 0] if pad_h else []
                    tests += [iy < h] if past_h else []
                    tests += [ix >= 0] if pad_w else []
                    tests += [ix < wd] if past_w else []
                    value = x.read((n, g * geo.icg + ic, iy, ix)).astype(acc_t)
                    return body(rnd, 1, ((c, py, px), all_of(tests), value))

                c, py = r // ph, r % ph
                where = (c, py, y0 * sh - pad_h + py, x0 * sw - pad_w + px)
                return let_all("p", where, lambda v: at(*v))

            if plan.pitch == pw:
                return thread_chunks(icb * ph, pw, 1, threads, t, put)

            def row(rnd: Expr, r: Expr, px: Expr) -> Stmt:  # the pitch's extra columns idle
                return if_then_else(px < pw, put(rnd, r, px))

            # whole pitches per thread run: a warp's stores then hit consecutive words
            return thread_chunks(icb * ph, plan.pitch, 1, threads, t, row)

        def weight_items(t: Expr, ic0: Expr, body: ItemFn) -> Stmt:
            """body(round, lanes, item) for this thread's share of the step's weights."""

            def put(rnd: Expr, o: Expr, j: Expr, lanes: int) -> Stmt:
                tests = [oc0 + o < geo.ocg] if geo.ocg % ocb else []
                tests += [ic0 * taps + j < geo.icg * taps] if geo.icg % icb else []
                oc, kk = g * geo.ocg + oc0 + o, ic0 * taps + j
                if packed is None:
                    value = weight(oc, kk).astype(acc_t)
                else:
                    value = packed[kk, span(oc, lanes)].astype(acc_t)
                return body(rnd, lanes, ((j, span(o, lanes)), all_of(tests), value))

            if packed is None:  # consecutive threads, consecutive taps of one channel
                return thread_chunks(ocb, icb * taps, 1, threads, t,
                                     lambda rnd, o, j: put(rnd, o, j, 1))  # fmt: skip
            return thread_chunks(icb * taps, ocb, wvec, threads, t,
                                 lambda rnd, j, o: put(rnd, j=j, o=o, lanes=wvec))  # fmt: skip

        def thread(patch: Buffer, wts: Buffer, t: Expr) -> Stmt:
            per_oc = ohb * cols
            where = (t // per_oc, t % per_oc // cols, t % cols)
            return let_all("t", where, lambda v: with_regs(patch, wts, t, *v))

        def with_regs(patch: Buffer, wts: Buffer, t: Expr, to: Expr, ty: Expr, tx: Expr) -> Stmt:
            def body(acc: Buffer, wr: Buffer, xr: Buffer, *stages: Buffer) -> Stmt:
                def products(half: tuple[Expr, ...]) -> Stmt:
                    def tap(c: Expr, ry: Expr, rx: Expr) -> Stmt:
                        row = ty * sh + ry * dh
                        j = c * taps + ry * kw + rx
                        return seq(
                            wr.store(span(const(0), oct), wts[(*half, j, span(to * oct, oct))]),
                            loop("p", pxt, lambda p: xr.store(
                                p, patch[(*half, c, row, (tx + p * cols) * sw + rx * dw)]),
                                kind="unrolled"),
                            nest([("i", oct, "unrolled"), ("p", pxt, "unrolled")],
                                 lambda i, p: acc.store(i * pxt + p,
                                                        mac(wr[i], xr[p], acc[i * pxt + p]))),
                        )  # fmt: skip

                    unroll = "unrolled" if plan.unroll or taps <= UNROLL_TAPS else "serial"
                    window = [("ry", kh, unroll), ("rx", kw, unroll)]
                    return loop("c", icb, lambda c: nest(window, lambda ry, rx: tap(c, ry, rx)))

                def first_channel(ks: Expr) -> Expr:
                    return (sk * per + ks) * icb if split > 1 else ks * icb

                def step(ks: Expr) -> Stmt:
                    ic0 = first_channel(ks)
                    return seq(
                        patch_items(t, ic0, store_item(patch, (), zero)),
                        weight_items(t, ic0, store_item(wts, (), zero)),
                        Barrier(),
                        products(()),
                        Barrier(),
                    )

                def double_step(ks: Expr) -> Stmt:
                    p_stage, w_stage = stages
                    more = ks + 1 < per  # the same on every thread: no barrier sits under it

                    def with_halves(cur: Expr, nxt: Expr) -> Stmt:
                        ic1 = first_channel(ks + 1)
                        fetch = seq(
                            patch_items(t, ic1, stage_item(p_stage, zero)),
                            weight_items(t, ic1, stage_item(w_stage, zero)),
                        )
                        unstage = seq(
                            patch_items(t, ic1, unstage_item(p_stage, patch, nxt)),
                            weight_items(t, ic1, unstage_item(w_stage, wts, nxt)),
                        )
                        return seq(
                            if_then_else(more, fetch),
                            products((cur,)),
                            if_then_else(more, unstage),
                            Barrier(),
                        )

                    return let_all("h", (ks % 2, (ks + 1) % 2), lambda hs: with_halves(*hs))

                def out_one(i: Expr, p: Expr) -> Stmt:
                    oc, oy, ox = oc0 + to * oct + i, y0 + ty, x0 + tx + p * cols
                    tests = [oc < geo.ocg] if geo.ocg % ocb else []
                    tests += [oy < oh] if oh % ohb else []
                    tests += [ox < ow] if ow % owb else []
                    v = acc[i * pxt + p]
                    st = (
                        store(g * geo.ocg + oc, (n, oy, ox), v)
                        if partial is None
                        else partial.store((sk, n, g * geo.ocg + oc, oy, ox), v)
                    )
                    cond = all_of(tests)
                    return if_then_else(cond, st) if cond is not None else st

                if double:
                    ic0 = first_channel(const(0))
                    steps_ = seq(
                        patch_items(t, ic0, store_item(patch, (const(0),), zero)),
                        weight_items(t, ic0, store_item(wts, (const(0),), zero)),
                        Barrier(),
                        loop("ks", per, double_step),
                    )
                else:
                    steps_ = loop("ks", per, step) if per > 1 else step(const(0))
                return seq(
                    loop("z", oct * pxt, lambda z: acc.store(z, zero), kind="unrolled"),
                    steps_,
                    nest([("i", oct, "unrolled"), ("p", pxt, "unrolled")], out_one),
                )

            regs = [("acc", oct * pxt), ("wr", oct), ("xr", pxt)]
            if double:
                regs += [("p_stage", staged[0]), ("w_stage", staged[1])]

            def with_bufs(k: int, bufs: list[Buffer]) -> Stmt:
                if k == len(regs):
                    return body(*bufs)
                name_, size = regs[k]
                return allocate(name_, (size,), lambda b: with_bufs(k + 1, [*bufs, b]), acc_t)

            return with_bufs(0, [])

        halves = (2,) if double else ()
        return allocate(
            "patch",
            (*halves, icb, ph, plan.pitch),
            lambda patch: allocate(
                "wts",
                (*halves, icb * taps, ocb + plan.pad),
                lambda wts: loop(
                    "tx", threads, lambda t: thread(patch, wts, t), kind="threadIdx.x"
                ),
                acc_t,
                "shared",
            ),
            acc_t,
            "shared",
        )

    def block(bid: Expr) -> Stmt:
        return let_all("b", unflatten(bid, grid), lambda v: tile(*v))

    body = loop("bx", math.prod(grid), block, kind="blockIdx.x")
    kernels = [make_kernel(ctx.name("conv_tiled"), body)]
    if partial is not None:  # the slices summed, then bias and epilogue, as the GEMM's split-K

        def add(flat: Expr) -> Stmt:
            def at(n: Expr, oc: Expr, y: Expr, x_: Expr) -> Stmt:
                total = partial[0, n, oc, y, x_]
                for s_ in range(1, split):
                    total = total + partial[s_, n, oc, y, x_]
                return store(oc, (n, y, x_), total)

            shape = (geo.batch, geo.out_channels, oh, ow)
            return let_all("s", unflatten(flat, shape), lambda v: at(*v))

        size = geo.batch * geo.out_channels * oh * ow
        kernels.append(make_kernel(ctx.name("conv_tiled_sum"), grid_loop(size, add)))
    return kernels
