"""The kernels of the shared-memory tiled GEMM (MatMul, Gemm and the implicit-GEMM conv).

`tiled_gemm(ctx, GemmProblem(...))` computes, for each of `groups` independent products,
out[i, j] = sum_k A[i, k] * B[k, j] with A and B given as read functions (so a conv's implicit
im2col is just another B). One block computes a BM x BN tile of the output: per step of BK
along k the block's threads load the A and B tiles into shared memory (consecutive threads,
consecutive chunks of k of A and j of B: coalesced for row-major operands; a chunk is 4 or 2
elements, one 128- or 64-bit load, where the operand is contiguous along it and the sizes
divide), a barrier, then each thread multiplies its TM x TN register tile from the shared tiles
(an outer product per k, each operand row first copied into registers, which LLVM merges into
one vector load), a barrier. Edges are guarded only where the sizes do not divide: loads out of
range store zeros.

`_TiledGemm` emits it top-down: `kernels` -> `block` (the tile's coordinates) -> `shared_tiles`
-> `thread` (its registers and place) -> `thread_body`: the accumulators zeroed, `k_loop` or
`double_buffered_k_loop` (tiles loaded by `load_a` / `load_b`, multiplied by `products`), then
`store_tile`; with split-K, `split_sum` is the second kernel.

Tile configuration, knobs and defaults: tvmc.ops.schedule.gemm_gpu.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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
from tvmc.ops.lowering import LowerContext
from tvmc.ops.schedule.gemm_gpu import (
    BANK_PAD,
    GemmTile,
    ItemFn,
    gemm_tile,
    registers,
    span,
    split_k,
    stage_item,
    store_item,
    thread_chunks,
    unstage_item,
    vector_width,
)
from tvmc.ops.schedule.gpu_launch import all_of, grid_loop
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import ceil_div, let_all, mac, unflatten

Read = Callable[[Expr, Expr, Expr, int], Expr]  # (group, row or k, k or column, lanes) -> value
Valid = Callable[[Expr, Expr, Expr], Expr | None]  # extra in-range condition (conv padding)
Store = Callable[[Expr, Expr, Expr, Expr], Stmt]  # (group, i, j, value) -> statement


@dataclass(frozen=True)
class GemmProblem:
    """`groups` products of M x K by K x N accumulated in `dtype`: how to read and store them.

    `a_read(g, i, k, lanes)` may be asked for `lanes` consecutive elements along k (up to
    `a_vector`, only from a k that is a multiple of lanes), `b_read(g, k, j, lanes)` along j (up
    to `b_vector`): the tile loaders then move 2 or 4 elements per load (`b_valid` needs lanes 1).
    """

    name: str  # the kernel's; split-K's second kernel is `<name>_sum`
    groups: int
    m: int
    n: int
    k: int
    dtype: str
    a_read: Read
    b_read: Read
    store: Store
    b_valid: Valid | None = None
    a_vector: int = 1
    b_vector: int = 1


def tiled_gemm(ctx: LowerContext, gemm: GemmProblem) -> list[Kernel]:
    """Kernels computing `gemm` with the tiles `ctx.config` asks for.

    With split-K, each block sums one slice of K into a workspace temp and a second kernel adds
    the slices and stores (late conv layers: few output tiles, long K). With `double_buffer`,
    the next k step's tiles are fetched into registers before the current step's products and
    stored into the other half of two shared buffers after them: the global loads' latency
    hides behind the arithmetic, and one barrier per step suffices. Index expressions are bound
    once with `let` (codegen lowers each use of an expression again, and the implicit im2col's
    indices are long)."""
    return _TiledGemm.plan(ctx, gemm).kernels()


@dataclass(frozen=True)
class _Block:
    """One block's output tile: its K slice, group, first row and first column."""

    sk: Expr
    g: Expr
    m0: Expr
    n0: Expr


@dataclass(frozen=True)
class _Thread:
    """What one thread's statements use: its block, the shared tiles, its index and row and
    column of register tiles, and its registers."""

    block: _Block
    a_s: Buffer  # [(2,) BK, BM + BANK_PAD]: A k-major, as B, so the products read both by row
    b_s: Buffer  # [(2,) BK, BN]
    t: Expr
    ty: Expr
    tx: Expr
    acc: Buffer  # TM x TN accumulators
    ar: Buffer  # the TM values of A at one k
    br: Buffer  # the TN values of B at one k
    a_stage: Buffer | None = None  # the next step's share of the tiles (double buffering)
    b_stage: Buffer | None = None


@dataclass(frozen=True)
class _TiledGemm:
    """One GEMM's plan; each method emits one step of its kernels."""

    ctx: LowerContext
    gemm: GemmProblem
    tile: GemmTile
    split: int  # K slices (blocks along the grid's first axis)
    per: int  # BK steps per slice
    va: int  # A elements per load, along k
    vb: int  # B elements per load, along j
    partial: Buffer | None  # split-K's slice sums [split, groups, M, N]

    @classmethod
    def plan(cls, ctx: LowerContext, gemm: GemmProblem) -> _TiledGemm:
        """The tiles and split `ctx.config` asks for, checked, and split-K's workspace temp."""
        g = gemm
        f32 = g.dtype == "float32"
        tile = gemm_tile(ctx.config, g.groups, g.m, g.n, g.k, 4 if g.dtype != "float64" else 8)
        blocks = g.groups * ceil_div(g.m, tile.bm) * ceil_div(g.n, tile.bn)
        steps = ceil_div(g.k, tile.bk)
        split = split_k(ctx.config, blocks, steps)
        va = vector_width(g.a_vector, g.k, tile.bk) if f32 else 1
        vb = vector_width(g.b_vector, g.n, tile.bn) if f32 and g.b_valid is None else 1
        partial = (
            ctx.temp((split, g.groups, g.m, g.n), g.dtype, f"{g.name}_split") if split > 1 else None
        )
        return cls(ctx, gemm, tile, split, steps // split, va, vb, partial)

    @property
    def grid(self) -> tuple[int, int, int, int]:
        """Blocks along K slices, groups, tile rows and tile columns."""
        g, t = self.gemm, self.tile
        return self.split, g.groups, ceil_div(g.m, t.bm), ceil_div(g.n, t.bn)

    @property
    def double(self) -> bool:
        """Double buffering: asked for, and a next step to fetch while one multiplies."""
        return self.tile.double_buffer and self.per > 1

    @property
    def zero(self) -> Expr:
        """Zero in the accumulator type."""
        return const(0, self.gemm.dtype)

    def kernels(self) -> list[Kernel]:
        """The GEMM kernel, then with split-K the kernel summing the slices."""
        body = loop("bx", math.prod(self.grid), self.block, kind="blockIdx.x")
        main = make_kernel(self.ctx.name(self.gemm.name), body)
        return [main] if self.partial is None else [main, self.split_sum()]

    def block(self, bid: Expr) -> Stmt:
        """Block `bid`'s K slice, group and tile row and column, bound once, around its tiles."""
        bm, bn = self.tile.bm, self.tile.bn
        return let_all(
            "b",
            unflatten(bid, self.grid),
            lambda c: self.shared_tiles(_Block(c[0], c[1], c[2] * bm, c[3] * bn)),
        )

    def shared_tiles(self, blk: _Block) -> Stmt:
        """The block's shared A and B tiles (two of each when double buffered), its threads."""
        t, dtype = self.tile, self.gemm.dtype
        halves = (2,) if self.double else ()
        a_shape, b_shape = (*halves, t.bk, t.bm + BANK_PAD), (*halves, t.bk, t.bn)

        def threads(a_s: Buffer, b_s: Buffer) -> Stmt:
            return loop(
                "tx", t.threads, lambda i: self.thread(blk, a_s, b_s, i), kind="threadIdx.x"
            )

        return allocate(
            "a_tile",
            a_shape,
            lambda a_s: allocate("b_tile", b_shape, lambda b_s: threads(a_s, b_s), dtype, "shared"),
            dtype,
            "shared",
        )

    def thread(self, blk: _Block, a_s: Buffer, b_s: Buffer, t: Expr) -> Stmt:
        """Thread `t`'s registers, then its row and column among the register tiles."""
        tile = self.tile
        cols = tile.bn // tile.tn  # threads along a tile row
        rowcol = (t // cols, t % cols) if cols > 1 else (t, const(0))
        regs = [("acc", tile.tm * tile.tn), ("ar", tile.tm), ("br", tile.tn)]
        if self.double:
            regs += [("a_stage", ceil_div(tile.bm * tile.bk // self.va, tile.threads) * self.va)]
            regs += [("b_stage", ceil_div(tile.bk * tile.bn // self.vb, tile.threads) * self.vb)]

        def placed(*bufs: Buffer) -> Stmt:
            return let_all(
                "t", rowcol, lambda yx: self.thread_body(_Thread(blk, a_s, b_s, t, *yx, *bufs))
            )

        return registers(regs, self.gemm.dtype, placed)

    def thread_body(self, th: _Thread) -> Stmt:
        """The accumulators zeroed, the steps along k, the register tile stored."""
        return seq(
            loop("z", self.tile.tm * self.tile.tn, lambda z: th.acc.store(z, self.zero),
                 kind="unrolled"),
            self.double_buffered_k_loop(th) if self.double else self.k_loop(th),
            self.store_tile(th),
        )  # fmt: skip

    # ---- loading the tiles of one k step ------------------------------------------------------
    def first_k(self, blk: _Block, ks: Expr) -> Expr:
        """The first k of step `ks` of the block's K slice."""
        bk = self.tile.bk
        return (blk.sk * self.per + ks) * bk if self.split > 1 else ks * bk

    def load_a(self, th: _Thread, k0: Expr, put: ItemFn) -> Stmt:
        """put(round, lanes, item) for the thread's share of the A tile from k `k0`."""
        g, t, blk, va = self.gemm, self.tile, th.block, self.va

        def item(rnd: Expr, i: Expr, kk: Expr) -> Stmt:
            gi, gk = blk.m0 + i, k0 + kk
            cond = all_of((gi < g.m if g.m % t.bm else None, gk < g.k if g.k % t.bk else None))
            value = g.a_read(blk.g, gi, gk, va).astype(g.dtype)
            return put(rnd, va, ((span(kk, va), i), cond, value))

        return thread_chunks(t.bm, t.bk, va, t.threads, th.t, item)

    def load_b(self, th: _Thread, k0: Expr, put: ItemFn) -> Stmt:
        """put(round, lanes, item) for the thread's share of the B tile from k `k0`."""
        g, t, blk, vb = self.gemm, self.tile, th.block, self.vb

        def item(rnd: Expr, kk: Expr, j: Expr) -> Stmt:
            gk, gj = k0 + kk, blk.n0 + j
            cond = all_of((gk < g.k if g.k % t.bk else None, gj < g.n if g.n % t.bn else None))
            cond = all_of((cond, g.b_valid(blk.g, gk, gj) if g.b_valid else None))
            value = g.b_read(blk.g, gk, gj, vb).astype(g.dtype)
            return put(rnd, vb, ((kk, span(j, vb)), cond, value))

        return thread_chunks(t.bk, t.bn, vb, t.threads, th.t, item)

    def store_tiles(self, th: _Thread, ks: Expr, half: tuple[Expr, ...]) -> Stmt:
        """Step `ks`'s A and B tiles straight into shared buffer `half`, zeros out of range."""
        k0 = self.first_k(th.block, ks)
        return seq(
            self.load_a(th, k0, store_item(th.a_s, half, self.zero)),
            self.load_b(th, k0, store_item(th.b_s, half, self.zero)),
        )

    def fetch_tiles(self, th: _Thread, ks: Expr) -> Stmt:
        """The thread's share of step `ks`'s tiles into its stage registers."""
        assert th.a_stage is not None and th.b_stage is not None
        k0 = self.first_k(th.block, ks)
        return seq(
            self.load_a(th, k0, stage_item(th.a_stage, self.zero)),
            self.load_b(th, k0, stage_item(th.b_stage, self.zero)),
        )

    def unstage_tiles(self, th: _Thread, ks: Expr, half: Expr) -> Stmt:
        """The stage registers `fetch_tiles` filled for step `ks`, into shared buffer `half`."""
        assert th.a_stage is not None and th.b_stage is not None
        k0 = self.first_k(th.block, ks)
        return seq(
            self.load_a(th, k0, unstage_item(th.a_stage, th.a_s, half)),
            self.load_b(th, k0, unstage_item(th.b_stage, th.b_s, half)),
        )

    # ---- the products and the k loops ---------------------------------------------------------
    def products(self, th: _Thread, half: tuple[Expr, ...]) -> Stmt:
        """The register tile's multiply-adds over one BK step of shared buffer `half`."""
        kind = "unrolled" if self.tile.unroll_k else "serial"
        return loop("kk", self.tile.bk, lambda kk: self.outer_product(th, half, kk), kind=kind)

    def outer_product(self, th: _Thread, half: tuple[Expr, ...], kk: Expr) -> Stmt:
        """Row `kk` of both shared tiles into registers, then TM x TN multiply-adds."""
        tm, tn, acc, ar, br = self.tile.tm, self.tile.tn, th.acc, th.ar, th.br
        return seq(
            # scalar reads that LLVM's load-store vectorizer merges (ld.shared.v4 for 4-wide
            # tiles: rows are 16-byte aligned); an explicit vector copy into the register array
            # made LLVM hoist whole unrolled k loops (a pointwise conv took 255 registers and
            # spilled)
            loop("i", tm, lambda i: ar.store(i, th.a_s[(*half, kk, th.ty * tm + i)]),
                 kind="unrolled"),
            loop("j", tn, lambda j: br.store(j, th.b_s[(*half, kk, th.tx * tn + j)]),
                 kind="unrolled"),
            nest([("i", tm, "unrolled"), ("j", tn, "unrolled")],
                 lambda i, j: acc.store(i * tn + j, mac(ar[i], br[j], acc[i * tn + j]))),
        )  # fmt: skip

    def k_loop(self, th: _Thread) -> Stmt:
        """Per step: the tiles into shared memory, a barrier, the products, a barrier."""

        def step(ks: Expr) -> Stmt:
            return seq(self.store_tiles(th, ks, ()), Barrier(), self.products(th, ()), Barrier())

        return loop("ks", self.per, step) if self.per > 1 else step(const(0))

    def double_buffered_k_loop(self, th: _Thread) -> Stmt:
        """The first step's tiles into shared buffer 0, a barrier, then the double steps."""
        return seq(
            self.store_tiles(th, const(0), (const(0),)),
            Barrier(),
            loop("ks", self.per, lambda ks: self.double_step(th, ks)),
        )

    def double_step(self, th: _Thread, ks: Expr) -> Stmt:
        """The next step's tiles fetched into registers, this step's products from buffer
        ks % 2, the registers stored into the other buffer, one barrier."""
        more = ks + 1 < self.per  # the same on every thread: no barrier sits under it

        def with_halves(cur: Expr, nxt: Expr) -> Stmt:
            return seq(
                if_then_else(more, self.fetch_tiles(th, ks + 1)),
                self.products(th, (cur,)),
                if_then_else(more, self.unstage_tiles(th, ks + 1, nxt)),
                Barrier(),
            )

        return let_all("h", (ks % 2, (ks + 1) % 2), lambda h: with_halves(*h))

    # ---- the results ----------------------------------------------------------------------------
    def store_tile(self, th: _Thread) -> Stmt:
        """The register tile, one output (or split-K slice sum) per accumulator."""
        tiles = [("i", self.tile.tm, "unrolled"), ("j", self.tile.tn, "unrolled")]
        return nest(tiles, lambda i, j: self.store_accumulator(th, i, j))

    def store_accumulator(self, th: _Thread, i: Expr, j: Expr) -> Stmt:
        """Accumulator (i, j) to its output, guarded where the tiles overhang M or N."""
        g, t, blk = self.gemm, self.tile, th.block

        def at(gi: Expr, gj: Expr) -> Stmt:
            v = th.acc[i * t.tn + j]
            if self.partial is None:
                st = g.store(blk.g, gi, gj, v)
            else:
                st = self.partial.store((blk.sk, blk.g, gi, gj), v)
            cond = all_of((gi < g.m if g.m % t.bm else None, gj < g.n if g.n % t.bn else None))
            return if_then_else(cond, st) if cond is not None else st

        where = (blk.m0 + th.ty * t.tm + i, blk.n0 + th.tx * t.tn + j)
        return let_all("o", where, lambda ij: at(*ij))

    def split_sum(self) -> Kernel:
        """Split-K's second kernel: per output, the slices summed and stored."""
        g = self.gemm

        def output(flat: Expr) -> Stmt:
            return let_all(
                "s", unflatten(flat, (g.groups, g.m, g.n)), lambda c: self.sum_slices(*c)
            )

        return make_kernel(self.ctx.name(f"{g.name}_sum"), grid_loop(g.groups * g.m * g.n, output))

    def sum_slices(self, g: Expr, i: Expr, j: Expr) -> Stmt:
        """Output (g, i, j): the split-K slices added in order, stored."""
        assert self.partial is not None
        total = self.partial[0, g, i, j]
        for s in range(1, self.split):
            total = total + self.partial[s, g, i, j]
        return self.gemm.store(g, i, j, total)
