"""Resize's kernels: an integer upsample of the last axis as contiguous vectors (CPU), every
other resize as the compute's one loop nest (`schedule_injective`).

The compute gathers: each output element computes its own source coordinate and reads its taps
one lane at a time (a bilinear upsample: four gathers a vector). Upsampled by an integer factor
s, the last axis repeats one pattern: output s*q + r reads input q + offset[r][t] with weight
w[r][t], the same for every q away from the edges (`last_axis_period` checks it on the
reference's own tables). By a factor under a vector's lanes, a vector of q's reads its taps as
contiguous vectors, the s results are interleaved, and one contiguous store writes s vectors of
output, the row's ends going through the compute element by element; by a larger factor, each
q's s outputs are vectors of their own, its few inputs broadcast and picked per lane, the edge
q's unrolled with their own taps. The rows' other resized axes weigh whole input rows with the
compute's expressions, and every sum keeps the compute's order: the same values, bit for bit.
Long axes (MAX_CHECKED) and large factors (MAX_CHUNKS) keep the compute, so that compile time
stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import (
    Buffer,
    Expr,
    Kernel,
    Shuffle,
    Stmt,
    broadcast,
    const,
    interleave,
    loop,
    seq,
)
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import Accessor, Attrs, Epilogue, LowerContext, Template, TensorRef
from tvmc.ops.resize import compute
from tvmc.ops.resize.definition import axis_taps
from tvmc.ops.schedule.injective import PARALLEL_MIN_ELEMENTS, make_kernel, schedule_injective
from tvmc.ops.schedule.microkernel import finalize, lane_index, let_all, unflatten


@dataclass(frozen=True, eq=False)
class Period:
    """An integer upsample of the last axis by `factor` (s): output s*q + r is the sum over taps t
    of weights[r][t] * input[q + offsets[r][t]] (one unweighted tap: nearest), the same for every
    q in [lo, hi); `index` and `tap_weights` ([q, r, t], absolute input indices, float32) are
    every q's own taps as the reference computes them, the edges' included."""

    factor: int
    lo: int
    hi: int
    index: np.ndarray
    tap_weights: np.ndarray | None

    def taps(self, q: int) -> tuple[np.ndarray, np.ndarray | None]:
        """q's taps: input offsets from q and weights, [r, t]."""
        return self.index[q] - q, None if self.tap_weights is None else self.tap_weights[q]

    @property
    def offsets(self) -> tuple[tuple[int, ...], ...]:
        """The run's offsets[r][t]."""
        return tuple(tuple(int(o) for o in row) for row in self.taps(self.lo)[0])

    @property
    def weights(self) -> tuple[tuple[float, ...], ...] | None:
        """The run's weights[r][t] (None: nearest)."""
        w = self.taps(self.lo)[1]
        return None if w is None else tuple(tuple(float(v) for v in row) for row in w)

    @property
    def edges(self) -> int:
        """q's outside [lo, hi)."""
        return self.lo + len(self.index) - self.hi


# Output elements along the last axis, at most, whose taps the check builds at compile time (the
# reference's tables of the whole axis); a longer axis keeps the compute
MAX_CHECKED = 1 << 16
# Vectors of one q's outputs, at most, that an upsample by `lanes` or more unrolls (a factor of
# 4096 took 11 s to compile); a larger factor keeps the compute
MAX_CHUNKS = 8
# q's outside the repeating run that an upsample by `lanes` or more unrolls with their own taps
# (an edge's clamped taps: one q a side for linear taps); more stay with the compute
MAX_EDGES = 4


def last_axis_period(attrs: Attrs, shape: tuple[int, ...]) -> Period | None:
    """The last axis's Period, or None where it is not an integer upsample (by 2 or more) with
    nearest or linear taps, or is longer than MAX_CHECKED; its run [lo, hi) is the q's around
    the middle one whose taps are the middle one's, moved by q (the template wants a vector of
    them, or few q's outside)."""
    axis, in_len = len(shape) - 1, shape[-1] if shape else 0
    out_len = attrs["sizes"][axis] if shape else 0
    if attrs["mode"] not in ("nearest", "linear") or in_len < 2 or out_len % in_len:
        return None
    if out_len > MAX_CHECKED:
        return None
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        return None  # an extrapolated element is no tap
    factor = out_len // in_len
    if factor < 2:
        return None
    index, weights, _ = axis_taps(attrs, axis, in_len)
    taps = index.reshape(in_len, factor, -1) - np.arange(in_len)[:, None, None]
    middle = in_len // 2
    offsets = taps[middle]
    reached = np.arange(in_len)[:, None, None] + offsets  # each q's taps, moved from the middle
    inside = ((reached >= 0) & (reached < in_len)).all(axis=(1, 2))
    same = (taps == offsets).all(axis=(1, 2)) & inside
    if weights is not None:
        w = weights.astype(np.float32).reshape(in_len, factor, -1)
        same &= (w == w[middle]).all(axis=(1, 2))
    lo, hi = middle, middle + 1
    if not same[middle]:
        return None
    while lo > 0 and same[lo - 1]:
        lo -= 1
    while hi < in_len and same[hi]:
        hi += 1
    return Period(factor, lo, hi, index.reshape(in_len, factor, -1), None if weights is None else w)


def resize_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """On a CPU, the upsample kernel where the last axis has a Period it takes (`_fits`), else
    the compute's loop nest."""
    (x,), (out,) = inputs, outputs
    out_type = TensorType(tuple(attrs["sizes"]), x.dtype)
    read = compute.resize_compute(attrs, inputs, [out_type])[0]
    lanes = ctx.target.lanes(_work(x.dtype))
    period = last_axis_period(attrs, x.shape) if ctx.target.kind == "cpu" else None
    cost = compute.resize_element_cost(attrs, [x.type])
    if period is None or x.buffer is None or not _fits(period, lanes):
        stored: Accessor = (lambda idx: epilogue(idx, read(idx))) if epilogue else read
        return [schedule_injective(ctx, "resize", [(out, out_type.ndim, stored)], cost)]
    return [_upsample_kernel(ctx, attrs, x, out, out_type, read, period, lanes, cost, epilogue)]


def _fits(period: Period, lanes: int) -> bool:
    """Whether the upsample kernel takes `period`: interleaved, by a factor under `lanes` over a
    run of a vector of q's or more; in chunks, by a factor of 1 to MAX_CHUNKS vectors with at
    most MAX_EDGES q's outside the run."""
    if period.factor < lanes:
        return period.hi - period.lo >= lanes
    return period.factor <= MAX_CHUNKS * lanes and period.edges <= MAX_EDGES


def _work(dtype: str) -> str:
    """The dtype the taps are weighed in (as the compute: float16 in float32)."""
    return "float64" if dtype == "float64" else "float32"


def _upsample_kernel(
    ctx: LowerContext,
    attrs: Attrs,
    x: TensorRef,
    out: Buffer,
    out_type: TensorType,
    read: Accessor,
    period: Period,
    lanes: int,
    cost: int,
    epilogue: Epilogue | None,
) -> Kernel:
    """One (parallel) loop over the output rows. Upsampled by fewer than `lanes`, a row runs
    vectors of q's from `period.lo` as interleaved contiguous stores, the rest element by
    element through `read`; by `lanes` or more, each q stores its s outputs in chunks of
    `lanes` (`_chunks`), the edge q's with their own taps."""
    shape, s = out_type.shape, period.factor
    work = _work(x.dtype)
    weighed = period.weights is not None
    rows_of = [a for a in compute.resized_axes(attrs, x.shape) if a != len(shape) - 1]
    vectors = (period.hi - period.lo) // lanes
    # without an epilogue (which may read a tensor the output overwrites) a last vector ends
    # at hi, storing again some of the previous one's values
    last = epilogue is None and (period.hi - period.lo) % lanes != 0
    start = s * period.lo  # the vector part of a row: [start, stop)
    stop = s * (period.hi if last else period.lo + vectors * lanes)

    def row(o: Expr) -> Stmt:
        lead = unflatten(o, shape[:-1]) if len(shape) > 1 else ()
        taps = {a: compute.axis_taps(attrs, a, lead[a], x.shape[a], work) for a in rows_of}

        def input_row(j: Expr, width: int) -> Expr:
            """Input q's j..j+width-1 of this row, its other resized axes weighed."""
            value = compute.interpolate(attrs, rows_of, taps, lead, lambda at: x.read(
                (*at, lane_index(j, width))), work)  # fmt: skip
            return value.astype(work) if weighed else value

        def store(value: Expr, ow: Expr, width: int) -> Stmt:
            idx = (*lead, lane_index(ow, width))
            return finalize(value, idx, out, epilogue)

        if s >= lanes:

            def at(q: Expr, sources: np.ndarray, weights: np.ndarray | None) -> Stmt:
                return _chunks(q, sources, weights, s, lanes, work,
                               lambda j: input_row(j, 1), store)  # fmt: skip

            edges = [*range(period.lo), *range(period.hi, x.shape[-1])]
            return seq(
                loop("q", period.hi - period.lo, lambda i: at(
                    const(period.lo) + i, *period.taps(period.lo))),
                *(at(const(q), *period.taps(q)) for q in edges),
            )  # fmt: skip

        def vector(q: Expr) -> Stmt:
            shifts = sorted({o for row_offsets in period.offsets for o in row_offsets})
            rows = [input_row(q + shift, lanes) for shift in shifts]
            return let_all("row", rows, lambda held: _store(
                dict(zip(shifts, held)), q, period, lanes, work, store))  # fmt: skip

        def element(ow: Expr) -> Stmt:
            idx = (*lead, ow)
            return finalize(read(idx), idx, out, epilogue)

        return seq(
            loop("ow", start, element) if start else None,
            loop("vo", vectors, lambda vo: vector(const(period.lo) + vo * lanes)),
            vector(const(period.hi - lanes)) if last else None,
            loop("ot", shape[-1] - stop, lambda t: element(t + stop)) if stop < shape[-1] else None,
        )

    outer = math.prod(shape[:-1])
    many = math.prod(shape) * cost >= PARALLEL_MIN_ELEMENTS
    kind = "parallel" if outer > 1 and many else "serial"
    body = loop("o", outer, row, kind=kind) if outer > 1 else row(const(0))
    return make_kernel(ctx.name("resize_upsample"), body)


def _store(
    held: dict[int, Expr],
    q: Expr,
    period: Period,
    lanes: int,
    work: str,
    store: Callable[[Expr, Expr, int], Stmt],
) -> Stmt:
    """The s output vectors of q's vector, interleaved into one contiguous store."""
    phases = []
    weights = period.weights
    for r, offsets in enumerate(period.offsets):
        if weights is None:
            phases.append(held[offsets[0]])
            continue
        total: Expr | None = None
        for offset, weight in zip(offsets, weights[r]):
            term = held[offset] * literal(weight, work)
            total = term if total is None else total + term
        assert total is not None
        phases.append(total)
    return store(interleave(phases), q * period.factor, period.factor * lanes)


def _chunks(
    q: Expr,
    sources: np.ndarray,
    weights: np.ndarray | None,
    factor: int,
    lanes: int,
    work: str,
    input_at: Callable[[Expr], Expr],
    store: Callable[[Expr, Expr, int], Stmt],
) -> Stmt:
    """Output s*q + r for every r, in chunks of up to `lanes` r's: lane r's tap t is the input
    at q + sources[r][t] (each bound once, then broadcast and picked per lane), times weights[r][t]
    (a constant vector), summed over t in the compute's order."""
    shifts = sorted({int(v) for v in sources.flat})

    def body(held: dict[int, Expr]) -> Stmt:
        stores = []
        for r0 in range(0, factor, lanes):
            n = min(lanes, factor - r0)
            rs = range(r0, r0 + n)
            total: Expr | None = None
            for t in range(sources.shape[1]):
                picked = _per_lane([held[int(sources[r][t])] for r in rs], n)
                if weights is not None:
                    picked = picked * _per_lane(
                        [literal(float(weights[r][t]), work) for r in rs], n
                    )
                total = picked if total is None else total + picked
            assert total is not None
            stores.append(store(total, q * factor + r0, n))
        return seq(*stores)

    return let_all("x", [input_at(q + shift) for shift in shifts],
                   lambda held: body(dict(zip(shifts, held))))  # fmt: skip


def _per_lane(values: list[Expr], lanes: int) -> Expr:
    """A vector whose lane i is values[i] (scalars; equal ones broadcast once)."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) == 1:
        return broadcast(distinct[0], lanes)
    splats = tuple(broadcast(v, lanes) for v in distinct)
    return Shuffle(splats, tuple(distinct.index(v) * lanes + i for i, v in enumerate(values)))


RESIZE = Template(resize_template, epilogue=True)
