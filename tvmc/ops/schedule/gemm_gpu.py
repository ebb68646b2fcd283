"""The shared-memory tiled GEMM for the GPU (MatMul, Gemm and the implicit-GEMM conv use it): its
tile configuration, knob space and defaults, and the tile movers the tiled conv shares; the
kernels themselves are built by `gemm_gpu_kernel.tiled_gemm`.

Knobs (ctx.config): `tile_m` [BM, TM], `tile_n` [BN, TN], `tile_k` BK, `unroll_k` (unroll the
inner k loop), `split_k` (K cut into slices summed by a second kernel), `double_buffer` (two
shared tile buffers: the next step's tiles are fetched into registers while the current step
multiplies, so the global loads' latency hides behind arithmetic; one barrier per step; at most
MAX_STAGED staged values per thread). Defaults: no double buffering, and the largest of
64x64, 32x64, 64x32, 32x32 block tiles that gives at least 132 blocks (one per SM of an H100 or
H200), else 32x32 and split-K up to 264 blocks; 256 threads with 4x4 (64-wide tiles) or 2x2
register tiles. (BM/TM) * (BN/TN) threads per block; more than 1024, or tiles over 48 KiB of
shared memory, raise GPUConfigError (error 1 when tuning).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Stmt, allocate, const, if_then_else, loop, ramp
from tvmc.ops.common import broadcast_shape
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.registry import Attrs
from tvmc.ops.schedule.gpu_launch import (
    MAX_SHARED_BYTES,
    MAX_THREADS,
    GPUConfigError,
    pow2_at_least,
)
from tvmc.ops.schedule.microkernel import ceil_div, let_all
from tvmc.ops.space import ConfigSpace

FULL_GRID = 264  # blocks that fill an H100/H200 twice over (132 SMs); fewer invite split-K
MIN_SPLIT_STEPS = 4  # a K slice keeps at least this many BK steps
# A tile rows are padded by this many elements: the loaders store A transposed (a thread's k run
# goes down a column), and unpadded columns of 32 floats would put a warp's stores in a few banks;
# 4 keeps rows 16-byte aligned for the vector reads
BANK_PAD = 4
MAX_STAGED = 32  # values per thread double buffering may hold in registers (and unrolled loads)


@dataclass(frozen=True)
class GemmTile:
    """Block tile BM x BN, thread tile TM x TN, reduction step BK."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    unroll_k: bool = False
    double_buffer: bool = False

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def shared_bytes(self, itemsize: int) -> int:
        per_step = (self.bm + BANK_PAD + self.bn) * self.bk * itemsize
        return per_step * (2 if self.double_buffer else 1)


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
    unroll, double = bool(config.get("unroll_k", False)), bool(config.get("double_buffer", False))
    tile = GemmTile(int(bm), int(bn), bk, int(tm), int(tn), unroll, double)
    if bm % tm or bn % tn:
        raise GPUConfigError(f"thread tile {tm}x{tn} does not divide block tile {bm}x{bn}")
    if tile.threads > MAX_THREADS:
        raise GPUConfigError(f"{tile.threads} threads per block (at most {MAX_THREADS})")
    staged = ceil_div(bm * bk, tile.threads) + ceil_div(bk * bn, tile.threads)
    if double and staged > MAX_STAGED:
        raise GPUConfigError(
            f"double buffering would stage {staged} values per thread (at most {MAX_STAGED})"
        )
    if tile.shared_bytes(itemsize) > MAX_SHARED_BYTES:
        raise GPUConfigError(
            f"tiles need {tile.shared_bytes(itemsize)} bytes of shared memory "
            f"(at most {MAX_SHARED_BYTES})"
        )
    return tile


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


def span(start: Expr, lanes: int) -> Expr:
    """`lanes` consecutive indices from `start` (the index itself when 1)."""
    return start if lanes == 1 else ramp(start, lanes)


def vector_width(want: int, *extents: int) -> int:
    """The widest of `want`, 2, 1 that divides every extent (a chunk never crosses an edge)."""
    return next(v for v in (want, 2, 1) if v <= want and all(e % v == 0 for e in extents))


def thread_chunks(
    rows: int,
    width: int,
    vec: int,
    threads: int,
    t: Expr,
    body: Callable[[Expr, Expr, Expr], Stmt],
) -> Stmt:
    """body(round, r, c) for thread `t`'s share of a rows x width tile, in chunks of `vec`
    consecutive columns from (r, c): consecutive threads, consecutive chunks (coalesced); the
    rounds are unrolled up to MAX_STAGED (so a round can index registers)."""
    per_row = width // vec
    total = rows * per_row
    rounds = ceil_div(total, threads)

    def one(rnd: Expr) -> Stmt:
        def at(e: Expr) -> Stmt:
            rc = (e // per_row, e % per_row * vec) if per_row > 1 else (e, const(0))
            st = let_all("l", rc, lambda rc: body(rnd, *rc))
            return if_then_else(e < total, st) if rounds * threads != total else st

        return let_all("e", (rnd * threads + t,), lambda es: at(es[0]))

    if rounds == 1:
        return one(const(0))
    return loop("ld", rounds, one, kind="unrolled" if rounds <= MAX_STAGED else "serial")


Item = tuple[tuple[Expr, ...], Expr | None, Expr]  # (where in a shared tile, in-range test, value)
ItemFn = Callable[[Expr, int, Item], Stmt]  # (round, lanes, item) -> statement


def store_item(buf: Buffer, half: tuple[Expr, ...], zero: Expr) -> ItemFn:
    """Items straight into shared tile `buf` (in buffer `half` when double), zeros where out of
    range."""

    def body(rnd: Expr, lanes: int, item: Item) -> Stmt:
        where, cond, value = item
        at = (*half, *where)
        st = buf.store(at, value)
        return if_then_else(cond, st, buf.store(at, zero)) if cond is not None else st

    return body


def stage_item(stage: Buffer, zero: Expr) -> ItemFn:
    """Items into a thread's registers, `lanes` per round (double buffering's first half)."""

    def body(rnd: Expr, lanes: int, item: Item) -> Stmt:
        _, cond, value = item
        at = span(rnd * lanes, lanes)
        st = stage.store(at, value)
        return if_then_else(cond, st, stage.store(at, zero)) if cond is not None else st

    return body


def unstage_item(stage: Buffer, buf: Buffer, half: Expr) -> ItemFn:
    """The registers `stage_item` filled, into shared buffer `half` (its second half)."""

    def body(rnd: Expr, lanes: int, item: Item) -> Stmt:
        return buf.store((half, *item[0]), stage[span(rnd * lanes, lanes)])

    return body


def registers(sizes: Sequence[tuple[str, int]], dtype: str, body: Callable[..., Stmt]) -> Stmt:
    """body(*buffers) inside one thread-local allocation per (name, size), nested in order."""
    if not sizes:
        return body()
    (name, size), rest = sizes[0], sizes[1:]
    return allocate(
        name, (size,), lambda buf: registers(rest, dtype, lambda *bufs: body(buf, *bufs)), dtype
    )


# ---- the knob space ------------------------------------------------------------------------------
BLOCK_TILES = (16, 32, 64, 128)
THREAD_TILES = (1, 2, 4, 8)
K_TILES = (8, 16, 32)
SPLITS = (1, 2, 4, 8, 16)


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
    """The GEMM knobs for a MatMul or Gemm node (see `gemm_space`)."""
    return gemm_space(*problem(attrs, input_types[0].shape, input_types[1].shape))


def tile_candidates(extent: int) -> list[tuple[int, int]]:
    """Distinct [block, thread] tiles along an axis of `extent`, clamped to it."""
    top = pow2_at_least(extent)
    return sorted({(min(b, top), min(t, min(b, top))) for b in BLOCK_TILES for t in THREAD_TILES})


def gemm_space(groups: int, m: int, n: int, k: int) -> ConfigSpace:
    """Block and thread tiles along M and N, the k step, its unrolling, split-K and double
    buffering (clamped, distinct); `default_index` is the untuned kernel's config when the
    space holds it (not when the default split-K count is none of the knob's values)."""

    space = ConfigSpace()
    space.other("tile_m", tile_candidates(m))
    space.other("tile_n", tile_candidates(n))
    space.other("tile_k", sorted({min(t, pow2_at_least(k)) for t in K_TILES}))
    space.other("unroll_k", [True, False])
    defaults = gemm_defaults(groups, m, n, k)
    space.other("split_k", sorted({*SPLITS, defaults["split_k"]}))  # the default's count too
    space.other("double_buffer", [False, True])
    space.default_index = space.index_of(defaults)
    return space


def gemm_defaults(groups: int, m: int, n: int, k: int) -> dict[str, Any]:
    """The knob values of the untuned GEMM (split_k as the template would pick it)."""
    tile = gemm_tile({}, groups, m, n, k, 4)
    blocks = groups * ceil_div(m, tile.bm) * ceil_div(n, tile.bn)
    return {
        "tile_m": (tile.bm, tile.tm),
        "tile_n": (tile.bn, tile.tn),
        "tile_k": tile.bk,
        "unroll_k": False,
        "split_k": split_k({}, blocks, ceil_div(k, tile.bk)),
        "double_buffer": False,
    }
