"""CPU templates for MaxPool, AveragePool, LpPool (1D/2D/3D) and LRN (not tuned: no knob space).

Windowed pools: a parallel loop over the (N, C) planes. Along each spatial axis the outputs are
split at compile time into runs that share one clipped window (the interior, where the whole
window is inside the input, and each border output), so padding costs no test or clamp in the
hot loop, and each output is one register expression over its taps (a loop with a register
accumulator for windows over 64 taps). Along the last axis, stride 1 is vectorized explicitly
(contiguous loads). A larger stride along the last axis of a 2D/3D pool combines by columns
first (`_WindowPool.rows_by_columns`): each output row's window rows are combined into a scratch
row over the whole input row in contiguous vectors, then each output combines only its few taps
along that row, a plain loop (LLVM vectorizes it where the row is long enough). Reading every tap
of the window per output instead left the loop scalar on rows shorter than two vectors:
squeezenet's 27 -> 13 MaxPool ran 3x slower than onnxruntime, 10x slower than by columns
(docs/performance.md, "Strided pools by columns"). A 1D pool keeps the plain strided loop.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from tvmc.kernel import (
    Buffer,
    Expr,
    Kernel,
    Stmt,
    allocate,
    const,
    exp,
    fabs,
    log,
    loop,
    maximum,
    minimum,
    nest,
    power,
    seq,
    sqrt,
)
from tvmc.ops.lowering import Epilogue, LowerContext, Template, TemplateFn, TensorRef
from tvmc.ops.registry import Attrs
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.reduction import (
    Index,
    accumulator_dtype,
    combine,
    combine_all,
    flat_loop,
    identity,
    parallel_kind,
)

MAX_UNROLLED_TAPS = 64  # larger windows loop over their outer dims with a register accumulator
MAX_LINE = 1 << 14  # longest input row combined by columns: its scratch row lives on the stack
POOL_KINDS = {"MaxPool": "max", "AveragePool": "sum", "LpPool": "sum"}


def lp_power(v: Expr, p: int) -> Expr:
    """|v| ** p, the term LpPool sums (products for p 1 and 2: no pow call)."""
    if p == 1:
        return fabs(v)
    return v * v if p == 2 else power(fabs(v), const(float(p), v.dtype))


def lp_root(v: Expr, p: int) -> Expr:
    """v ** (1/p), LpPool's result from its sum."""
    if p == 1:
        return v
    return sqrt(v) if p == 2 else power(v, const(1.0 / p, v.dtype))


@dataclass(frozen=True)
class Run:
    """Consecutive outputs [first, stop) of one axis whose windows keep taps [k_lo, k_hi)."""

    first: int
    stop: int
    k_lo: int
    k_hi: int
    count: int  # cells the average divides by along this axis


def axis_runs(
    out: int,
    size: int,
    kernel: int,
    stride: int,
    dilation: int,
    pad: int,
    pad_end: int,
    include_pad: bool,
) -> list[Run]:
    """The outputs of one axis grouped by their clipped window (static; few runs)."""
    runs: list[Run] = []
    for o in range(out):
        start = o * stride - pad
        taps = [k for k in range(kernel) if 0 <= start + k * dilation < size]
        k_lo, k_hi = (taps[0], taps[-1] + 1) if taps else (0, 0)
        inside = sum(1 for k in range(kernel) if start + k * dilation < size + pad_end)
        count = max(1, inside if include_pad else len(taps))
        if runs and (runs[-1].k_lo, runs[-1].k_hi, runs[-1].count) == (k_lo, k_hi, count):
            runs[-1] = Run(runs[-1].first, o + 1, k_lo, k_hi, count)
        else:
            runs.append(Run(o, o + 1, k_lo, k_hi, count))
    return runs


def _over_run(
    name: str, run: Run, lanes: int, vector: bool, overlap: bool, body: Callable[[Expr], Stmt]
) -> Stmt:
    """`body(o)` over a run: vectors of `lanes` and a tail, or a plain loop.

    The tail is one more full vector ending at the run's end when `overlap` allows recomputing
    outputs (pure stores), else one narrow vector (LLVM pads odd widths).
    """
    n = run.stop - run.first
    if n == 1:
        return body(const(run.first))
    if not vector:
        return loop(name, n, lambda i: body(run.first + i))
    full = n // lanes * lanes
    main = loop(
        f"{name}b",
        n // lanes,
        lambda b: loop("l", lanes, lambda l: body(run.first + b * lanes + l), kind="vectorized"),
    )
    tail = n - full
    if tail and full and overlap:
        last = run.stop - lanes
        rest = loop("t", lanes, lambda t: body(last + t), kind="vectorized")
    else:
        rest = loop(
            "t",
            tail,
            lambda t: body(run.first + full + t),
            kind="vectorized" if tail > 1 else "serial",
        )
    return seq(main if full else None, rest if tail else None)


@dataclass
class _WindowPool:
    """MaxPool/AveragePool/LpPool over one input: the runs of every spatial axis and the stores."""

    kind: str  # max or sum
    x: TensorRef
    out: Buffer
    attrs: Attrs
    epilogue: Epilogue | None
    lanes: int
    p: int = 0  # LpPool: sums |x| ** p, then takes the p-th root; 0: a plain max or average

    @property
    def acc(self) -> str:
        return accumulator_dtype(self.x.dtype)

    def runs(self) -> list[list[Run]]:
        """The runs of each spatial axis."""
        a, nd = self.attrs, self.x.type.ndim - 2
        include = bool(a.get("count_include_pad", 0))
        axes = zip(self.out.shape[2:], self.x.shape[2:], a["kernel_shape"], a["strides"],
                   a["dilations"], a["pads"][:nd], a["pads"][nd:])  # fmt: skip
        return [axis_runs(*axis, include_pad=include) for axis in axes]

    def tap(
        self, n: Expr, c: Expr, o: list[Expr], ks: tuple[int | Expr, ...], rest: tuple = ()
    ) -> Expr:
        """The term tap `ks` of output (n, c, *o) contributes; `o` and `ks` may cover the
        leading spatial axes only, `rest` then being the input position along the others."""
        strides, dilations, pads = (self.attrs[k] for k in ("strides", "dilations", "pads"))
        pos = [o[i] * strides[i] - pads[i] + k * dilations[i] for i, k in enumerate(ks)]
        v = self.x.read((n, c, *pos, *rest)).astype(self.acc)
        return lp_power(v, self.p) if self.p else v

    def store(self, n: Expr, c: Expr, o: list[Expr], rs: tuple[Run, ...], v: Expr) -> Stmt:
        """Stores the combined window `v` as output (n, c, *o), clipped as `rs` say."""
        if self.p:
            v = lp_root(v, self.p)
        elif self.kind == "sum":
            v = v / const(float(math.prod(r.count for r in rs)), self.acc)
        v, where = v.astype(self.out.dtype), (n, c, *o)
        return self.out.store(where, self.epilogue(where, v) if self.epilogue is not None else v)

    def output(self, n: Expr, c: Expr, o: list[Expr], rs: tuple[Run, ...]) -> Stmt:
        """Stores output (n, c, *o), whose window is clipped as `rs` say."""

        def at(ks: tuple[int | Expr, ...]) -> Expr:
            return self.tap(n, c, o, ks)

        def store(v: Expr) -> Stmt:
            return self.store(n, c, o, rs, v)

        spans = [range(r.k_lo, r.k_hi) for r in rs]
        taps = math.prod(len(s) for s in spans)
        if taps == 0:  # a window wholly in the padding (ceil mode): the identity, as padded
            return store(identity(self.kind, self.acc))
        if taps <= MAX_UNROLLED_TAPS:
            return store(combine_all(self.kind, [at(ks) for ks in itertools.product(*spans)]))
        return _looped_window(self.kind, identity(self.kind, self.acc), spans, at, store)

    def rows(self, n: Expr, c: Expr, rs: tuple[Run, ...]) -> Stmt:
        """Every output in the runs `rs` (one per spatial axis) of plane (n, c)."""
        small = math.prod(r.k_hi - r.k_lo for r in rs) <= MAX_UNROLLED_TAPS
        # a looped window allocates its accumulator: no vectorized loop may hold it
        vector = self.attrs["strides"][-1] == 1 and small
        # recomputing an output is harmless unless an epilogue reads what the store overwrites
        overlap = self.epilogue is None

        def level(i: int, o: list[Expr]) -> Stmt:
            r = rs[i]
            if i == len(rs) - 1:
                return _over_run("ow", r, self.lanes, vector, overlap,
                                 lambda w: self.output(n, c, [*o, w], rs))  # fmt: skip
            if r.stop - r.first == 1:
                return level(i + 1, [*o, const(r.first)])
            return loop(f"o{i}", r.stop - r.first, lambda v: level(i + 1, [*o, r.first + v]))

        return level(0, [])

    def by_columns(self, runs: list[list[Run]]) -> bool:
        """Whether `rows_by_columns` serves this pool: 2+ spatial axes, a strided last axis,
        windows unrolled in registers and input rows short enough for a stack scratch row."""
        taps = math.prod(max(r.k_hi - r.k_lo for r in axis) for axis in runs)
        return (
            len(runs) >= 2
            and self.attrs["strides"][-1] > 1
            and taps <= MAX_UNROLLED_TAPS
            and self.x.shape[-1] <= MAX_LINE
        )

    def rows_by_columns(
        self, n: Expr, c: Expr, outer: tuple[Run, ...], last: list[Run], line: Buffer
    ) -> Stmt:
        """Every output of plane (n, c) whose leading axes lie in the runs `outer`: per output
        row, its window rows combined into `line` (scratch as long as an input row) in
        contiguous vectors, then each output combines its taps of `line` (the last axis' kernel
        taps only)."""
        strides, dilations, pads = (self.attrs[k] for k in ("strides", "dilations", "pads"))
        spans = [range(r.k_lo, r.k_hi) for r in outer]
        width = self.x.shape[-1]

        def row(o: list[Expr]) -> Stmt:
            if not all(spans):  # a window row wholly in the padding (ceil mode)
                return seq(*(self.rows(n, c, (*outer, r)) for r in last))

            def column(w: Expr) -> Stmt:
                terms = [self.tap(n, c, o, ks, (w,)) for ks in itertools.product(*spans)]
                return line.store(w, combine_all(self.kind, terms))

            def output(r: Run, w: Expr) -> Stmt:
                start = w * strides[-1] - pads[len(strides) - 1]  # the last axis' begin pad
                terms = [line[start + k * dilations[-1]] for k in range(r.k_lo, r.k_hi)]
                v = combine_all(self.kind, terms) if terms else identity(self.kind, self.acc)
                return self.store(n, c, [*o, w], (*outer, r), v)

            everywhere = Run(0, width, 0, 0, 1)
            fill = _over_run("iw", everywhere, self.lanes, True, True, column)
            # taps are loads of `line`, not of the input: the plain loop as `rows` writes it
            outputs = [_over_run("ow", r, self.lanes, False, False, lambda w, r=r: output(r, w))
                       for r in last]  # fmt: skip
            return seq(fill, *outputs)

        def level(i: int, o: list[Expr]) -> Stmt:
            if i == len(outer):
                return row(o)
            r = outer[i]
            if r.stop - r.first == 1:
                return level(i + 1, [*o, const(r.first)])
            return loop(f"o{i}", r.stop - r.first, lambda v: level(i + 1, [*o, r.first + v]))

        return level(0, [])


def pool_template(op: str) -> TemplateFn:
    """The CPU template of MaxPool, AveragePool or LpPool."""
    kind = POOL_KINDS[op]

    def lower(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        x = inputs[0]
        lanes = ctx.target.lanes(accumulator_dtype(x.dtype))
        p = int(attrs["p"]) if op == "LpPool" else 0
        pool = _WindowPool(kind, x, outputs[0], attrs, epilogue, lanes, p)
        runs = pool.runs()
        channels, planes = x.shape[1], x.shape[0] * x.shape[1]

        def plane(p: Expr) -> Stmt:
            n, c = p // channels, p % channels
            if pool.by_columns(runs):
                outer = list(itertools.product(*runs[:-1]))
                return allocate(
                    "line", (x.shape[-1],),
                    lambda line: seq(*(pool.rows_by_columns(n, c, rs, runs[-1], line)
                                       for rs in outer)),
                    dtype=pool.acc,
                )  # fmt: skip
            return seq(*(pool.rows(n, c, rs) for rs in itertools.product(*runs)))

        body = loop("p", planes, plane, kind=parallel_kind(ctx, x.type.size, planes))
        return [make_kernel(ctx.name(op.lower()), body)]

    lower.__doc__ = f"{op}: windows clipped per run at compile time, planes in parallel."
    return lower


def _looped_window(
    kind: str,
    init: Expr,
    spans: list[range],
    at: Callable[[tuple[int | Expr, ...]], Expr],
    store: Callable[[Expr], Stmt],
) -> Stmt:
    """A big window: loops over its outer dims into a one-element register accumulator."""

    def body(a: Buffer) -> Stmt:
        outer = [(f"k{i}", len(s)) for i, s in enumerate(spans[:-1])]

        def tap(*ks: Expr) -> Stmt:
            full = tuple(s.start + k for s, k in zip(spans, ks))
            row = combine_all(kind, [at((*full, j)) for j in spans[-1]])
            return a.store(0, combine(kind, a[0], row))

        return seq(a.store(0, init), nest(outer, tap) if outer else tap(), store(a[0]))

    return allocate("win", (1,), body, dtype=init.dtype)


# ---- LRN -----------------------------------------------------------------------------------------
def inverse_power(v: Expr, beta: float) -> Expr:
    """v ** -beta; sqrt forms for the usual betas (exact-ish and fast), else exp(-beta log v)."""
    one = const(1.0, v.dtype)
    if beta == 0.75:
        root = sqrt(v)
        return one / (root * sqrt(root))
    if beta == 0.5:
        return one / sqrt(v)
    if beta == 1.0:
        return one / v
    return exp(log(v) * -beta)


def lrn(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """y = x / (bias + alpha / size * sum of x^2 over nearby channels) ** beta."""
    x, out = inputs[0], outputs[0]
    ndim = x.type.ndim
    size = int(attrs["size"])
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    acc = accumulator_dtype(x.dtype)
    lanes = ctx.target.lanes(acc)
    channels, width = x.shape[1], x.shape[-1]
    alpha = float(attrs["alpha"]) / size

    def row(idx: Index) -> Stmt:
        c = idx[1]
        first = maximum(const(0), c - before)
        stop = minimum(const(channels), c + after + 1)

        def point(sq: Buffer, slot: Expr, col: Expr) -> Stmt:
            def at(ch: Expr) -> tuple[Expr, ...]:
                return (idx[0], ch, *(idx[a] for a in range(2, ndim - 1)), col)

            def add(j: Expr) -> Stmt:
                v = x.read(at(first + j)).astype(acc)
                return sq.store(slot, sq[slot] + v * v)

            scale = const(float(attrs["bias"]), acc) + sq[slot] * alpha
            y = (x.read(at(c)).astype(acc) * inverse_power(scale, float(attrs["beta"]))).astype(
                out.dtype
            )
            where = at(c)
            return seq(
                sq.store(slot, const(0.0, acc)),
                loop("j", stop - first, add),
                out.store(where, epilogue(where, y) if epilogue is not None else y),
            )

        def body(sq: Buffer) -> Stmt:
            full = width // lanes * lanes
            main = loop(
                "wb",
                width // lanes,
                lambda wb: loop(
                    "l", lanes, lambda l: point(sq, l, wb * lanes + l), kind="vectorized"
                ),
            )
            rest = width - full  # one narrow vector: LLVM pads odd widths
            tail = loop("wt", rest, lambda t: point(sq, t, full + t),
                        kind="vectorized" if rest > 1 else "serial")  # fmt: skip
            return seq(main if full else None, tail if width > full else None)

        return allocate("sq", (lanes,), body, dtype=acc)

    axes = [a for a in range(ndim - 1) if x.shape[a] > 1]
    rows = math.prod(x.shape[:-1])
    kind = parallel_kind(ctx, x.type.size, rows)
    zeros = {a: const(0) for a in range(ndim)}
    body = flat_loop("row", axes, x.shape, lambda i: row({**zeros, **i}), kind)
    return [make_kernel(ctx.name("lrn"), body)]


MAX_POOL = Template(pool_template("MaxPool"), epilogue=True)
AVERAGE_POOL = Template(pool_template("AveragePool"), epilogue=True)
LP_POOL = Template(pool_template("LpPool"), epilogue=True)
LRN = Template(lrn, epilogue=True)
