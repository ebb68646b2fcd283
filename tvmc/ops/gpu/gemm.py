"""A shared-memory tiled GEMM for the GPU (MatMul, Gemm and the implicit-GEMM conv use it).

`tiled_gemm` computes, for each of `groups` independent products, out[i, j] = sum_k A[i, k] *
B[k, j] with A and B given as read functions (so a conv's implicit im2col is just another B).
One block computes a BM x BN tile of the output: per step of BK along k the block's threads
load the A and B tiles into shared memory (consecutive threads, consecutive k of A and j of B:
coalesced for row-major operands), a barrier, then each thread multiplies its TM x TN register
tile from the shared tiles (an outer product per k, operands first copied into registers), a
barrier. Edges are guarded only where the sizes do not divide: loads out of range store zeros.

Knobs (ctx.config): `tile_m` [BM, TM], `tile_n` [BN, TN], `tile_k` BK, `unroll_k` (unroll the
inner k loop), `split_k` (K cut into slices summed by a second kernel). Defaults: the largest of
64x64, 32x64, 64x32, 32x32 block tiles that gives at least 132 blocks (one per SM of an H100 or
H200), else 32x32 and split-K up to 264 blocks; 256 threads with 4x4 (64-wide tiles) or 2x2
register tiles. (BM/TM) * (BN/TN) threads per block; more than
1024, or tiles over 48 KiB of shared memory, raise GPUConfigError (error 1 when tuning).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tvmc.graph import TensorType
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
    seq,
)
from tvmc.ops.common import broadcast_shape
from tvmc.ops.gpu.launch import (
    MAX_SHARED_BYTES,
    MAX_THREADS,
    GPUConfigError,
    grid_loop,
    pow2_at_least,
)
from tvmc.ops.lowering import (
    LowerContext,
    LoweringTarget,
    make_kernel,
)
from tvmc.ops.microkernel import ceil_div, let_all, mac, unflatten
from tvmc.ops.registry import Attrs
from tvmc.ops.space import ConfigSpace

FULL_GRID = 264  # blocks that fill an H100/H200 twice over (132 SMs); fewer invite split-K
MIN_SPLIT_STEPS = 4  # a K slice keeps at least this many BK steps
Read = Callable[[Expr, Expr, Expr], Expr]  # (group, row or k, k or column) -> element
Valid = Callable[[Expr, Expr, Expr], Expr | None]  # extra in-range condition (conv padding)
Store = Callable[[Expr, Expr, Expr, Expr], Stmt]  # (group, i, j, value) -> statement


@dataclass(frozen=True)
class GemmTile:
    """Block tile BM x BN, thread tile TM x TN, reduction step BK."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    unroll_k: bool = False

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def shared_bytes(self, itemsize: int) -> int:
        return (self.bm + self.bn) * self.bk * itemsize


DEFAULT_TILES = ((64, 64), (32, 64), (64, 32), (32, 32))  # preferred first


def default_tiles(groups: int, m: int, n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """((BM, TM), (BN, TN)): the largest block tile that still gives a large GPU a block per SM
    (else the smallest, and split-K makes up the rest), 256 threads of 4x4 or 2x2 registers."""
    for bm, bn in DEFAULT_TILES:
        bm, bn = min(bm, pow2_at_least(m)), min(bn, pow2_at_least(n))
        if groups * ceil_div(m, bm) * ceil_div(n, bn) >= FULL_GRID // 2:
            break
    tm = min(bm, 4 if bm >= 64 else 2)
    tn = 1 if bm <= 2 else min(bn, 4 if bn >= 64 else 2)  # a GEMV: one column per thread
    return (bm, tm), (bn, tn)


def gemm_tile(config: Any, groups: int, m: int, n: int, k: int, itemsize: int) -> GemmTile:
    """The tile a config asks for (defaults sized to the problem), checked against the limits."""
    tile_m, tile_n = default_tiles(groups, m, n)
    bm, tm = config.get("tile_m", tile_m)
    bn, tn = config.get("tile_n", tile_n)
    bk = int(config.get("tile_k", min(16, pow2_at_least(k))))
    tile = GemmTile(int(bm), int(bn), bk, int(tm), int(tn), bool(config.get("unroll_k", False)))
    if bm % tm or bn % tn:
        raise GPUConfigError(f"thread tile {tm}x{tn} does not divide block tile {bm}x{bn}")
    if tile.threads > MAX_THREADS:
        raise GPUConfigError(f"{tile.threads} threads per block (at most {MAX_THREADS})")
    if tile.shared_bytes(itemsize) > MAX_SHARED_BYTES:
        raise GPUConfigError(
            f"tiles need {tile.shared_bytes(itemsize)} bytes of shared memory "
            f"(at most {MAX_SHARED_BYTES})"
        )
    return tile


def _and(a: Expr | None, b: Expr | None) -> Expr | None:
    return b if a is None else a if b is None else a & b


def split_k(config: Any, blocks: int, steps: int) -> int:
    """How many slices K is cut into: the knob, else enough blocks to fill a large GPU."""
    if "split_k" in config:
        split = int(config["split_k"])
        if split < 1 or steps % split:
            raise GPUConfigError(f"split_k {split} does not divide the {steps} steps along k")
        return split
    if blocks >= FULL_GRID // 2:
        return 1
    want = min(FULL_GRID // blocks, steps // MIN_SPLIT_STEPS)
    return max([d for d in range(1, want + 1) if steps % d == 0], default=1)


def tiled_gemm(
    ctx: LowerContext,
    name: str,
    groups: int,
    m: int,
    n: int,
    k: int,
    dtype: str,
    a_read: Read,
    b_read: Read,
    store: Store,
    b_valid: Valid | None = None,
) -> list[Kernel]:
    """Kernels computing `groups` products of M x K by K x N, accumulating in `dtype`.

    With split-K, each block sums one slice of K into a workspace temp and a second kernel adds
    the slices and stores (late conv layers: few output tiles, long K). Index expressions are
    bound once with `let` (codegen lowers each use of an expression again, and the implicit
    im2col's indices are long)."""
    tile = gemm_tile(ctx.config, groups, m, n, k, 4 if dtype != "float64" else 8)
    bm, bn, bk, tm, tn, threads = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn, tile.threads
    mb, nb, steps = ceil_div(m, bm), ceil_div(n, bn), ceil_div(k, bk)
    split = split_k(ctx.config, groups * mb * nb, steps)
    per = steps // split
    partial = ctx.temp((split, groups, m, n), dtype, f"{name}_split") if split > 1 else None
    cols = bn // tn  # threads along a tile row
    zero = const(0, dtype)

    def load(
        dst: Buffer,
        rows: int,
        width: int,
        t: Expr,
        transposed: bool,
        value: Callable[[Expr, Expr], tuple[Expr | None, Expr]],
    ) -> Stmt:
        """A `rows` x `width` tile (`width` contiguous in memory) into `dst`, all threads sharing
        the elements; stored as [width][rows] when `transposed`."""
        total = rows * width
        rounds = ceil_div(total, threads)

        def put(r: Expr, c: Expr) -> Stmt:
            where = (c, r) if transposed else (r, c)
            cond, v = value(r, c)
            st = dst.store(where, v)
            return if_then_else(cond, st, dst.store(where, zero)) if cond is not None else st

        def one(rnd: Expr) -> Stmt:
            def at(e: Expr) -> Stmt:
                st = let_all("l", (e // width, e % width), lambda rc: put(*rc))
                return if_then_else(e < total, st) if rounds * threads != total else st

            return let_all("e", (rnd * threads + t,), lambda es: at(es[0]))

        return loop("ld", rounds, one) if rounds > 1 else one(const(0))

    def block(bid: Expr) -> Stmt:
        return let_all("b", unflatten(bid, (split, groups, mb, nb)), lambda sgmn: tiles(*sgmn))

    def tiles(sk: Expr, g: Expr, mi: Expr, ni: Expr) -> Stmt:
        m0, n0 = mi * bm, ni * bn

        def thread(a_s: Buffer, b_s: Buffer, t: Expr) -> Stmt:
            rowcol = (t // cols, t % cols) if cols > 1 else (t, const(0))
            return let_all(
                "t",
                rowcol,
                lambda tyx: allocate(
                    "acc",
                    (tm * tn,),
                    lambda acc: allocate(
                        "ar",
                        (tm,),
                        lambda ar: allocate(
                            "br", (tn,), lambda br: with_regs(a_s, b_s, t, *tyx, acc, ar, br), dtype
                        ),
                        dtype,
                    ),
                    dtype,
                ),
            )

        def with_regs(
            a_s: Buffer,
            b_s: Buffer,
            t: Expr,
            ty: Expr,
            tx: Expr,
            acc: Buffer,
            ar: Buffer,
            br: Buffer,
        ) -> Stmt:
            def a_value(i: Expr, kk: Expr, k0: Expr) -> tuple[Expr | None, Expr]:
                gi, gk = m0 + i, k0 + kk
                cond = _and(gi < m if m % bm else None, gk < k if k % bk else None)
                return cond, a_read(g, gi, gk).astype(dtype)

            def b_value(kk: Expr, j: Expr, k0: Expr) -> tuple[Expr | None, Expr]:
                gk, gj = k0 + kk, n0 + j
                cond = _and(gk < k if k % bk else None, gj < n if n % bn else None)
                cond = _and(cond, b_valid(g, gk, gj) if b_valid else None)
                return cond, b_read(g, gk, gj).astype(dtype)

            def inner(kk: Expr) -> Stmt:
                return seq(
                    loop("i", tm, lambda i: ar.store(i, a_s[kk, ty * tm + i]), kind="unrolled"),
                    loop("j", tn, lambda j: br.store(j, b_s[kk, tx * tn + j]), kind="unrolled"),
                    loop(
                        "i",
                        tm,
                        lambda i: loop(
                            "j",
                            tn,
                            lambda j: acc.store(i * tn + j, mac(ar[i], br[j], acc[i * tn + j])),
                            kind="unrolled",
                        ),
                        kind="unrolled",
                    ),
                )

            def step(ks: Expr) -> Stmt:
                k0 = (sk * per + ks) * bk if split > 1 else ks * bk
                return seq(
                    # A is kept k-major, as B, so the inner loop reads both along a row
                    load(a_s, bm, bk, t, True, lambda i, kk: a_value(i, kk, k0)),
                    load(b_s, bk, bn, t, False, lambda kk, j: b_value(kk, j, k0)),
                    Barrier(),
                    loop("kk", bk, inner, kind="unrolled" if tile.unroll_k else "serial"),
                    Barrier(),
                )

            def out(i: Expr, j: Expr) -> Stmt:
                def at(gi: Expr, gj: Expr) -> Stmt:
                    v = acc[i * tn + j]
                    st = (
                        store(g, gi, gj, v)
                        if partial is None
                        else partial.store((sk, g, gi, gj), v)
                    )
                    cond = _and(gi < m if m % bm else None, gj < n if n % bn else None)
                    return if_then_else(cond, st) if cond is not None else st

                return let_all("o", (m0 + ty * tm + i, n0 + tx * tn + j), lambda ij: at(*ij))

            return seq(
                loop("z", tm * tn, lambda z: acc.store(z, zero), kind="unrolled"),
                loop("ks", per, step) if per > 1 else step(const(0)),
                loop(
                    "i",
                    tm,
                    lambda i: loop("j", tn, lambda j: out(i, j), kind="unrolled"),
                    kind="unrolled",
                ),
            )

        return allocate(
            "a_tile",
            (bk, bm),
            lambda a_s: allocate(
                "b_tile",
                (bk, bn),
                lambda b_s: loop("tx", threads, lambda t: thread(a_s, b_s, t), kind="threadIdx.x"),
                dtype,
                "shared",
            ),
            dtype,
            "shared",
        )

    body = loop("bx", split * groups * mb * nb, block, kind="blockIdx.x")
    kernels = [make_kernel(ctx.name(name), body)]
    if partial is not None:

        def add(flat: Expr) -> Stmt:
            def at(g: Expr, i: Expr, j: Expr) -> Stmt:
                total = partial[0, g, i, j]
                for s_ in range(1, split):
                    total = total + partial[s_, g, i, j]
                return store(g, i, j, total)

            return let_all("s", unflatten(flat, (groups, m, n)), lambda gij: at(*gij))

        kernels.append(make_kernel(ctx.name(f"{name}_sum"), grid_loop(groups * m * n, add)))
    return kernels


# ---- the knob space ------------------------------------------------------------------------------
BLOCK_TILES = (16, 32, 64, 128)
THREAD_TILES = (1, 2, 4, 8)
K_TILES = (8, 16, 32)


def problem(attrs: Attrs, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(groups, M, N, K) as `gemm_gpu` computes it: A's batch folds into M when B has none."""
    trans_a, trans_b = bool(attrs.get("transA", False)), bool(attrs.get("transB", False))
    m = 1 if len(a) == 1 else (a[-1] if trans_a else a[-2])
    k = a[-1] if len(a) == 1 or not trans_a else a[-2]
    n = 1 if len(b) == 1 else (b[-2] if trans_b else b[-1])
    batch = broadcast_shape(tuple(a[:-2]), tuple(b[:-2]))
    if math.prod(b[:-2]) == 1 and len(a) > 1:
        return 1, math.prod(batch) * m, n, k
    return math.prod(batch), m, n, k


def gemm_gpu_space(
    attrs: Attrs, input_types: list[TensorType], target: LoweringTarget
) -> ConfigSpace:
    """Block and thread tiles along M and N, the k step and its unrolling (clamped, distinct)."""
    _, m, n, k = problem(attrs, input_types[0].shape, input_types[1].shape)

    def tiles(extent: int) -> list[tuple[int, int]]:
        top = pow2_at_least(extent)
        return sorted(
            {(min(b, top), min(t, min(b, top))) for b in BLOCK_TILES for t in THREAD_TILES}
        )

    space = ConfigSpace()
    space.other("tile_m", tiles(m))
    space.other("tile_n", tiles(n))
    space.other("tile_k", sorted({min(t, pow2_at_least(k)) for t in K_TILES}))
    space.other("unroll_k", [True, False])
    space.other("split_k", [1, 2, 4, 8, 16])
    return space
