"""The GPU form of `reduction_kernel`: the same `Stage`s, results and element passes.

Long rows (more than `SHORT_ROW` reduced elements): one block per output row. Each thread folds
a strided slice of the row into a register accumulator (consecutive threads, consecutive
elements), then the block combines the partials: float32/int32 stages (every usual one) with warp
shuffles (each warp folds its 32 lanes, lane 0 posts the warp's partial to shared memory, warp 0
folds the posts: two barriers), other dtypes through a shared-memory tree (log2(threads) steps
between barriers). Every thread reads the stage result from shared memory, so later stages and
the element pass (softmax, norms) run with all threads. argmax/argmin carry positions
through the tree; ties keep the first (or, with `last`, the last) position as on the CPU.
Short rows, and many rows reduced along an outer axis (a "column" reduction: the innermost
axis is kept), are one thread per row folding it serially: no barrier, and neighbouring threads
read neighbouring elements.

Knob (ctx.config): `reduce_threads`, threads per row: 1 is the thread-per-row form, a larger
power of two the block-per-row form with that many threads. Default: 1 for short rows and
column reductions of many rows, else the row length rounded up to a power of two, between 32
and 256. `reduction_space` offers 1 and 32 up to the row length's power of two (at most 1024).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tvmc.kernel import (
    Barrier,
    Buffer,
    Expr,
    Kernel,
    Stmt,
    WarpShuffle,
    allocate,
    const,
    if_then_else,
    let,
    loop,
    minimum,
    select,
    seq,
    shuffle_xor,
)
from tvmc.ops.lowering import LowerContext
from tvmc.ops.schedule.gpu_launch import MAX_THREADS, GPUConfigError, grid_loop, pow2_at_least
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.reduction_stages import (
    ARG_KINDS,
    Emit,
    Index,
    Results,
    Stage,
    combine,
    identity,
)
from tvmc.ops.space import ConfigSpace

SHORT_ROW = 32  # rows this short are one thread's work
WARP = 32
COLUMN_ROWS = 4096  # kept elements that fill a GPU with one thread each
MAX_DEFAULT_THREADS = 256


def split_index(flat: Expr, axes: Sequence[int], shape: Sequence[int]) -> Index:
    """Per-axis indices of `flat` over `axes` (row-major); the outermost needs no modulo."""
    idx: Index = {}
    for a in reversed(axes[1:]):
        idx[a], flat = flat % shape[a], flat // shape[a]
    if axes:
        idx[axes[0]] = flat
    return idx


class _GPUReduction:
    """One reduction kernel's geometry and its code for one thread."""

    def __init__(
        self,
        shape: Sequence[int],
        axes: Sequence[int],
        stages: Sequence[Stage],
        result: Emit | None,
        element: Emit | None,
        threads: int,
    ) -> None:
        self.shape = tuple(shape)
        ndim = len(self.shape)
        self.reduced = [a for a in range(ndim) if a in axes and self.shape[a] > 1]
        self.kept = [a for a in range(ndim) if a not in axes and self.shape[a] > 1]
        self.count = math.prod(self.shape[a] for a in self.reduced)
        self.rows = math.prod(self.shape[a] for a in self.kept)
        self.stages: list[Stage] = list(stages)
        self.result: Emit | None = result
        self.element: Emit | None = element
        self.threads = threads

    def index(self, row: Index, r: Expr) -> Index:
        zeros = {a: const(0) for a in range(len(self.shape))}
        return {**zeros, **row, **split_index(r, self.reduced, self.shape)}

    def over_slice(self, t: Expr, body: Callable[[Expr], Stmt]) -> Stmt:
        """`body(r)` for this thread's elements r = t, t + T, ... of the row."""
        steps = math.ceil(self.count / self.threads)
        guarded = steps * self.threads != self.count

        def at(j: Expr) -> Stmt:
            r = j * self.threads + t
            return if_then_else(r < self.count, body(r)) if guarded else body(r)

        return loop("j", steps, at) if steps > 1 else at(const(0))

    def fold(
        self, st: Stage, row: Index, t: Expr, results: Results, acc: Buffer, pos: Buffer | None
    ) -> Stmt:
        """This thread's partial of stage `st` into acc[0] (and pos[0])."""
        ndim = len(self.shape)

        def step(r: Expr) -> Stmt:
            idx = self.index(row, r)
            value = st.term(idx, results)
            keep = st.keep.store(tuple(idx[a] for a in range(ndim)), value) if st.keep else None
            if pos is None:
                return seq(keep, acc.store(0, combine(st.kind, acc[0], value)))
            better = _better(st, value, acc[0])
            return seq(keep, if_then_else(better, seq(acc.store(0, value), pos.store(0, r))))

        start = minimum(t, const(self.count - 1))  # an empty slice's position never wins a tie
        init = seq(acc.store(0, identity(st.kind, st.dtype)), pos.store(0, start) if pos else None)
        return seq(init, self.over_slice(t, step))

    def stage_accumulators(
        self,
        st: Stage,
        name: str,
        scope: str,
        size: int,
        body: Callable[[Buffer, Buffer | None], Stmt],
    ) -> Stmt:
        if st.kind not in ARG_KINDS:
            return allocate(name, (size,), lambda a: body(a, None), st.dtype, scope)
        return allocate(
            name,
            (size,),
            lambda a: allocate(f"{name}_pos", (size,), lambda p: body(a, p), "int32", scope),
            st.dtype,
            scope,
        )

    def finish(self, row: Index, t: Expr, results: Results) -> Stmt:
        zero_r = self.index(row, const(0))
        stored = self.result(zero_r, results) if self.result else None
        if stored is not None and self.threads > 1:
            stored = if_then_else(t.eq(0), stored)
        elements = None
        if self.element is not None:
            elements = self.over_slice(t, lambda r: self.element(self.index(row, r), results))
        return seq(stored, elements)

    # ---- one thread per row --------------------------------------------------------------------
    def serial(self, row: Index, i: int, results: Results) -> Stmt:
        if i == len(self.stages):
            return self.finish(row, const(0), results)
        st = self.stages[i]

        def body(acc: Buffer, pos: Buffer | None) -> Stmt:
            value = pos[0] if pos is not None else acc[0]
            value = st.post(value) if st.post else value
            rest = let(f"s{i}", value, lambda v: self.serial(row, i + 1, (*results, v)))
            return seq(self.fold(st, row, const(0), results, acc, pos), rest)

        return self.stage_accumulators(st, f"acc{i}", "local", 1, body)

    # ---- one block per row ---------------------------------------------------------------------
    def block(
        self,
        row: Index,
        t: Expr,
        shared: list[tuple[Buffer, Buffer | None]],
        i: int,
        results: Results,
    ) -> Stmt:
        if i == len(self.stages):
            return self.finish(row, t, results)
        st, (sv, sp) = self.stages[i], shared[i]

        def body(acc: Buffer, pos: Buffer | None) -> Stmt:
            warp = self.threads % WARP == 0 and st.dtype in WarpShuffle.DTYPES
            combined = self.warp_combine if warp else self.tree_combine
            slot = self.result_slot(warp)
            value = sp[slot] if sp is not None else sv[slot]
            value = st.post(value) if st.post else value
            rest = let(f"s{i}", value, lambda v: self.block(row, t, shared, i + 1, (*results, v)))
            fold = self.fold(st, row, t, results, acc, pos)
            return seq(fold, combined(st, t, acc, pos, sv, sp), rest)

        return self.stage_accumulators(st, f"acc{i}", "local", 1, body)

    def result_slot(self, warp: bool) -> int:
        """Where a stage's combined value lands in its shared buffer: when warp 0 folds the warps'
        posts, past every slot a lane's gather reads in that phase (each lane reads slot `lane`:
        select evaluates both arms), else 0."""
        return WARP if warp and self.threads > WARP else 0

    def tree_combine(
        self, st: Stage, t: Expr, acc: Buffer, pos: Buffer | None, sv: Buffer, sp: Buffer | None
    ) -> Stmt:
        """Partials into shared memory, halved log2(threads) times between barriers."""
        tree: list[Stmt] = []
        s = self.threads // 2
        while s:
            tree += [if_then_else(t < s, _merge(st, sv, sp, t, t + s)), Barrier()]
            s //= 2
        publish = seq(sv.store(t, acc[0]), sp.store(t, pos[0]) if sp is not None else None)
        return seq(publish, Barrier(), *tree)

    def warp_combine(
        self, st: Stage, t: Expr, acc: Buffer, pos: Buffer | None, sv: Buffer, sp: Buffer | None
    ) -> Stmt:
        """Each warp folds its lanes by shuffles, lane 0 posts the warp's partial, and warp 0
        folds the posts the same way: two barriers whatever the block size."""
        warps = self.threads // WARP
        lane = t % WARP if warps > 1 else t
        post = seq(
            sv.store(t // WARP, acc[0]), sp.store(t // WARP, pos[0]) if sp is not None else None
        )
        steps = [_shuffle_fold(st, acc, pos), if_then_else(lane.eq(0), post), Barrier()]
        if warps > 1:
            fill = const(self.count if not st.last else -1)  # a filler never wins a tie
            there = lane < warps
            gather = seq(
                acc.store(0, select(there, sv[lane], identity(st.kind, st.dtype))),
                pos.store(0, select(there, sp[lane], fill))
                if pos is not None and sp is not None
                else None,
            )
            slot = self.result_slot(True)  # not 0: every warp's gather reads post 0 now
            final = seq(sv.store(slot, acc[0]), sp.store(slot, pos[0]) if sp is not None else None)
            steps += [gather, _shuffle_fold(st, acc, pos), if_then_else(t.eq(0), final), Barrier()]
        return seq(*steps)


def _shuffle_fold(st: Stage, acc: Buffer, pos: Buffer | None) -> Stmt:
    """acc[0] (and pos[0]) combined over the 32 lanes of the warp: a butterfly of shuffles."""

    def step(other: Buffer, other_pos: Buffer | None) -> Stmt:
        out: list[Stmt] = []
        for mask in (16, 8, 4, 2, 1):
            out.append(shuffle_xor(other, 0, acc[0], mask))
            if pos is None or other_pos is None:
                out.append(acc.store(0, combine(st.kind, acc[0], other[0])))
                continue
            out.append(shuffle_xor(other_pos, 0, pos[0], mask))
            va, vb, pa, pb = acc[0], other[0], pos[0], other_pos[0]
            tie = pb > pa if st.last else pb < pa
            wins = (vb > va if st.kind == "argmax" else vb < va) | (vb.eq(va) & tie)
            out.append(if_then_else(wins, seq(acc.store(0, vb), pos.store(0, pb))))
        return seq(*out)

    if pos is None:
        return allocate("other", (1,), lambda o: step(o, None), st.dtype)
    return allocate(
        "other",
        (1,),
        lambda o: allocate("other_pos", (1,), lambda op: step(o, op), "int32"),
        st.dtype,
    )


def _better(st: Stage, value: Expr, best: Expr) -> Expr:
    """`value` replaces the running extreme (strictly better, or as good with `last`)."""
    if st.kind == "argmax":
        return value >= best if st.last else value > best
    return value <= best if st.last else value < best


def _merge(st: Stage, sv: Buffer, sp: Buffer | None, a: Expr, b: Expr) -> Stmt:
    """sv[a] (and sp[a]) = the combination of the partials at a and b."""
    if sp is None:
        return sv.store(a, combine(st.kind, sv[a], sv[b]))
    va, vb, pa, pb = sv[a], sv[b], sp[a], sp[b]
    tie = pb > pa if st.last else pb < pa
    wins = (vb > va if st.kind == "argmax" else vb < va) | (vb.eq(va) & tie)
    return if_then_else(wins, seq(sv.store(a, vb), sp.store(a, pb)))


def gpu_reduction_kernel(
    ctx: LowerContext,
    name: str,
    shape: Sequence[int],
    axes: Sequence[int],
    stages: Sequence[Stage],
    result: Emit | None = None,
    element: Emit | None = None,
) -> Kernel:
    """`reduction_kernel`'s contract on a GPU: a block per long row, a thread per short one."""
    plan = _GPUReduction(shape, axes, stages, result, element, 1)
    threads = int(ctx.config.get("reduce_threads", default_reduce_threads(shape, axes)))
    if not 0 < threads <= MAX_THREADS or threads & (threads - 1):
        raise GPUConfigError(f"reduce_threads {threads}: a power of two up to {MAX_THREADS}")
    if threads == 1:
        body = grid_loop(
            plan.rows, lambda r: plan.serial(split_index(r, plan.kept, plan.shape), 0, ())
        )
        return make_kernel(ctx.name(name), body)
    plan.threads = threads

    def row_block(b: Expr) -> Stmt:
        row = split_index(b, plan.kept, plan.shape)

        def with_shared(i: int, bufs: list[tuple[Buffer, Buffer | None]]) -> Stmt:
            if i == len(plan.stages):
                return loop(
                    "tx", threads, lambda t: plan.block(row, t, bufs, 0, ()), kind="threadIdx.x"
                )
            return plan.stage_accumulators(
                plan.stages[i],
                f"part{i}",
                "shared",
                threads,
                lambda v, p: with_shared(i + 1, [*bufs, (v, p)]),
            )

        return with_shared(0, [])

    return make_kernel(ctx.name(name), loop("row", plan.rows, row_block, kind="blockIdx.x"))


def _row_geometry(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, int, bool]:
    """(elements per row, rows, whether an outer axis is reduced under a kept inner one)."""
    plan = _GPUReduction(shape, axes, (), None, None, 1)
    column = bool(plan.kept and plan.reduced) and plan.kept[-1] > plan.reduced[-1]
    return plan.count, plan.rows, column


def default_reduce_threads(shape: Sequence[int], axes: Sequence[int]) -> int:
    """The untuned `reduce_threads` of a reduction of `axes` of a `shape` tensor."""
    count, rows, column = _row_geometry(shape, axes)
    # reducing an outer axis of many rows: a thread per row reads coalesced (neighbouring
    # threads, neighbouring kept elements) where a block per row would read with a stride
    if count <= SHORT_ROW or (column and rows >= COLUMN_ROWS):
        return 1
    return min(MAX_DEFAULT_THREADS, max(WARP, pow2_at_least(count)))


def reduction_space(shape: Sequence[int], axes: Sequence[int]) -> ConfigSpace:
    """`reduce_threads`: 1 (a thread per row), then a warp up to the row length's power of two
    (at most MAX_THREADS: more threads than elements would idle); the default recorded."""
    count = _row_geometry(shape, axes)[0]
    top = min(MAX_THREADS, max(WARP, pow2_at_least(count)))
    blocks = [1 << b for b in range(WARP.bit_length() - 1, top.bit_length())] if count > 1 else []
    space = ConfigSpace().other("reduce_threads", [1, *blocks])
    space.default_index = space.index_of({"reduce_threads": default_reduce_threads(shape, axes)})
    return space
