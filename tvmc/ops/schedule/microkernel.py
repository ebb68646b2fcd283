"""Building blocks the conv and matmul templates share: the register tile, stores, packing.

The register tile is the inner loop of every fast template here: an MR x (NV vectors) block of
accumulators kept in SIMD registers, updated by `fma(broadcast(a[r]), b[v], acc[r][v])` for each
step of the reduction. Templates differ only in where `a` (broadcast) and `b` (vector) come from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tvmc.kernel import (
    Buffer,
    Expr,
    IntImm,
    Kernel,
    Stmt,
    Var,
    allocate,
    broadcast,
    const,
    fma,
    let,
    loop,
    maximum,
    nest,
    ramp,
    select,
    seq,
)
from tvmc.kernel.expr import is_float
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef
from tvmc.ops.schedule.injective import make_kernel

Scalar = Callable[[int, tuple[Var, ...], int], Expr]  # (row, reduction vars, tap) -> scalar
Vector = Callable[[int, tuple[Var, ...], int], Expr]  # (vector, reduction vars, tap) -> vector


def accumulator_dtype(dtype: str) -> str:
    """float16 and bfloat16 sum in float32 (as onnxruntime does); every other dtype in itself."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def mac(a: Expr, b: Expr, c: Expr) -> Expr:
    """a * b + c: one fused rounding for floats, wrapping integer arithmetic otherwise."""
    return fma(a, b, c) if is_float(c.dtype) else a * b + c


def register_tile(
    mr: int,
    nv: int,
    lanes: int,
    dtype: str,
    loops: Sequence[tuple[str, int]],
    taps: int,
    scalar: Scalar,
    vector: Vector,
    finish: Callable[[Buffer], Stmt],
    bind: Callable[[tuple[Var, ...]], tuple[Expr, ...]] | None = None,
    ahead: Callable[[tuple[Expr, ...]], Stmt | None] | None = None,
) -> Stmt:
    """acc[mr][nv*lanes] = sum over `loops` x `taps` of scalar(r) * vector(v); then finish(tile).

    The taps are unrolled here, the loops are serial. `bind(loop vars)` gives the per-step
    values (e.g. row base offsets) that scalar/vector receive in place of the loop vars, bound
    once per step. `finish` gets a copy of the accumulators in local memory: only constant-index
    accesses touch `acc`, so LLVM keeps it in registers whatever indexing the stores need.
    `ahead(bound values)` (when given) opens each step: prefetches of what a later tile reads.
    """
    width = nv * lanes

    def vec(v: int) -> Expr:
        return ramp(v * lanes, lanes)

    def with_acc(acc: Buffer) -> Stmt:
        def updates(ks: tuple[Expr, ...]) -> Stmt:
            body = [ahead(ks)] if ahead is not None else []
            for t in range(taps):
                for r in range(mr):
                    a = broadcast(scalar(r, ks, t).astype(dtype), lanes)
                    for v in range(nv):
                        b = vector(v, ks, t).astype(dtype)
                        body.append(acc.store((r, vec(v)), mac(a, b, acc[r, vec(v)])))
            return seq(*body)  # seq drops a None from `ahead`

        def step(*ks: Var) -> Stmt:
            return let_all("s", bind(ks), updates) if bind is not None else updates(ks)

        zero = broadcast(0, lanes, dtype)
        init = [acc.store((r, vec(v)), zero) for r in range(mr) for v in range(nv)]
        copy = allocate("tile", (mr, width), lambda tile: seq(
            *(tile.store((r, vec(v)), acc[r, vec(v)]) for r in range(mr) for v in range(nv)),
            finish(tile)), dtype)  # fmt: skip
        return seq(*init, nest(list(loops), step) if loops else step(), copy)

    return allocate("acc", (mr, width), with_acc, dtype)


def let_all(prefix: str, values: Sequence[Expr], body: Callable[[tuple[Expr, ...]], Stmt]) -> Stmt:
    """body(vars) with each value bound once to a fresh Var (leaves and literals pass through).

    Index expressions then stay small: codegen lowers every use of an expression again.
    """
    if not values:
        return body(())
    head, rest = values[0], values[1:]

    def inner(v: Expr) -> Stmt:
        return let_all(prefix, rest, lambda vs: body((v, *vs)))

    if isinstance(head, (Var, IntImm)):
        return inner(head)
    return let(f"{prefix}{len(rest)}", head, inner)


def pieces(length: int, lanes: int) -> list[tuple[int, int]]:
    """(offset, width) chunks covering [0, length): full vectors, then powers of two."""
    out, off = [], 0
    while off < length:
        w = min(lanes, 1 << (length - off).bit_length() - 1)
        out.append((off, w))
        off += w
    return out


def lane_index(start: Expr | int, width: int) -> Expr:
    """A scalar index for one lane, a unit-stride ramp for several."""
    start = const(start) if isinstance(start, int) else start
    return start if width == 1 else ramp(start, width)


def finalize(value: Expr, idx: tuple[Expr, ...], out: Buffer, epilogue: Epilogue | None) -> Stmt:
    """Store `value` cast to the output dtype, through the epilogue, at `idx` of `out`."""
    v = value.astype(out.dtype)
    v = epilogue(idx, v) if epilogue is not None else v
    return out.store(idx if idx else (const(0),), v)


# ---- packing -------------------------------------------------------------------------------------
Pack = Callable[[np.ndarray], np.ndarray]  # a pure rearrangement that pads with zeros


def packed_operand(
    ctx: LowerContext, ref: TensorRef, pack: Pack, hint: str
) -> tuple[Buffer, list[Kernel]]:
    """`pack(ref)` as a flat buffer: a packed constant, or a temp filled by a gather kernel.

    For a runtime tensor the same `pack` applied to element numbers (1-based; 0 = padding) gives
    the gather table, so one numpy function defines both paths.
    """
    if ref.value is not None:
        return ctx.param(pack(np.asarray(ref.value, ref.dtype)).reshape(-1), hint), []
    numbers = np.arange(1, math.prod(ref.shape) + 1, dtype=np.int64).reshape(ref.shape)
    table_np = pack(numbers).reshape(-1).astype(np.int32)
    table = ctx.param(table_np, f"{hint}_index")
    dst = ctx.temp((table_np.size,), ref.dtype, hint)
    assert ref.buffer is not None, "a runtime operand of a template is a buffer"
    src = ref.buffer
    strides = src.strides

    def copy(i: Var) -> Stmt:
        def body(t: Var) -> Stmt:
            flat = maximum(t - 1, 0)
            idx = tuple((flat // s) % d for s, d in zip(strides, src.shape))
            return dst.store(i, select(t > 0, src[idx], const(0, src.dtype)))

        return let("t", table[i], body)

    kind = "parallel" if table_np.size >= 1 << 15 else "serial"
    return dst, [make_kernel(ctx.name(f"pack_{hint}"), loop("i", table_np.size, copy, kind))]


def pad_axis(x: np.ndarray, axis: int, size: int) -> np.ndarray:
    """`x` zero-padded at the end of `axis` to `size`."""
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, size - x.shape[axis])
    return np.pad(x, widths)


def ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for positive ints."""
    return -(-a // b)


def unflatten(flat: Expr, shape: Sequence[int]) -> tuple[Expr, ...]:
    """Row-major multi-index of `flat` in `shape` (constant divisors)."""
    out, stride = [], math.prod(shape)
    for d in shape:
        stride //= d
        out.append(const(0) if d == 1 else (flat // stride) % d if stride > 1 else flat % d)
    return tuple(out)


# Steps a thread, at least, that a parallel tile loop keeps where its innermost dimension runs
# inside each step (`every_tile`): the pool cuts a loop into at most 16 chunks a thread (pool.c)
MIN_STEPS_PER_THREAD = 16


def every_tile(
    shape: Sequence[int], kind: str, threads: int,
    tile: Callable[[Expr, tuple[Expr, ...]], Stmt],
) -> Stmt:  # fmt: skip
    """A loop over every tile of `shape` (row-major), `kind` "serial" or "parallel":
    tile(flat index, coordinates). The innermost dimension of more than one tile runs as a
    serial loop inside each step of the outer loop (a parallel one where that leaves it
    MIN_STEPS_PER_THREAD steps for each of `threads`): a tile's coordinates are then the step's
    and the inner loop's, where dividing the flat index by the shape per tile delayed the
    tile's first loads behind a chain of multiplies, a cost where a tile's reduction is short
    (Zen 3, one thread, vgg19's 3x3 3->64 @224, 27 multiply-adds an accumulator a tile: 79 ->
    86 GFLOP/s of a 98 peak)."""
    total = math.prod(shape)
    inner = max((i for i, d in enumerate(shape) if d > 1), default=None)
    count = shape[inner] if inner is not None else 1
    steps = total // count
    if count == 1 or (kind == "parallel" and steps < MIN_STEPS_PER_THREAD * max(threads, 1)):
        return loop("t", total, lambda t: tile(t, unflatten(t, shape)), kind)
    after = tuple(const(0) for _ in shape[inner + 1 :])  # dimensions of one tile

    def step(s: Expr) -> Stmt:
        def tiles(outer: tuple[Expr, ...]) -> Stmt:
            return loop("i", count, lambda i: tile(s * count + i, (*outer, i, *after)))

        return let_all("o", unflatten(s, shape[:inner]), tiles)

    return loop("t", steps, step, kind)
