"""The CPU row-reduction kernel of the reduction, pooling and normalization templates.

`reduction_kernel` runs a list of `Stage`s, each a sum/prod/max/min/argmax/argmin pass over
the reduced axes that may read the results of the stages before it, then stores one value per
output (`result`) and/or rewrites every element of the reduced region (`element`, e.g. softmax).
Two schedules, chosen by the innermost axis of extent > 1:

- ROW (it is reduced): one output per iteration of the (parallel) outer loop. The contiguous
  axis is scanned in vectors into U register accumulators per stage (independent add chains
  hide the FP latency), which are folded and reduced horizontally; the tail goes lane-wise into
  the first vector, unrolled, so no scalar dependency chain or memory accumulator remains.
- COLUMN (it is kept): vectors run across the contiguous kept axis, U of them at a time, and
  every reduced axis is a serial loop around them; nothing horizontal is needed.

Only the innermost axis is vectorized: kernel IR buffers have no reshaped views, and a merged
index split with // and % would turn vector loads into gathers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tvmc.kernel import (
    GE,
    GT,
    LE,
    LT,
    Buffer,
    Expr,
    Kernel,
    Stmt,
    allocate,
    const,
    let,
    loop,
    nest,
    ramp,
    reduce_add,
    reduce_max,
    reduce_min,
    select,
    seq,
)
from tvmc.ops.lowering import LowerContext
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.reduction_stages import (
    ARG_KINDS,
    REDUCTION_PARALLEL_MIN,
    Accumulators,
    Emit,
    Index,
    Results,
    Stage,
    combine,
    combine_all,
    flat_loop,
    flat_position,
    identity,
    parallel_kind,
)


def _lanes_loop(units: int, lanes: int, vector: bool, body: Callable[[Expr], Stmt]) -> Stmt:
    """`body(slot)` for slot in [0, units * lanes): `units` unrolled (vector) loops of `lanes`."""

    def one(u: Expr) -> Stmt:
        if lanes == 1:
            return body(u)
        kind = "vectorized" if vector else "serial"
        return loop("l", lanes, lambda lane: body(u * lanes + lane), kind=kind)

    return one(const(0)) if units == 1 else loop("u", units, one, kind="unrolled")


@dataclass
class _Reduction:
    """The geometry and the work of one reduction kernel; builds both schedules."""

    ctx: LowerContext
    shape: tuple[int, ...]
    reduced: list[int]  # reduced axes of extent > 1, outermost first
    kept: list[int]  # kept axes of extent > 1
    last: int  # the innermost axis of extent > 1 (the last axis when none is)
    stages: list[Stage]
    result: Emit | None
    element: Emit | None

    @property
    def lanes(self) -> int:
        return min(self.ctx.target.lanes(s.dtype) for s in self.stages)

    def units(self, n: int) -> int:
        """Vector accumulators per stage along an axis of `n` (one for argmax: ties need order)."""
        if any(s.kind in ARG_KINDS for s in self.stages):
            return 1
        return max(1, min(int(self.ctx.config.get("reduce_unroll", 4)), n // self.lanes))

    def allocate(self, size: int, body: Callable[[Accumulators], Stmt]) -> Stmt:
        """`size` accumulator lanes per stage (and positions for argmax/argmin) around `body`."""
        accs: Accumulators = []

        def stage(k: int) -> Stmt:
            if k == len(self.stages):
                return body(accs)
            st = self.stages[k]

            def values(acc: Buffer) -> Stmt:
                if st.kind not in ARG_KINDS:
                    accs.append((acc, None))
                    return stage(k + 1)

                def positions(pos: Buffer) -> Stmt:
                    accs.append((acc, pos))
                    return stage(k + 1)

                return allocate(f"pos{k}", (size,), positions, dtype="int32")

            return allocate(f"acc{k}", (size,), values, dtype=st.dtype)

        return stage(0)

    def init(self, k: int, accs: Accumulators, slot: Expr) -> Stmt:
        acc, pos = accs[k]
        reset = pos.store(slot, const(0)) if pos is not None else None
        return seq(acc.store(slot, identity(self.stages[k].kind, acc.dtype)), reset)

    def update(self, k: int, accs: Accumulators, slot: Expr, idx: Index, results: Results) -> Stmt:
        """Stage `k` folds the element at `idx` into accumulator lane `slot`."""
        st = self.stages[k]
        acc, pos = accs[k]
        where = tuple(idx[a] for a in range(len(self.shape)))

        def fold(value: Expr) -> Stmt:
            keep = st.keep.store(where, value) if st.keep is not None else None
            if pos is None:
                return seq(keep, acc.store(slot, combine(st.kind, acc[slot], value)))
            ops = {"argmax": (GT, GE), "argmin": (LT, LE)}[st.kind]
            better = ops[st.last](value, acc[slot])  # on ties only >= (<=) moves to the last
            position = flat_position(idx, self.shape, self.reduced)
            return seq(
                pos.store(slot, select(better, position, pos[slot])),
                acc.store(slot, select(better, value, acc[slot])),
            )

        return let("t", st.term(idx, results), fold)

    # ---- ROW -------------------------------------------------------------------------------------
    def over_row(
        self, base: Index, units: int, body: Callable[[Expr, Index], Stmt], accumulate: bool
    ) -> Stmt:
        """`body(slot, idx)` over the reduced region: blocks of `units` vectors, single vectors,
        then the tail (unrolled into lanes 0.. when `accumulate`, else a scalar loop)."""
        n, lanes, last = self.shape[self.last], self.lanes, self.last
        block = units * lanes
        vec_end = n // block * block
        rest = (n - vec_end) // lanes
        tail_at = vec_end + rest * lanes

        def region(outer: Index) -> Stmt:
            def at(j: Expr) -> Index:
                return {**base, **outer, last: j}

            main = loop(
                "jo",
                n // block,
                lambda jo: _lanes_loop(units, lanes, True, lambda s: body(s, at(jo * block + s))),
            )
            more = loop(
                "jr",
                rest,
                lambda jr: _lanes_loop(
                    1, lanes, True, lambda s: body(s, at(vec_end + jr * lanes + s))
                ),
                kind="unrolled",
            )
            tail = loop(
                "jt",
                n - tail_at,
                lambda t: body(t, at(tail_at + t)),
                kind="unrolled" if accumulate else "serial",
            )
            return seq(
                main if vec_end else None, more if rest else None, tail if n > tail_at else None
            )

        outer = [a for a in self.reduced if a != last]
        return nest(
            [(f"r{a}", self.shape[a]) for a in outer], lambda *vs: region(dict(zip(outer, vs)))
        )

    def horizontal(self, k: int, accs: Accumulators) -> Expr:
        """The single result of stage `k` from its first vector of accumulators."""
        st, (acc, pos), lanes = self.stages[k], accs[k], self.lanes
        if lanes == 1 or st.kind == "prod":  # no horizontal product intrinsic: a tree
            return combine_all(st.kind, [acc[i] for i in range(lanes)])
        vec = acc[ramp(0, lanes)]
        if pos is None:
            return {"sum": reduce_add, "max": reduce_max, "min": reduce_min}[st.kind](vec)
        best = (reduce_max if st.kind == "argmax" else reduce_min)(vec)
        where = pos[ramp(0, lanes)]
        if st.last:
            return reduce_max(select(vec.eq(best), where, -1))
        return reduce_min(select(vec.eq(best), where, 2**31 - 1))

    def row(self, kept: Index) -> Stmt:
        """Every stage, then the stores, for the output at `kept`."""
        base = {**{a: const(0) for a in range(len(self.shape))}, **kept}
        lanes = self.lanes
        units = self.units(self.shape[self.last])

        def stage(k: int, accs: Accumulators, results: Results) -> Stmt:
            if k == len(self.stages):
                return self.finish_row(base, results)
            st, (acc, _) = self.stages[k], accs[k]
            scan = self.over_row(
                base, units, lambda s, idx: self.update(k, accs, s, idx, results), accumulate=True
            )
            fold = [
                _lanes_loop(
                    1,
                    lanes,
                    True,
                    lambda s, u=u: acc.store(s, combine(st.kind, acc[s], acc[u * lanes + s])),
                )
                for u in range(1, units)
            ]
            value = self.horizontal(k, accs)
            value = st.post(value) if st.post else value
            return seq(
                _lanes_loop(units, lanes, True, lambda s: self.init(k, accs, s)),
                scan,
                *fold,
                let(f"res{k}", value, lambda v: stage(k + 1, accs, (*results, v))),
            )

        return self.allocate(units * lanes, lambda accs: stage(0, accs, ()))

    def finish_row(self, base: Index, results: Results) -> Stmt:
        stored = self.result(base, results) if self.result else None
        element = self.element
        if element is None:
            return stored
        return seq(stored, self.over_row(base, 1, lambda s, idx: element(idx, results), False))

    # ---- COLUMN ----------------------------------------------------------------------------------
    def columns(self, base: Index, c0: Expr, units: int, lanes: int, vector: bool) -> Stmt:
        """Every stage and store for the `units * lanes` columns from `c0`."""
        last = self.last

        def body(accs: Accumulators) -> Stmt:
            def each(f: Callable[[Expr, Index], Stmt]) -> Stmt:
                return _lanes_loop(units, lanes, vector, lambda s: f(s, {**base, last: c0 + s}))

            def over_reduced(f: Callable[[Expr, Index], Stmt]) -> Stmt:
                return nest(
                    [(f"r{a}", self.shape[a]) for a in self.reduced],
                    lambda *vs: each(lambda s, idx: f(s, {**idx, **dict(zip(self.reduced, vs))})),
                )

            def results(s: Expr, k: int) -> Results:
                return tuple((pos if pos is not None else acc)[s] for acc, pos in accs[:k])

            parts: list[Stmt] = []
            for k, st in enumerate(self.stages):
                acc = accs[k][0]
                parts.append(each(lambda s, idx, k=k: self.init(k, accs, s)))
                parts.append(
                    over_reduced(lambda s, idx, k=k: self.update(k, accs, s, idx, results(s, k)))
                )
                if st.post is not None:
                    post = st.post
                    parts.append(
                        each(lambda s, idx, acc=acc, post=post: acc.store(s, post(acc[s])))
                    )
            done = len(self.stages)
            if self.result is not None:
                result = self.result
                parts.append(each(lambda s, idx: result(idx, results(s, done))))
            if self.element is not None:
                element = self.element
                parts.append(over_reduced(lambda s, idx: element(idx, results(s, done))))
            return seq(*parts)

        return self.allocate(units * lanes, body)

    def column_plane(self, outer: Index, block_kind: str) -> Stmt:
        """All columns of the outer index `outer`: blocks of U vectors, vectors, a narrow tail."""
        base = {**{a: const(0) for a in range(len(self.shape))}, **outer}
        n, lanes = self.shape[self.last], self.lanes
        units = self.units(n)
        block = units * lanes
        vec_end = n // block * block
        rest = (n - vec_end) // lanes
        tail_at = vec_end + rest * lanes
        tail = n - tail_at
        main = loop(
            "cb",
            n // block,
            lambda cb: self.columns(base, cb * block, units, lanes, True),
            kind=block_kind,
        )
        more = loop("cr", rest, lambda cr: self.columns(base, vec_end + cr * lanes, 1, lanes, True))
        # a short tail is one narrow vector (LLVM splits odd widths), not `tail` scalar passes
        narrow = self.columns(base, const(tail_at), 1, tail, tail > 1) if tail else None
        return seq(main if vec_end else None, more if rest else None, narrow)


def cpu_reduction_kernel(
    ctx: LowerContext,
    name: str,
    shape: Sequence[int],
    axes: Sequence[int],
    stages: Sequence[Stage],
    result: Emit | None = None,
    element: Emit | None = None,
) -> Kernel:
    """A kernel running `stages` over `axes` of a `shape` tensor, then `result` and `element`.

    `result(idx, results)` stores one output (reduced axes at index 0 in `idx`);
    `element(idx, results)` runs for every element of the reduced region.
    """
    shape = tuple(shape)
    live = [a for a in range(len(shape)) if shape[a] > 1]
    last = live[-1] if live else len(shape) - 1
    reduced = [a for a in live if a in axes]
    kept = [a for a in live if a not in axes]
    plan = _Reduction(ctx, shape, reduced, kept, last, list(stages), result, element)
    # a pass streams at ~20 elements/ns: one pass over 1 << 17 is ~5 us, about what a fork/join
    # of sleeping pool workers costs
    work = math.prod(shape) * (len(stages) + (element is not None))
    threshold = REDUCTION_PARALLEL_MIN
    if last in reduced:
        rows = math.prod(shape[a] for a in kept)
        body = flat_loop("row", kept, shape, plan.row, parallel_kind(ctx, work, rows, threshold))
    else:
        outer = [a for a in kept if a != last]
        count = math.prod(shape[a] for a in outer)
        outer_kind = parallel_kind(ctx, work, count, threshold)
        # a single outer index (e.g. reducing axis 0 of a matrix): split its columns instead
        blocks = shape[last] // (plan.units(shape[last]) * plan.lanes)
        block_kind = parallel_kind(ctx, work, blocks, threshold) if count == 1 else "serial"
        body = flat_loop("o", outer, shape, lambda o: plan.column_plane(o, block_kind), outer_kind)
    return make_kernel(ctx.name(name), body)
