"""The schedule of computes: one kernel storing fused expressions over an output index space.

A compute (tvmc.ops.lowering.Compute) says what each output element is; the target kind says
how the loops run: on a CPU the outer dims flatten into one (parallel when large) loop and the
innermost is vectorized with a tail; on a GPU every element is one thread (`grid_loop`).
`INJECTIVE` is the table from target kind to schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tvmc.kernel import Buffer, Expr, IntImm, Kernel, Stmt, const, loop, seq
from tvmc.kernel.transform import free_buffers
from tvmc.ops.lowering import Accessor, LowerContext
from tvmc.ops.schedule.gpu_launch import grid_loop

Outputs = Sequence[tuple[Buffer, int, Accessor]]  # (buffer, rank, accessor), one shape
PARALLEL_MIN_ELEMENTS = 1 << 15  # copies' worth; below this a fork/join costs more than it saves


def _element_stores(outputs: Outputs) -> Callable[[Expr, Expr], Stmt]:
    """store(outer, inner): every output's value at the element with flat outer index `outer`
    (over all dims but the last) and last-dim index `inner`."""
    buffer, rank, _ = outputs[0]
    shape = buffer.shape if rank else ()

    def body_at(outer_var: Expr, inner_index: Expr) -> Stmt:
        idx: list[Expr] = []
        rest = outer_var
        dims = shape[:-1]
        for k, d in enumerate(reversed(dims)):
            outermost = k == len(dims) - 1  # o < prod(dims): no wrap-around needed
            idx.append(IntImm(0, "int32") if d == 1 else rest if outermost else rest % d)
            rest = rest // d
        full = tuple(reversed(idx)) + ((inner_index,) if shape else ())
        store_idx = full if shape else (IntImm(0, "int32"),)
        return seq(*(buf.store(store_idx, acc(full)) for buf, _, acc in outputs))

    return body_at


def _extents(outputs: Outputs) -> tuple[tuple[int, ...], int, int]:
    buffer, rank, _ = outputs[0]
    shape = buffer.shape if rank else ()
    total = math.prod(shape)
    return shape, total, shape[-1] if shape else 1


def injective_cpu(ctx: LowerContext, name: str, outputs: Outputs, element_cost: int = 1) -> Kernel:
    """Outer dims as one loop (parallel when its elements times `element_cost` are many), the
    innermost vectorized with a tail."""
    shape, total, inner = _extents(outputs)
    outer = total // inner
    lanes = ctx.target.lanes(outputs[0][0].dtype)
    body_at = _element_stores(outputs)

    def inner_loops(o: Expr) -> Stmt:
        if inner < 2 * lanes:
            return loop("i", inner, lambda i: body_at(o, i)) if shape else body_at(o, const(0))
        full = inner // lanes
        main = loop("io", full, lambda io: loop(
            "ii", lanes, lambda ii: body_at(o, io * lanes + ii), kind="vectorized"))  # fmt: skip
        tail = inner - full * lanes
        rest = loop("it", tail, lambda it: body_at(o, full * lanes + it)) if tail else None
        return seq(main, rest)

    work = total * element_cost
    kind = "parallel" if work >= PARALLEL_MIN_ELEMENTS and outer > 1 else "serial"
    body = loop("o", outer, inner_loops, kind=kind) if outer > 1 else inner_loops(const(0))
    return make_kernel(ctx.name(name), body)


def injective_gpu(ctx: LowerContext, name: str, outputs: Outputs, element_cost: int = 1) -> Kernel:
    """One thread per element; consecutive threads store adjacent elements."""
    shape, total, inner = _extents(outputs)
    body_at = _element_stores(outputs)
    at = (lambda f: body_at(f // inner, f % inner)) if shape else (lambda f: body_at(f, f))
    return make_kernel(ctx.name(name), grid_loop(total, at))


INJECTIVE: dict[str, Callable[[LowerContext, str, Outputs, int], Kernel]] = {
    "cpu": injective_cpu,
    "cuda": injective_gpu,
}


def schedule_injective(
    ctx: LowerContext, name: str, outputs: Outputs, element_cost: int = 1
) -> Kernel:
    """One kernel storing each (buffer, rank, accessor) of `outputs` (all of one shape), laid
    out by the target kind's schedule; `element_cost`: one element's work in copies' worth."""
    return INJECTIVE[ctx.target.kind](ctx, name, outputs, element_cost)


def make_kernel(name: str, body: Stmt) -> Kernel:
    """A kernel whose params are every global buffer `body` touches, in first-use order."""
    params = tuple(b for b in free_buffers(body) if b.scope == "global")
    return Kernel(name, params, body)
