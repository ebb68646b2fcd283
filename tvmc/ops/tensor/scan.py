"""Scans: CumSum and CumProd along one axis (exclusive, reverse): rules, references and one
template per target.

Every line along the axis is an independent sequential scan: each step reads the previous
output back and combines it with the next input in the accumulator dtype (a float16 step in
float32, rounded at each store, as a float16 running value is). On the CPU the lines run in a
(parallel) loop; when the scan axis is not the last one, each step is a vectorized loop across
the lines that lie side by side along the contiguous last axis. On CUDA each thread scans one
line, consecutive threads owning adjacent elements so that every step's accesses coalesce.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, Stmt, const, loop, seq
from tvmc.ops.common import normalize_axis
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, Template, TemplateFn, TensorRef
from tvmc.ops.registry import OPAQUE, REQUIRED, OpDef
from tvmc.ops.schedule.gpu_launch import grid_loop
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import unflatten
from tvmc.ops.schedule.reduction_stages import (
    Index,
    accumulator_dtype,
    combine,
    flat_loop,
    identity,
    parallel_kind,
)
from tvmc.ops.tensor.common import vector_loop

NUMERIC = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64")  # fmt: skip
KINDS = {"CumSum": "sum", "CumProd": "prod"}
Line = Callable[[Expr], tuple[Expr, ...]]  # position along the axis -> the element's indices
Across = Callable[[Callable[[Expr | None], Stmt]], Stmt]  # runs a step for every line it owns


def _scan_rule(op: str):
    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        (x,) = types
        if x.dtype not in NUMERIC:
            raise ValueError(f"{op} does not support dtype {x.dtype}; supported: {list(NUMERIC)}")
        if x.ndim == 0:
            raise ValueError(f"{op} needs an input of rank >= 1")
        normalize_axis(attrs["axis"], x.ndim, op)
        return [x]

    return rule


def _scan_reference(op: str):
    accumulate = np.cumsum if KINDS[op] == "sum" else np.cumprod

    def reference(attrs: Attrs, x: np.ndarray) -> np.ndarray:
        axis = normalize_axis(attrs["axis"], x.ndim)
        y = np.flip(x, axis) if attrs["reverse"] else x
        out = accumulate(y, axis=axis, dtype=x.dtype)  # float16 rounds every step, as we do
        if attrs["exclusive"]:
            first = np.full_like(np.take(out, [0], axis=axis), 0 if KINDS[op] == "sum" else 1)
            out = np.concatenate([first, np.delete(out, -1, axis=axis)], axis=axis)
        return np.flip(out, axis) if attrs["reverse"] else out

    reference.__doc__ = (
        f"Running {KINDS[op]} along `axis`; `exclusive` leaves each element out of its own "
        "result, `reverse` runs from the end."
    )
    return reference


def scan_steps(
    op: str, attrs: Attrs, x: TensorRef, out: Buffer, line_of: Callable[[Expr | None], Line],
    across: Across,
) -> Stmt:  # fmt: skip
    """The scan of the lines `across` owns: the first step, then a loop over the others.

    `across(element)` runs `element(lane)` for each of its lines and `line_of(lane)` indexes
    that line; the first step is peeled so that no step reads before the start of its line.
    """
    kind, n = KINDS[op], x.shape[normalize_axis(attrs["axis"], x.type.ndim)]
    acc = accumulator_dtype(x.dtype)
    exclusive, reverse = bool(attrs["exclusive"]), bool(attrs["reverse"])

    def position(t: Expr) -> Expr:  # where scan step t lies along the axis
        return const(n - 1) - t if reverse else t

    def first(lane: Expr | None) -> Stmt:
        line = line_of(lane)
        value = identity(kind, acc) if exclusive else x.read(line(position(const(0)))).astype(acc)
        return out.store(line(position(const(0))), value.astype(out.dtype))

    def later(t: Expr) -> Stmt:
        def element(lane: Expr | None) -> Stmt:
            line = line_of(lane)
            previous = out.load(*line(position(t - 1))).astype(acc)
            term = x.read(line(position(t - 1 if exclusive else t))).astype(acc)
            return out.store(line(position(t)), combine(kind, previous, term).astype(out.dtype))

        return across(element)

    rest = loop("t", n - 1, lambda t: later(t + 1)) if n > 1 else None
    return seq(across(first), rest)


def _indexer(ndim: int, axis: int, idx: Index) -> Callable[[Expr | None], Line]:
    """line_of(lane): the line at `idx` (every axis but the scan axis and, given a lane, the
    last), the lane indexing the last axis."""

    def line_of(lane: Expr | None) -> Line:
        def line(t: Expr) -> tuple[Expr, ...]:
            full = {**idx, axis: t} if lane is None else {**idx, axis: t, ndim - 1: lane}
            return tuple(full[a] for a in range(ndim))

        return line

    return line_of


def _scan_cpu(op: str) -> TemplateFn:
    def build(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        (x,), out = inputs, outputs[0]
        ndim, shape = x.type.ndim, x.shape
        axis = normalize_axis(attrs["axis"], ndim)
        rows = axis != ndim - 1  # the lines side by side along the last axis form a row
        lines = [a for a in range(ndim) if a != axis and not (rows and a == ndim - 1)]
        kind = parallel_kind(ctx, math.prod(shape), math.prod(shape[a] for a in lines))
        lanes = ctx.target.lanes(out.dtype)

        def across(element: Callable[[Expr | None], Stmt]) -> Stmt:
            return vector_loop(shape[-1], lanes, element) if rows else element(None)

        def scan(idx: Index) -> Stmt:
            return scan_steps(op, attrs, x, out, _indexer(ndim, axis, idx), across)

        return [make_kernel(ctx.name(op.lower()), flat_loop("p", lines, shape, scan, kind))]

    build.__doc__ = f"{op} on the CPU: lines in a (parallel) loop, a step across a row vectorized."
    return build


def _scan_gpu(op: str) -> TemplateFn:
    def build(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        (x,), out = inputs, outputs[0]
        ndim, shape = x.type.ndim, x.shape
        axis = normalize_axis(attrs["axis"], ndim)
        lines = [a for a in range(ndim) if a != axis]

        def thread(flat: Expr) -> Stmt:
            idx = dict(zip(lines, unflatten(flat, [shape[a] for a in lines])))
            return scan_steps(op, attrs, x, out, _indexer(ndim, axis, idx), lambda e: e(None))

        total = math.prod(shape[a] for a in lines)
        return [make_kernel(ctx.name(op.lower()), grid_loop(total, thread))]

    build.__doc__ = f"{op} on CUDA: one thread per line, adjacent threads on adjacent lines."
    return build


def _scan_def(op: str) -> OpDef:
    return OpDef(op, _scan_rule(op), _scan_reference(op),
                 {"cpu": Template(_scan_cpu(op)), "cuda": Template(_scan_gpu(op))},
                 attrs={"axis": REQUIRED, "exclusive": False, "reverse": False}, kind=OPAQUE,
                 flops=lambda attrs, inputs, outputs: outputs[0].size)  # fmt: skip


DEFINITIONS = [_scan_def("CumSum"), _scan_def("CumProd")]
