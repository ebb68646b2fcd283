"""CPU templates for MatMul and Gemm, with their knob space and defaults: one packed-panel,
register-tiled GEMM for every dtype.

Layout: the right operand B (usually constant weights) is packed into panels
`[batch][N/NR][K][NR]` (NR = NV vectors, zero-padded in N), so one reduction step of a tile
reads NR contiguous elements; A is read in place (row-major, or transposed for Gemm's transA),
one broadcast element per tile row. A tile keeps MR x NR accumulators in registers over the
whole of K and stores them once (alpha, beta * C and the epilogue applied on the way out).
Tiles (batch, panel, row block) form one parallel loop. When B has no batch dims, A's batch
dims fold into M. A dense layer's GEMV (M=1) is the same kernel with MR=1: it streams each
packed panel exactly once, vectorized, with the panels split over the threads.

A constant A may be packed too (`pack_a`, Winograd's transformed weights): into row blocks
`[batch][M/MR][K][MR]`, so that a step's MR broadcasts come from one cache line.

A runtime B is read in place when its rows split into whole panels (attention's batched
products), else packed by a gather kernel into a temp; float16 accumulates in float32; integer
dtypes use the same tiles with multiply-add instead of fma.

Knobs (ctx.config):
- tile_m: MR, rows of a tile (default 6, at most M).
- tile_n: NV, vectors of a tile's width (default: the most whose 6 x NV accumulators, NV
  loaded vectors and a broadcast fit the target's registers: 4 of AVX-512's 32, 2 of AVX2's 16;
  fewer when N is small).
- order: "panel_outer" (consecutive tiles share a B panel, default) or "rows_outer".

The knob space (`gemm_space`) offers the tile sizes the template can use for the workload
(clamped to M and N, so each candidate is a distinct tile), the defaults among them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, Stmt, const, if_then_else, minimum, seq
from tvmc.ops.common import broadcast_shape
from tvmc.ops.lowering import (
    Epilogue,
    LowerContext,
    LoweringTarget,
    Template,
    TensorRef,
    broadcast_read,
)
from tvmc.ops.registry import Attrs
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import (
    accumulator_dtype,
    ceil_div,
    every_tile,
    finalize,
    lane_index,
    let_all,
    packed_operand,
    pad_axis,
    pieces,
    register_tile,
    unflatten,
)
from tvmc.ops.space import ConfigSpace

PARALLEL_MIN_FLOPS = 1 << 17  # below this a fork/join costs more than the split saves


def batch_index(idx: Sequence[Expr], batch: Sequence[int], own: Sequence[int]) -> tuple[Expr, ...]:
    """Indices into an operand's batch dims `own` (right-aligned, broadcast) from the output's."""
    off = len(batch) - len(own)
    return tuple(const(0) if d == 1 else idx[off + j] for j, d in enumerate(own))


def gemm_kernels(
    ctx: LowerContext,
    a: TensorRef,
    b: TensorRef,
    out: Buffer,
    epilogue: Epilogue | None,
    trans_a: bool = False,
    trans_b: bool = False,
    alpha: float = 1.0,
    beta: float = 1.0,
    c: TensorRef | None = None,
    pack_a: bool = False,
) -> list[Kernel]:
    """out = alpha * op(A) @ op(B) + beta * C with numpy matmul semantics (1-D, batched).

    `pack_a`: a constant A with A's own batch (Winograd's U) is packed into row blocks
    `[batch][M/MR][K][MR]`, so that a reduction step's MR broadcasts come from one cache line
    instead of MR rows of A each a stream of its own."""
    acc = accumulator_dtype(out.dtype)
    lanes = ctx.target.lanes(acc)
    a_vec, b_vec = a.type.ndim == 1, b.type.ndim == 1
    a_batch = () if a_vec else a.shape[:-2]
    b_batch = () if b_vec else b.shape[:-2]
    m, k = (1, a.shape[0]) if a_vec else (a.shape[-1:-3:-1] if trans_a else a.shape[-2:])
    n = 1 if b_vec else (b.shape[-2] if trans_b else b.shape[-1])
    batch = tuple(broadcast_shape(tuple(a_batch), tuple(b_batch)))
    fold = all(d == 1 for d in b_batch)  # one B for every batch: A's batch dims join M
    rows = math.prod(batch) * m if fold else m
    groups = 1 if fold else math.prod(batch)

    default_m, default_n = default_tile(ctx.target.vector_registers)
    mr = max(1, min(int(ctx.config.get("tile_m", default_m)), rows))
    nv = max(1, min(int(ctx.config.get("tile_n", default_n)), ceil_div(n, lanes)))
    # A runtime B whose rows split into whole panels is read in place: no packing pass
    in_place = b.value is None and not (trans_b or b_vec) and n % lanes == 0
    if in_place:
        nv = max(d for d in range(1, nv + 1) if (n // lanes) % d == 0)
    nr = nv * lanes
    panels, blocks = ceil_div(n, nr), ceil_div(rows, mr)

    def pack(x: np.ndarray) -> np.ndarray:
        x = x.reshape(k, 1) if b_vec else x
        x = np.swapaxes(x, -1, -2) if trans_b else x
        x = x.reshape(k, n) if fold else x
        x = pad_axis(x, x.ndim - 1, panels * nr).reshape(*x.shape[:-1], panels, nr)
        return np.ascontiguousarray(np.moveaxis(x, -2, -3))

    bp, kernels = (b.buffer, []) if in_place else packed_operand(ctx, b, pack, "b")
    b_strides = [math.prod(b_batch[j + 1 :]) for j in range(len(b_batch))]
    packed_a = None
    if pack_a:
        assert a.value is not None and not (a_vec or trans_a or fold), "pack_a: a constant A"
        assert tuple(a_batch) == tuple(batch), "pack_a: A has the output's batch dims"
        packed_a = ctx.param(pack_rows(np.asarray(a.value, a.dtype), mr).reshape(-1), "a")
    c_read = broadcast_read(c, (m, n)) if c is not None and beta != 0.0 else None

    def split_row(g: Expr, row: Expr) -> tuple[tuple[Expr, ...], Expr]:
        """(output batch indices, row within the matrix) of tile row `row` in group `g`."""
        if fold:
            return unflatten(row // m, batch) if batch else (), (row % m if m > 1 else const(0))
        return unflatten(g, batch), row

    def tile(g: Expr, p: Expr, mb: Expr) -> Stmt:
        bidx = unflatten(g, batch) if not fold else ()
        b_lead = batch_index(bidx, batch, b_batch) if bidx else (const(0),) * len(b_batch)
        base = sum((i * s for i, s in zip(b_lead, b_strides)), const(0))
        row0 = mb * mr
        # per tile row: output batch indices and the row in its matrix (clamped rows stay in A;
        # their results are never stored), bound once so the k loop's indices stay small
        per_row = []
        for r in range(mr):
            row = row0 + r if rows % mr == 0 else minimum(row0 + r, rows - 1)
            per_row.append(split_row(g, row))
        rank = len(per_row[0][0])
        flat = [e for lead, mrow in per_row for e in (*lead, mrow)]
        a_base = (g * blocks + mb) * (k * mr) if packed_a is not None else const(0)
        return let_all("r", [base * (panels * k * nr) + p * (k * nr), a_base, *b_lead, *flat],
                       lambda vs: tile_body(p, row0, vs[0], vs[1], vs[2 : 2 + len(b_lead)],
                                            vs[2 + len(b_lead) :], rank))  # fmt: skip

    def tile_body(
        p: Expr, row0: Expr, base: Expr, a_base: Expr, b_lead: tuple[Expr, ...],
        flat: tuple[Expr, ...], rank: int,
    ) -> Stmt:  # fmt: skip
        def row_of(r: int) -> tuple[tuple[Expr, ...], Expr]:
            chunk = flat[r * (rank + 1) : (r + 1) * (rank + 1)]
            return chunk[:-1], chunk[-1]

        def scalar(r: int, ks: tuple, t: int) -> Expr:
            bidx, mrow = row_of(r)
            if packed_a is not None:
                return packed_a[a_base + ks[0] * mr + r]
            if a_vec:
                return a.buffer[ks[0]]  # type: ignore[index]
            lead = batch_index(bidx, batch, a_batch)
            index = (*lead, ks[0], mrow) if trans_a else (*lead, mrow, ks[0])
            return a.buffer[index]  # type: ignore[index]

        def vector(v: int, ks: tuple, t: int) -> Expr:
            if in_place:
                return bp[(*b_lead, ks[0], lane_index(p * nr + v * lanes, lanes))]
            return bp[lane_index(base + ks[0] * nr + v * lanes, lanes)]

        def store(tile_buf: Buffer, r: int, v: int, off: int, w: int) -> Stmt:
            bidx_r, mrow = row_of(r)
            col = p * nr + v * lanes + off
            value = tile_buf[r, lane_index(v * lanes + off, w)]
            if alpha != 1.0:
                value = value * const(alpha if acc.startswith("float") else int(alpha), acc)
            if c_read is not None:
                cv = c_read((mrow, lane_index(col, w))).astype(acc)
                value = value + (cv if beta == 1.0 else cv * const(beta, acc))
            idx = (*bidx_r, *(() if a_vec else (mrow,)), *(() if b_vec else (lane_index(col, w),)))
            return finalize(value, idx, out, epilogue)

        def finish(tile_buf: Buffer) -> Stmt:
            body = []
            for r in range(mr):
                row_stores = [store(tile_buf, r, 0, 0, 1)] if b_vec else []  # one column
                for v in range(0 if b_vec else nv):
                    col = p * nr + v * lanes
                    full = store(tile_buf, r, v, 0, lanes)
                    if n % nr == 0:
                        row_stores.append(full)
                        continue
                    rem = n % lanes
                    part = seq(*(store(tile_buf, r, v, o, w) for o, w in pieces(rem, lanes)))
                    tail = if_then_else(col < n, part) if rem else None
                    row_stores.append(if_then_else(col + lanes <= n, full, tail))
                stmt = seq(*row_stores)
                body.append(stmt if rows % mr == 0 else if_then_else(row0 + r < rows, stmt))
            return seq(*body)

        return register_tile(mr, nv, lanes, acc, [("k", k)], 1, scalar, vector, finish)

    order = str(ctx.config.get("order", "panel_outer"))
    shape = (groups, panels, blocks) if order == "panel_outer" else (groups, blocks, panels)
    total = math.prod(shape)

    def at(idx: tuple[Expr, ...]) -> Stmt:
        g, x, y = idx
        return tile(g, x, y) if order == "panel_outer" else tile(g, y, x)

    parallel = total > 1 and 2 * math.prod(batch) * m * n * k >= PARALLEL_MIN_FLOPS
    main = every_tile(shape, "parallel" if parallel else "serial", ctx.target.num_threads,
                      lambda t, idx: let_all("c", idx, at))  # fmt: skip
    return [*kernels, make_kernel(ctx.name("gemm"), main)]


def pack_rows(a: np.ndarray, mr: int) -> np.ndarray:
    """A [..., M, K] -> [..., M/MR, K, MR], zero-padded rows: a tile's rows side by side."""
    *lead, m, k = a.shape
    blocks = ceil_div(m, mr)
    x = pad_axis(a, a.ndim - 2, blocks * mr).reshape(*lead, blocks, mr, k)
    return np.ascontiguousarray(np.swapaxes(x, -1, -2))


TILE_ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14)  # MR candidates (at most M)
DEFAULT_ROWS = 6  # tile_m of an empty config


def default_tile(registers: int) -> tuple[int, int]:
    """(tile_m, tile_n) of an empty config: DEFAULT_ROWS rows, as many vectors as still fit
    the registers with one loaded B vector each and the broadcast A element."""
    return DEFAULT_ROWS, max(1, (registers - 1) // (DEFAULT_ROWS + 1))


TILE_VECTORS = 8  # NV candidates 1..8 (1..15 for a GEMV: one row leaves room for wide tiles)


def gemm_space(attrs: Attrs, input_types: list[TensorType], target: LoweringTarget) -> ConfigSpace:
    """tile_m, tile_n and order for a MatMul or Gemm workload (no transA/transB: MatMul)."""
    a, b = input_types[0].shape, input_types[1].shape
    trans_a, trans_b = bool(attrs.get("transA", False)), bool(attrs.get("transB", False))
    m = 1 if len(a) == 1 else (a[-1] if trans_a else a[-2])
    n = 1 if len(b) == 1 else (b[-2] if trans_b else b[-1])
    a_batch, b_batch = tuple(a[:-2]), tuple(b[:-2])  # () for 1-D and 2-D operands
    batch = broadcast_shape(a_batch, b_batch)
    rows = math.prod(batch) * m if all(d == 1 for d in b_batch) else m  # as gemm_kernels folds
    lanes = target.lanes(accumulator_dtype(input_types[0].dtype))
    widest = ceil_div(n, lanes)
    vectors = range(1, (15 if rows == 1 else TILE_VECTORS) + 1)
    space = ConfigSpace()
    space.other("tile_m", sorted({min(r, rows) for r in TILE_ROWS}))
    space.other("tile_n", sorted({min(v, widest) for v in vectors}))
    space.other("order", ["panel_outer"] + (["rows_outer"] if rows > 1 else []))
    default_m, default_n = default_tile(target.vector_registers)
    default = {"tile_m": min(default_m, rows), "tile_n": min(default_n, widest)}
    space.default_index = space.index_of({**default, "order": "panel_outer"})
    return space


def matmul_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Numpy matmul through the packed-panel GEMM."""
    return gemm_kernels(ctx, inputs[0], inputs[1], outputs[0], epilogue)


def gemm_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """alpha * op(A) @ op(B) + beta * C through the packed-panel GEMM."""
    c = inputs[2] if len(inputs) > 2 else None
    return gemm_kernels(
        ctx, inputs[0], inputs[1], outputs[0], epilogue, bool(attrs["transA"]),
        bool(attrs["transB"]), float(attrs["alpha"]), float(attrs["beta"]), c,
    )  # fmt: skip


MATMUL = Template(matmul_template, gemm_space, epilogue=True)
GEMM = Template(gemm_template, gemm_space, epilogue=True)
