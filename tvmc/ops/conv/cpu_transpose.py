"""Strided ConvTranspose on the CPU without the stuffed zeros: columns, then a col2im gather.

Read stuffed (`ConvGeometry.stuffed`), a stride-s ConvTranspose multiplies s**d times more
zeros than inputs. Here it runs as two kernels that touch only real inputs:

1. columns: a 1x1 Conv (the register-tiled template of cpu.py) with one output channel per
   (output channel, kernel tap): `cols[n, oc * taps + t, i] = sum_c w[c, oc, t] * x[n, c, i]`,
   exactly the useful multiply-adds, kept in the accumulator type;
2. gather: each output sums the columns of the taps that land on it. Output `o = q * s + r`
   (phase r per axis) receives tap k from input `i = q + (r + pad - k * dilation) / s` when that
   division is exact, so each phase has a fixed list of (tap, offset): the phases are unrolled
   and only the taps that land are read. Rows and the columns' ends where a tap falls outside the
   input test it; the interior reads without tests. Bias and the epilogue apply at the store.

The columns take (taps / prod(strides)) times the output's size in the workspace.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from tvmc.kernel import (
    Buffer,
    Expr,
    Kernel,
    Stmt,
    const,
    if_then_else,
    loop,
    maximum,
    minimum,
    select,
    seq,
)
from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import accumulator_dtype, ceil_div, finalize, let_all, unflatten

MAX_GATHER_TAPS = 256  # each tap is a load or two in the unrolled gather: a bound on its code
MAX_COLUMNS_PER_OUTPUT = 16  # columns (taps / prod(strides) per output) the workspace may hold
PARALLEL_MIN_OUTPUTS = 1 << 15  # below this a fork/join costs more than the split saves

Lowering = Callable[..., list[Kernel]]  # cpu.conv_lowering's signature


def uses_columns(geo: ConvGeometry) -> bool:
    """Whether a ConvTranspose (as stated) runs as columns + gather: strided, with taps few
    enough to unroll and columns small enough to keep (else it runs stuffed)."""
    taps, strides = len(geo.taps), math.prod(geo.strides)
    return (
        geo.transposed
        and strides > 1
        and taps <= MAX_GATHER_TAPS
        and taps <= MAX_COLUMNS_PER_OUTPUT * strides
    )


def columns_geometry(geo: ConvGeometry) -> ConvGeometry:
    """The 1x1 Conv computing every tap's contribution at every input position."""
    ones, zeros = (1,) * len(geo.kernel), (0,) * len(geo.kernel)
    return replace(
        geo, out_channels=geo.out_channels * len(geo.taps), kernel=ones, out_shape=geo.in_shape,
        strides=ones, dilations=ones, pad_begin=zeros, upsample=ones, transposed=False,
    )  # fmt: skip


def columns_weights(geo: ConvGeometry) -> Callable[[np.ndarray], np.ndarray]:
    """ConvTranspose weights (C, M/g, *K) -> the columns conv's (M * taps, C/g, 1, ...)."""
    taps, spatial = len(geo.taps), len(geo.kernel)

    def arrange(w: np.ndarray) -> np.ndarray:
        t = w.reshape(geo.group, geo.icg, geo.ocg, taps).transpose(0, 2, 3, 1)
        return t.reshape(geo.out_channels * taps, geo.icg, *(1,) * spatial)

    return arrange


def columns_lowering(
    lowering: Lowering, ctx: LowerContext, geo: ConvGeometry, x: TensorRef, w: TensorRef,
    bias: TensorRef | None, out: Buffer, epilogue: Epilogue | None,
) -> list[Kernel]:  # fmt: skip
    """The columns conv (through `lowering`, cpu.conv_lowering), then the gather into `out`."""
    acc = accumulator_dtype(out.dtype)
    cols_geo = columns_geometry(geo)
    cols = ctx.temp((geo.batch, cols_geo.out_channels, *geo.in_shape), acc, "cols")
    kernels = lowering(ctx, cols_geo, x, w, columns_weights(geo), None, cols, None)
    body = _gather(geo, cols, bias, out, epilogue, acc)
    return [*kernels, make_kernel(ctx.name("col2im"), body)]


def _phase_taps(geo: ConvGeometry, axis: int, r: int) -> list[tuple[int, int]]:
    """(tap, input offset) pairs of output phase r along `axis`: i = q + offset."""
    s, p, dl = geo.strides[axis], geo.pad_begin[axis], geo.dilations[axis]
    return [
        ((r + p - k * dl) // s, k) for k in range(geo.kernel[axis]) if (r + p - k * dl) % s == 0
    ]


def _inside(q: Expr, offset: int, size: int, count: int) -> Expr | None:
    """The test 0 <= q + offset < size for q in [0, count), only on the sides that can fail."""
    tests = ([q + offset >= 0] if offset < 0 else []) + (
        [q + offset < size] if count - 1 + offset >= size else []
    )
    return _both(*tests, *(None,) * (2 - len(tests)))


def _both(a: Expr | None, b: Expr | None) -> Expr | None:
    """a & b, where None is a test that always holds."""
    return b if a is None else (a if b is None else a & b)


def _gather(
    geo: ConvGeometry, cols: Buffer, bias: TensorRef | None, out: Buffer,
    epilogue: Epilogue | None, acc: str,
) -> Stmt:  # fmt: skip
    """out[n, oc, o] = bias[oc] + the columns of every tap landing on o, then the epilogue."""
    d, ntaps = len(geo.kernel), len(geo.taps)
    lead_counts = [ceil_div(o, s) for o, s in zip(geo.out_shape[:-1], geo.strides[:-1])]
    s, ow, iw = geo.strides[-1], geo.out_shape[-1], geo.in_shape[-1]
    zero = const(0, acc)

    def row(n: Expr, oc: Expr, qs: tuple[Expr, ...], rs: tuple[int, ...]) -> Stmt:
        """Output row o_lead = q * s + r, every column."""
        # per landing lead tap: (flat tap index before the last axis, input row, row test)
        lead: list[tuple[int, tuple[Expr, ...], Expr | None]] = []
        per_axis = [_phase_taps(geo, a, r) for a, r in enumerate(rs)]
        for combo in itertools.product(*per_axis):
            test, rows, flat = None, [], 0
            for a, (offset, k) in enumerate(combo):
                t = _inside(qs[a], offset, geo.in_shape[a], lead_counts[a])
                test = _both(test, t)
                hi = geo.in_shape[a] - 1
                at = qs[a] + offset
                rows.append(at if t is None else minimum(maximum(at, 0), hi))
                flat = flat * geo.kernel[a] + k
            lead.append((flat, tuple(rows), test))
        o_lead = tuple(q * st + r for q, st, r in zip(qs, geo.strides, rs))

        def column(q: Expr, r: int, checked: bool) -> Stmt:
            value: Expr | None = None  # a phase no tap lands on holds the bias alone
            for flat, rows, test in lead:
                for offset, k in _phase_taps(geo, d - 1, r):
                    t = flat * geo.kernel[-1] + k
                    at, col_test = q + offset, _inside(q, offset, iw, ceil_div(ow, s))
                    col_test = col_test if checked else None
                    if col_test is not None:
                        at = minimum(maximum(at, 0), iw - 1)
                    v = cols[(n, oc * ntaps + t, *rows, at)]
                    both = _both(test, col_test)
                    term = v if both is None else select(both, v, zero)
                    value = term if value is None else value + term
            if bias is not None:
                b = bias.read((oc,)).astype(acc)
                value = b if value is None else value + b
            return finalize(
                zero if value is None else value, (n, oc, *o_lead, q * s + r), out, epilogue
            )

        # the interior [lo, hi): every tap of every phase inside the input, every output exists
        offsets = [off for r in range(s) for off, _ in _phase_taps(geo, d - 1, r)]
        lo = max([0, *(-off for off in offsets)])
        hi = min([ow // s, *(iw - off for off in offsets)])
        hi = max(hi, lo)
        edges: list[Stmt | None] = []
        for r in range(s):  # each phase has ceil((ow - r) / s) outputs
            count = ceil_div(ow - r, s) if ow > r else 0
            head = min(lo, count)
            if head:
                edges.append(loop("q", head, lambda q, r=r: column(q, r, True)))
            if count > hi:
                edges.append(loop("q", count - hi, lambda q, r=r: column(q + hi, r, True)))
        interior = (
            loop("q", hi - lo, lambda q: seq(*(column(q + lo, r, False) for r in range(s))))
            if hi > lo
            else None
        )
        return seq(interior, *edges)

    def at(idx: tuple[Expr, ...]) -> Stmt:
        n, oc, qs = idx[0], idx[1], idx[2:]
        rows = []
        for rs in itertools.product(*(range(st) for st in geo.strides[:-1])):
            stmt = row(n, oc, qs, rs)
            exists = None
            for q, r, o, st in zip(qs, rs, geo.out_shape[:-1], geo.strides[:-1]):
                if o % st and r >= o % st:  # the last q of this phase is past the output
                    exists = _both(exists, q < o // st)
            rows.append(stmt if exists is None else if_then_else(exists, stmt))
        return seq(*rows)

    shape = (geo.batch, geo.out_channels, *lead_counts)
    total = math.prod(shape)
    kind = "parallel" if total > 1 and math.prod(out.shape) >= PARALLEL_MIN_OUTPUTS else "serial"
    return loop("t", total, lambda t: let_all("c", unflatten(t, shape), at), kind)
