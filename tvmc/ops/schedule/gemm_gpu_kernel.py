"""The kernels of the shared-memory tiled GEMM (MatMul, Gemm and the implicit-GEMM conv).

`tiled_gemm` computes, for each of `groups` independent products, out[i, j] = sum_k A[i, k] *
B[k, j] with A and B given as read functions (so a conv's implicit im2col is just another B).
One block computes a BM x BN tile of the output: per step of BK along k the block's threads
load the A and B tiles into shared memory (consecutive threads, consecutive chunks of k of A
and j of B: coalesced for row-major operands; a chunk is 4 or 2 elements, one 128- or 64-bit
load, where the operand is contiguous along it and the sizes divide), a barrier, then each
thread multiplies its TM x TN register tile from the shared tiles (an outer product per k, each
operand row first copied into registers, which LLVM merges into one vector load), a barrier.
Edges are guarded only where the sizes do not divide: loads out of range store zeros.

Tile configuration, knobs and defaults: tvmc.ops.schedule.gemm_gpu.
"""

from __future__ import annotations

from collections.abc import Callable

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
from tvmc.ops.lowering import LowerContext
from tvmc.ops.schedule.gemm_gpu import (
    BANK_PAD,
    ItemFn,
    gemm_tile,
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
    a_vector: int = 1,
    b_vector: int = 1,
) -> list[Kernel]:
    """Kernels computing `groups` products of M x K by K x N, accumulating in `dtype`.

    `a_read(g, i, k, lanes)` may be asked for `lanes` consecutive elements along k (up to
    `a_vector`, only from a k that is a multiple of lanes), `b_read(g, k, j, lanes)` along j (up
    to `b_vector`): the tile loaders then move 2 or 4 elements per load (`b_valid` needs lanes 1).
    With split-K, each block sums one slice of K into a workspace temp and a second kernel adds
    the slices and stores (late conv layers: few output tiles, long K). With `double_buffer`,
    the next k step's tiles are fetched into registers before the current step's products and
    stored into the other half of two shared buffers after them: the global loads' latency
    hides behind the arithmetic, and one barrier per step suffices. Index expressions are bound
    once with `let` (codegen lowers each use of an expression again, and the implicit im2col's
    indices are long)."""
    tile = gemm_tile(ctx.config, groups, m, n, k, 4 if dtype != "float64" else 8)
    bm, bn, bk, tm, tn, threads = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn, tile.threads
    mb, nb, steps = ceil_div(m, bm), ceil_div(n, bn), ceil_div(k, bk)
    split = split_k(ctx.config, groups * mb * nb, steps)
    per = steps // split
    double = tile.double_buffer and per > 1
    va = vector_width(a_vector, k, bk) if dtype == "float32" else 1
    vb = vector_width(b_vector, n, bn) if dtype == "float32" and b_valid is None else 1
    partial = ctx.temp((split, groups, m, n), dtype, f"{name}_split") if split > 1 else None
    cols = bn // tn  # threads along a tile row
    zero = const(0, dtype)
    halves = (2,) if double else ()

    def block(bid: Expr) -> Stmt:
        return let_all("b", unflatten(bid, (split, groups, mb, nb)), lambda sgmn: tiles(*sgmn))

    def tiles(sk: Expr, g: Expr, mi: Expr, ni: Expr) -> Stmt:
        m0, n0 = mi * bm, ni * bn

        def a_value(i: Expr, kk: Expr, k0: Expr) -> tuple[Expr | None, Expr]:
            gi, gk = m0 + i, k0 + kk
            cond = all_of((gi < m if m % bm else None, gk < k if k % bk else None))
            return cond, a_read(g, gi, gk, va).astype(dtype)

        def b_value(kk: Expr, j: Expr, k0: Expr) -> tuple[Expr | None, Expr]:
            gk, gj = k0 + kk, n0 + j
            cond = all_of((gk < k if k % bk else None, gj < n if n % bn else None))
            cond = all_of((cond, b_valid(g, gk, gj) if b_valid else None))
            return cond, b_read(g, gk, gj, vb).astype(dtype)

        # (rows, width, vector, value, where in the shared tile): A is kept k-major, as B, so
        # the inner loop reads both along a row
        a_tile = (bm, bk, va, a_value, lambda i, kk: (span(kk, va), i))
        b_tile = (bk, bn, vb, b_value, lambda kk, j: (kk, span(j, vb)))

        def k_start(ks: Expr) -> Expr:
            return (sk * per + ks) * bk if split > 1 else ks * bk

        def items(t: Expr, k0: Expr, spec: tuple, body: ItemFn) -> Stmt:
            """body(round, lanes, item) for this thread's share of one tile at k step `k0`."""
            rows, width, vec, value, where = spec

            def item(rnd: Expr, r: Expr, c: Expr) -> Stmt:
                return body(rnd, vec, (where(r, c), *value(r, c, k0)))

            return thread_chunks(rows, width, vec, threads, t, item)

        def thread(a_s: Buffer, b_s: Buffer, t: Expr) -> Stmt:
            rowcol = (t // cols, t % cols) if cols > 1 else (t, const(0))
            regs = [("acc", tm * tn), ("ar", tm), ("br", tn)]
            if double:
                regs += [("a_stage", ceil_div(bm * bk // va, threads) * va)]
                regs += [("b_stage", ceil_div(bk * bn // vb, threads) * vb)]

            def with_bufs(i: int, bufs: list[Buffer]) -> Stmt:
                if i == len(regs):
                    return let_all("t", rowcol, lambda tyx: with_regs(a_s, b_s, t, *tyx, *bufs))
                name_, size = regs[i]
                return allocate(name_, (size,), lambda b: with_bufs(i + 1, [*bufs, b]), dtype)

            return with_bufs(0, [])

        def with_regs(
            a_s: Buffer,
            b_s: Buffer,
            t: Expr,
            ty: Expr,
            tx: Expr,
            acc: Buffer,
            ar: Buffer,
            br: Buffer,
            a_stage: Buffer | None = None,
            b_stage: Buffer | None = None,
        ) -> Stmt:
            def products(half: Expr | None) -> Stmt:
                def inner(kk: Expr) -> Stmt:
                    at = (half,) if half is not None else ()
                    return seq(
                        # scalar reads that LLVM's load-store vectorizer merges (ld.shared.v4
                        # for 4-wide tiles: rows are 16-byte aligned); an explicit vector copy
                        # into the register array made LLVM hoist whole unrolled k loops (a
                        # pointwise conv took 255 registers and spilled)
                        loop("i", tm, lambda i: ar.store(i, a_s[(*at, kk, ty * tm + i)]),
                             kind="unrolled"),
                        loop("j", tn, lambda j: br.store(j, b_s[(*at, kk, tx * tn + j)]),
                             kind="unrolled"),
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
                    )  # fmt: skip

                return loop("kk", bk, inner, kind="unrolled" if tile.unroll_k else "serial")

            def step(ks: Expr) -> Stmt:
                k0 = k_start(ks)
                return seq(
                    items(t, k0, a_tile, store_item(a_s, (), zero)),
                    items(t, k0, b_tile, store_item(b_s, (), zero)),
                    Barrier(),
                    products(None),
                    Barrier(),
                )

            def double_step(ks: Expr) -> Stmt:
                assert a_stage is not None and b_stage is not None
                more = ks + 1 < per  # the same on every thread: no barrier sits under it

                def with_halves(cur: Expr, nxt: Expr) -> Stmt:
                    k1 = k_start(ks + 1)
                    fetch = seq(
                        items(t, k1, a_tile, stage_item(a_stage, zero)),
                        items(t, k1, b_tile, stage_item(b_stage, zero)),
                    )
                    unstage = seq(
                        items(t, k1, a_tile, unstage_item(a_stage, a_s, nxt)),
                        items(t, k1, b_tile, unstage_item(b_stage, b_s, nxt)),
                    )
                    return seq(
                        if_then_else(more, fetch),
                        products(cur),
                        if_then_else(more, unstage),
                        Barrier(),
                    )

                return let_all("h", (ks % 2, (ks + 1) % 2), lambda h: with_halves(*h))

            def out(i: Expr, j: Expr) -> Stmt:
                def at(gi: Expr, gj: Expr) -> Stmt:
                    v = acc[i * tn + j]
                    st = (
                        store(g, gi, gj, v)
                        if partial is None
                        else partial.store((sk, g, gi, gj), v)
                    )
                    cond = all_of((gi < m if m % bm else None, gj < n if n % bn else None))
                    return if_then_else(cond, st) if cond is not None else st

                return let_all("o", (m0 + ty * tm + i, n0 + tx * tn + j), lambda ij: at(*ij))

            if double:
                k0 = k_start(const(0))
                steps_ = seq(
                    items(t, k0, a_tile, store_item(a_s, (const(0),), zero)),
                    items(t, k0, b_tile, store_item(b_s, (const(0),), zero)),
                    Barrier(),
                    loop("ks", per, double_step),
                )
            else:
                steps_ = loop("ks", per, step) if per > 1 else step(const(0))
            return seq(
                loop("z", tm * tn, lambda z: acc.store(z, zero), kind="unrolled"),
                steps_,
                loop(
                    "i",
                    tm,
                    lambda i: loop("j", tn, lambda j: out(i, j), kind="unrolled"),
                    kind="unrolled",
                ),
            )

        return allocate(
            "a_tile",
            (*halves, bk, bm + BANK_PAD),
            lambda a_s: allocate(
                "b_tile",
                (*halves, bk, bn),
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
