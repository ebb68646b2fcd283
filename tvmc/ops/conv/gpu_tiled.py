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

`_TiledConv` emits it top-down, with the GEMM's step names (`gemm_gpu_kernel`) and tile movers:
`kernels` -> `block` (the tile's coordinates) -> `shared_tiles` -> `thread` (its place and
registers) -> `thread_body`: the accumulators zeroed, `k_loop` or `double_buffered_k_loop` over
the channel steps (patch and weights loaded by `load_patch` / `load_weights`, multiplied by
`products`, one `tap` at a time), then `store_outputs`; with split-K, `split_sum` is the second
kernel. The plan and the knobs: `gpu_tiled_plan`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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
from tvmc.ops.conv.gpu_tiled_plan import TiledPlan, tiled_plan
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef
from tvmc.ops.schedule.gemm_gpu import (
    Item,
    ItemFn,
    registers,
    span,
    split_k,
    stage_item,
    store_item,
    thread_chunks,
    unstage_item,
)
from tvmc.ops.schedule.gpu_launch import all_of, grid_loop
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import accumulator_dtype, ceil_div, let_all, mac, unflatten

UNROLL_TAPS = 32  # windows up to this many taps are unrolled unless unroll_k says so


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
    return _TiledConv.of(ctx, geo, x, w, bias, out, epilogue).kernels()


@dataclass(frozen=True)
class _Block:
    """One block's outputs: its slice of channel steps, image, group, first output channel (of
    the group), first row and first column."""

    sk: Expr
    n: Expr
    g: Expr
    oc0: Expr
    y0: Expr
    x0: Expr


@dataclass(frozen=True)
class _Thread:
    """What one thread's statements use: its block, the shared patch and weights, its index,
    channels, row and pixels within the tile, and its registers."""

    block: _Block
    patch: Buffer  # [(2,) ICb, patch rows, pitch]
    wts: Buffer  # [(2,) ICb * taps, OCb + pad]
    t: Expr
    to: Expr  # its OCt channels start at to * OCt
    ty: Expr  # its output row in the tile
    tx: Expr  # its first pixel along the row; the next are OWb / PXt apart
    acc: Buffer  # OCt x PXt accumulators
    wr: Buffer  # the OCt weights of one channel and tap
    xr: Buffer  # the PXt inputs of one channel and tap
    p_stage: Buffer | None = None  # double buffering: the next step's share of the patch
    w_stage: Buffer | None = None  # and of the weights


@dataclass(frozen=True)
class _TiledConv:
    """One conv's plan and operands; each method emits one step of its kernels."""

    ctx: LowerContext
    geo: ConvGeometry
    x: TensorRef
    plan: TiledPlan
    acc_t: str
    weight: Callable[[Expr, Expr], Expr]  # W[oc, kk] where it lies (runtime weights)
    packed: Buffer | None  # constant weights packed [K, OC]
    store: Callable[[Expr, tuple[Expr, ...], Expr], Stmt]  # bias, epilogue, output
    split: int  # slices of the channel steps, cut across blocks
    per: int  # channel steps per slice
    partial: Buffer | None  # split-K's slice sums [split, N, OC, OH, OW]

    @classmethod
    def of(
        cls,
        ctx: LowerContext,
        geo: ConvGeometry,
        x: TensorRef,
        w: TensorRef,
        bias: TensorRef | None,
        out: Buffer,
        epilogue: Epilogue | None,
    ) -> _TiledConv:
        """The plan `ctx.config` asks for, checked, with the packed weights and split-K's temp."""
        plan = tiled_plan(ctx.config, geo, packed=w.value is not None)
        acc_t = accumulator_dtype(out.dtype)
        weight = weight_read(ctx, w, geo)
        # constant weights packed [K, OC]: a warp loads consecutive channels of one tap
        # (coalesced, no bank conflicts)
        packed = None
        if w.value is not None:
            k = geo.icg * math.prod(geo.kernel)
            packed = ctx.param(np.ascontiguousarray(w.value.reshape(geo.out_channels, k).T), "w_t")
        store = output_store(geo, bias, out, epilogue, acc_t)
        steps = ceil_div(geo.icg, plan.icb)
        split = split_k(ctx.config, math.prod(plan.output_tiles(geo)), steps)
        shape = (split, geo.batch, geo.out_channels, *geo.out_shape)
        partial = ctx.temp(shape, acc_t, "conv_split") if split > 1 else None
        return cls(ctx, geo, x, plan, acc_t, weight, packed, store, split, steps // split, partial)

    @property
    def grid(self) -> tuple[int, ...]:
        """Blocks along slices, images, groups, channel tiles, tile rows and tile columns."""
        return (self.split, *self.plan.output_tiles(self.geo))

    @property
    def taps(self) -> int:
        """Positions in the kernel window."""
        return math.prod(self.geo.kernel)

    @property
    def cols(self) -> int:
        """Threads along a tile row."""
        return self.plan.owb // self.plan.pxt

    @property
    def double(self) -> bool:
        """Double buffering: asked for, and a next step to fetch while one multiplies."""
        return self.plan.double_buffer and self.per > 1

    @property
    def zero(self) -> Expr:
        """Zero in the accumulator type."""
        return const(0, self.acc_t)

    def overhangs(self, axis: int) -> bool:
        """Whether the last tile's patch along `axis` (0: rows, 1: columns) runs past the
        input's end."""
        plan, geo = self.plan, self.geo
        tiles, tile = plan.output_tiles(geo)[3 + axis], (plan.ohb, plan.owb)[axis]
        reach = (tiles - 1) * tile * geo.strides[axis] - geo.pad_begin[axis] + plan.patch[axis]
        return reach > geo.in_shape[axis]

    def kernels(self) -> list[Kernel]:
        """The conv kernel, then with split-K the kernel summing the slices."""
        body = loop("bx", math.prod(self.grid), self.block, kind="blockIdx.x")
        main = make_kernel(self.ctx.name("conv_tiled"), body)
        return [main] if self.partial is None else [main, self.split_sum()]

    def block(self, bid: Expr) -> Stmt:
        """Block `bid`'s slice, image, group and tile, bound once, around its shared tiles."""
        plan = self.plan

        def tile(sk: Expr, n: Expr, g: Expr, oi: Expr, yi: Expr, xi: Expr) -> Stmt:
            return self.shared_tiles(_Block(sk, n, g, oi * plan.ocb, yi * plan.ohb, xi * plan.owb))

        return let_all("b", unflatten(bid, self.grid), lambda v: tile(*v))

    def shared_tiles(self, blk: _Block) -> Stmt:
        """The block's shared input patch and weights (two of each when double buffered), its
        threads."""
        plan, acc_t = self.plan, self.acc_t
        halves = (2,) if self.double else ()
        patch_shape = (*halves, plan.icb, plan.patch[0], plan.pitch)
        wts_shape = (*halves, plan.icb * self.taps, plan.ocb + plan.pad)

        def threads(patch: Buffer, wts: Buffer) -> Stmt:
            return loop(
                "tx", plan.threads, lambda t: self.thread(blk, patch, wts, t), kind="threadIdx.x"
            )

        return allocate(
            "patch",
            patch_shape,
            lambda patch: allocate(
                "wts", wts_shape, lambda wts: threads(patch, wts), acc_t, "shared"
            ),
            acc_t,
            "shared",
        )

    def thread(self, blk: _Block, patch: Buffer, wts: Buffer, t: Expr) -> Stmt:
        """Thread `t`'s channels, row and pixels in the tile, bound once, then its registers."""
        plan, cols = self.plan, self.cols
        per_oc = plan.ohb * cols
        regs = [("acc", plan.oct * plan.pxt), ("wr", plan.oct), ("xr", plan.pxt)]
        if self.double:
            staged = plan.staged(self.taps)  # registers per thread: patch, weights
            regs += [("p_stage", staged[0]), ("w_stage", staged[1])]

        def placed(to: Expr, ty: Expr, tx: Expr) -> Stmt:
            return registers(
                regs,
                self.acc_t,
                lambda *bufs: self.thread_body(_Thread(blk, patch, wts, t, to, ty, tx, *bufs)),
            )

        return let_all("t", (t // per_oc, t % per_oc // cols, t % cols), lambda v: placed(*v))

    def thread_body(self, th: _Thread) -> Stmt:
        """The accumulators zeroed, the channel steps, the register tile stored."""
        return seq(
            loop("z", self.plan.oct * self.plan.pxt, lambda z: th.acc.store(z, self.zero),
                 kind="unrolled"),
            self.double_buffered_k_loop(th) if self.double else self.k_loop(th),
            self.store_outputs(th),
        )  # fmt: skip

    # ---- loading the patch and weights of one channel step -----------------------------------
    def first_channel(self, blk: _Block, ks: Expr) -> Expr:
        """The first input channel (of the group) of step `ks` of the block's slice."""
        icb = self.plan.icb
        return (blk.sk * self.per + ks) * icb if self.split > 1 else ks * icb

    def load_patch(self, th: _Thread, ic0: Expr, put: ItemFn) -> Stmt:
        """put(round, 1, item) for the thread's share of the input patch from channel `ic0`."""
        plan, geo, blk = self.plan, self.geo, th.block
        (ph, pw), (sh, sw), (pad_h, pad_w) = plan.patch, geo.strides, geo.pad_begin

        def element(rnd: Expr, r: Expr, px: Expr) -> Stmt:
            c, py = r // ph, r % ph
            where = (c, py, blk.y0 * sh - pad_h + py, blk.x0 * sw - pad_w + px)
            return let_all("p", where, lambda v: put(rnd, 1, self.patch_item(blk, ic0, px, *v)))

        if plan.pitch == pw:
            return thread_chunks(plan.icb * ph, pw, 1, plan.threads, th.t, element)

        def pitch_element(rnd: Expr, r: Expr, px: Expr) -> Stmt:  # the extra columns idle
            return if_then_else(px < pw, element(rnd, r, px))

        # whole pitches per thread run: a warp's stores then hit consecutive words
        return thread_chunks(plan.icb * ph, plan.pitch, 1, plan.threads, th.t, pitch_element)

    def patch_item(
        self, blk: _Block, ic0: Expr, px: Expr, c: Expr, py: Expr, iy: Expr, ix: Expr
    ) -> Item:
        """Patch element (c, py, px): input (ic0 + c, iy, ix), zero where the channels run out
        or in the padding (tested only where they can)."""
        geo, (h, wd), (pad_h, pad_w) = self.geo, self.geo.in_shape, self.geo.pad_begin
        ic = ic0 + c
        tests = [ic < geo.icg] if geo.icg % self.plan.icb else []
        tests += [iy >= 0] if pad_h else []
        tests += [iy < h] if self.overhangs(0) else []
        tests += [ix >= 0] if pad_w else []
        tests += [ix < wd] if self.overhangs(1) else []
        value = self.x.read((blk.n, blk.g * geo.icg + ic, iy, ix)).astype(self.acc_t)
        return (c, py, px), all_of(tests), value

    def load_weights(self, th: _Thread, ic0: Expr, put: ItemFn) -> Stmt:
        """put(round, lanes, item) for the thread's share of the weights from channel `ic0`:
        packed ones in runs of `wvec` channels, others with consecutive threads on consecutive
        taps of one channel."""
        plan, blk, rows = self.plan, th.block, self.plan.icb * self.taps
        if self.packed is None:

            def taps_of(rnd: Expr, o: Expr, j: Expr) -> Stmt:
                return put(rnd, 1, self.weight_item(blk, ic0, o, j, 1))

            return thread_chunks(plan.ocb, rows, 1, plan.threads, th.t, taps_of)

        def channels_of(rnd: Expr, j: Expr, o: Expr) -> Stmt:
            return put(rnd, plan.wvec, self.weight_item(blk, ic0, o, j, plan.wvec))

        return thread_chunks(rows, plan.ocb, plan.wvec, plan.threads, th.t, channels_of)

    def weight_item(self, blk: _Block, ic0: Expr, o: Expr, j: Expr, lanes: int) -> Item:
        """Weights of tap row `j` of the step, `lanes` channels from `o`: zero where the
        channels run out."""
        geo, plan, taps = self.geo, self.plan, self.taps
        tests = [blk.oc0 + o < geo.ocg] if geo.ocg % plan.ocb else []
        tests += [ic0 * taps + j < geo.icg * taps] if geo.icg % plan.icb else []
        oc, kk = blk.g * geo.ocg + blk.oc0 + o, ic0 * taps + j
        if self.packed is None:
            value = self.weight(oc, kk).astype(self.acc_t)
        else:
            value = self.packed[kk, span(oc, lanes)].astype(self.acc_t)
        return (j, span(o, lanes)), all_of(tests), value

    def store_tiles(self, th: _Thread, ks: Expr, half: tuple[Expr, ...]) -> Stmt:
        """Step `ks`'s patch and weights straight into shared buffer `half`, zeros outside."""
        ic0 = self.first_channel(th.block, ks)
        return seq(
            self.load_patch(th, ic0, store_item(th.patch, half, self.zero)),
            self.load_weights(th, ic0, store_item(th.wts, half, self.zero)),
        )

    def fetch_tiles(self, th: _Thread, ks: Expr) -> Stmt:
        """The thread's share of step `ks`'s patch and weights into its stage registers."""
        assert th.p_stage is not None and th.w_stage is not None
        ic0 = self.first_channel(th.block, ks)
        return seq(
            self.load_patch(th, ic0, stage_item(th.p_stage, self.zero)),
            self.load_weights(th, ic0, stage_item(th.w_stage, self.zero)),
        )

    def unstage_tiles(self, th: _Thread, ks: Expr, half: Expr) -> Stmt:
        """The stage registers `fetch_tiles` filled for step `ks`, into shared buffer `half`."""
        assert th.p_stage is not None and th.w_stage is not None
        ic0 = self.first_channel(th.block, ks)
        return seq(
            self.load_patch(th, ic0, unstage_item(th.p_stage, th.patch, half)),
            self.load_weights(th, ic0, unstage_item(th.w_stage, th.wts, half)),
        )

    # ---- the products and the channel loops ---------------------------------------------------
    def products(self, th: _Thread, half: tuple[Expr, ...]) -> Stmt:
        """The register tile's multiply-adds over one channel step of shared buffer `half`."""
        (kh, kw), plan = self.geo.kernel, self.plan
        unroll = "unrolled" if plan.unroll or self.taps <= UNROLL_TAPS else "serial"
        window = [("ry", kh, unroll), ("rx", kw, unroll)]
        return loop(
            "c", plan.icb, lambda c: nest(window, lambda ry, rx: self.tap(th, half, c, ry, rx))
        )

    def tap(self, th: _Thread, half: tuple[Expr, ...], c: Expr, ry: Expr, rx: Expr) -> Stmt:
        """Channel `c`, tap (ry, rx): OCt weights (one vector load) and PXt inputs into
        registers, then OCt x PXt multiply-adds."""
        plan, geo, cols = self.plan, self.geo, self.cols
        (sh, sw), (dh, dw), kw = geo.strides, geo.dilations, geo.kernel[1]
        oct, pxt, acc, wr, xr = plan.oct, plan.pxt, th.acc, th.wr, th.xr
        row = th.ty * sh + ry * dh
        j = c * self.taps + ry * kw + rx
        return seq(
            wr.store(span(const(0), oct), th.wts[(*half, j, span(th.to * oct, oct))]),
            loop("p", pxt, lambda p: xr.store(
                p, th.patch[(*half, c, row, (th.tx + p * cols) * sw + rx * dw)]),
                kind="unrolled"),
            nest([("i", oct, "unrolled"), ("p", pxt, "unrolled")],
                 lambda i, p: acc.store(i * pxt + p, mac(wr[i], xr[p], acc[i * pxt + p]))),
        )  # fmt: skip

    def k_loop(self, th: _Thread) -> Stmt:
        """Per channel step: patch and weights into shared memory, a barrier, the products, a
        barrier."""

        def step(ks: Expr) -> Stmt:
            return seq(self.store_tiles(th, ks, ()), Barrier(), self.products(th, ()), Barrier())

        return loop("ks", self.per, step) if self.per > 1 else step(const(0))

    def double_buffered_k_loop(self, th: _Thread) -> Stmt:
        """The first step's patch and weights into shared buffer 0, a barrier, then the double
        steps."""
        return seq(
            self.store_tiles(th, const(0), (const(0),)),
            Barrier(),
            loop("ks", self.per, lambda ks: self.double_step(th, ks)),
        )

    def double_step(self, th: _Thread, ks: Expr) -> Stmt:
        """The next step's patch and weights fetched into registers, this step's products from
        buffer ks % 2, the registers stored into the other buffer, one barrier."""
        more = ks + 1 < self.per  # the same on every thread: no barrier sits under it

        def with_halves(cur: Expr, nxt: Expr) -> Stmt:
            return seq(
                if_then_else(more, self.fetch_tiles(th, ks + 1)),
                self.products(th, (cur,)),
                if_then_else(more, self.unstage_tiles(th, ks + 1, nxt)),
                Barrier(),
            )

        return let_all("h", (ks % 2, (ks + 1) % 2), lambda hs: with_halves(*hs))

    # ---- the results ----------------------------------------------------------------------------
    def store_outputs(self, th: _Thread) -> Stmt:
        """The register tile, one output (or split-K slice sum) per accumulator."""
        tiles = [("i", self.plan.oct, "unrolled"), ("p", self.plan.pxt, "unrolled")]
        return nest(tiles, lambda i, p: self.store_output(th, i, p))

    def store_output(self, th: _Thread, i: Expr, p: Expr) -> Stmt:
        """Accumulator (i, p) to its output, guarded where the tile overhangs the channels, rows
        or columns."""
        geo, plan, blk = self.geo, self.plan, th.block
        (oh, ow), v = geo.out_shape, th.acc[i * plan.pxt + p]
        oc, oy, ox = blk.oc0 + th.to * plan.oct + i, blk.y0 + th.ty, blk.x0 + th.tx + p * self.cols
        tests = [oc < geo.ocg] if geo.ocg % plan.ocb else []
        tests += [oy < oh] if oh % plan.ohb else []
        tests += [ox < ow] if ow % plan.owb else []
        if self.partial is None:
            st = self.store(blk.g * geo.ocg + oc, (blk.n, oy, ox), v)
        else:
            st = self.partial.store((blk.sk, blk.n, blk.g * geo.ocg + oc, oy, ox), v)
        cond = all_of(tests)
        return if_then_else(cond, st) if cond is not None else st

    def split_sum(self) -> Kernel:
        """Split-K's second kernel: per output, the slices summed, then bias and epilogue."""
        shape = (self.geo.batch, self.geo.out_channels, *self.geo.out_shape)

        def output(flat: Expr) -> Stmt:
            return let_all("s", unflatten(flat, shape), lambda v: self.sum_slices(*v))

        return make_kernel(self.ctx.name("conv_tiled_sum"), grid_loop(math.prod(shape), output))

    def sum_slices(self, n: Expr, oc: Expr, y: Expr, x: Expr) -> Stmt:
        """Output (n, oc, y, x): the split-K slices added in order, stored."""
        assert self.partial is not None
        total = self.partial[0, n, oc, y, x]
        for s in range(1, self.split):
            total = total + self.partial[s, n, oc, y, x]
        return self.store(oc, (n, y, x), total)
