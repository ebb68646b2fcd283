"""Generic walks and rewrites of kernel IR, and the loop vectorizer that codegen applies.

Nodes are frozen dataclasses, so one child-rebuilding helper serves every rewrite: a rewrite is a
post-order function from node to node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, replace
from typing import TypeVar

from tvmc.kernel.buffer import Buffer
from tvmc.kernel.expr import (
    Add,
    Broadcast,
    Cast,
    Expr,
    FloorDiv,
    IntImm,
    KernelIRError,
    Load,
    Max,
    Min,
    Mod,
    Mul,
    Ramp,
    Select,
    Sub,
    Var,
)
from tvmc.kernel.stmt import (
    GPU_KINDS,
    Allocate,
    Barrier,
    Evaluate,
    For,
    IfThenElse,
    Let,
    SeqStmt,
    Stmt,
    Store,
)

Node = TypeVar("Node", Expr, Stmt)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def children(node: Expr | Stmt) -> Iterator[Expr | Stmt]:
    """The direct Expr/Stmt children of `node`, in field order."""
    names = _FIELD_NAMES.get(type(node))
    if names is None:  # dataclasses.fields() per call dominated whole-model compile time
        names = _FIELD_NAMES[type(node)] = tuple(f.name for f in fields(node))  # type: ignore[arg-type]
    for name in names:
        value = getattr(node, name)
        if isinstance(value, (Expr, Stmt)):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, (Expr, Stmt)))


def walk(node: Expr | Stmt) -> Iterator[Expr | Stmt]:
    """Every node under `node` (itself included), pre-order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))


def rewrite(node: Node, fn: Callable[[Expr | Stmt], Expr | Stmt]) -> Node:
    """Post-order rewrite: children first, then `fn` on the rebuilt node.

    Binding positions (the `var` of For and Let) are left alone: they name, they do not use.
    """
    changes = {}
    for f in fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if f.name == "var" and isinstance(node, (For, Let)):
            continue
        if isinstance(value, (Expr, Stmt)):
            new = rewrite(value, fn)
        elif isinstance(value, tuple) and any(isinstance(v, (Expr, Stmt)) for v in value):
            new = tuple(rewrite(v, fn) for v in value)
            if all(a is b for a, b in zip(new, value)):
                new = value
        else:
            continue
        if new is not value:
            changes[f.name] = new
    rebuilt = replace(node, **changes) if changes else node  # type: ignore[type-var]
    return fn(rebuilt)  # type: ignore[return-value]


def substitute(node: Node, mapping: Mapping[Var, Expr]) -> Node:
    """`node` with every Var in `mapping` replaced by its expression."""
    if not mapping:
        return node
    return rewrite(node, lambda n: mapping.get(n, n) if isinstance(n, Var) else n)


def free_vars(node: Expr | Stmt) -> list[Var]:
    """Vars used under `node` but bound outside it, in first-use order."""
    out: dict[Var, None] = {}

    def visit(n: Expr | Stmt, bound: frozenset[Var]) -> None:
        if isinstance(n, Var):
            if n not in bound:
                out.setdefault(n)
            return
        if isinstance(n, For):
            visit(n.extent, bound)
            visit(n.body, bound | {n.var})
        elif isinstance(n, Let):
            visit(n.value, bound)
            visit(n.body, bound | {n.var})
        else:
            for c in children(n):
                visit(c, bound)

    visit(node, frozenset())
    return list(out)


def free_buffers(node: Stmt) -> list[Buffer]:
    """Buffers loaded or stored under `node` but not allocated inside it, in first-use order."""
    used: dict[Buffer, None] = {}
    allocated = {n.buffer for n in walk(node) if isinstance(n, Allocate)}
    for n in walk(node):
        if isinstance(n, (Load, Store)) and n.buffer not in allocated:
            used.setdefault(n.buffer)
    return list(used)


def contains(node: Expr | Stmt, cls: type | tuple[type, ...]) -> bool:
    """Whether any node under `node` is an instance of `cls`."""
    return any(isinstance(n, cls) for n in walk(node))


def known_multiple(e: Expr, env: Mapping[Var, int] | None = None) -> int:
    """A number that integer `e` is always a multiple of (0: `e` is always 0); 1 if unknown.

    `env` gives what each variable is known to be a multiple of (absent: 1). Codegen uses it to
    prove vector accesses aligned (a misaligned ld.v4 faults on a GPU), so every rule is exact:
    a sum keeps the gcd, a product multiplies, `a mod c` keeps gcd(a's, c), `a // c` divides
    a's multiple only when c divides it."""
    if isinstance(e, IntImm):
        return abs(e.value)
    if isinstance(e, Var):
        return (env or {}).get(e, 1)
    if isinstance(e, Cast) and e.dtype.startswith(("int", "uint")):
        return known_multiple(e.value, env) if e.value.dtype.startswith(("int", "uint")) else 1
    if isinstance(e, (Add, Sub, Min, Max)):
        return math.gcd(known_multiple(e.a, env), known_multiple(e.b, env))
    if isinstance(e, Select):
        return math.gcd(known_multiple(e.t, env), known_multiple(e.f, env))
    if isinstance(e, Mul):
        return known_multiple(e.a, env) * known_multiple(e.b, env)
    if isinstance(e, (Mod, FloorDiv)) and isinstance(e.b, IntImm) and e.b.value:
        a, c = known_multiple(e.a, env), abs(e.b.value)
        if isinstance(e, Mod):
            return math.gcd(a, c)
        return 0 if a == 0 else a // c if a % c == 0 else 1
    return 1


class _NotVectorizable(Exception):
    pass


MAX_THREADS_PER_BLOCK = 1024  # every CUDA GPU since sm_20
MAX_STATIC_SHARED_BYTES = 48 * 1024  # more needs dynamic shared memory and an opt-in attribute


def gpu_extents(name: str, body: Stmt) -> tuple[dict[str, int], int]:
    """Per GPU axis the largest extent bound to it (how NVPTX launches kernel `name`), and the
    static shared bytes it allocates; KernelIRError for a GPU loop of no constant extent."""
    axes: dict[str, int] = {}
    shared = 0
    for n in walk(body):
        if isinstance(n, For) and n.kind in GPU_KINDS:
            if not isinstance(n.extent, IntImm):
                raise KernelIRError(f"kernel {name}: {n.kind} loop needs a constant extent")
            axes[n.kind] = max(axes.get(n.kind, 1), n.extent.value)
        elif isinstance(n, Allocate) and n.buffer.scope == "shared":
            shared += n.buffer.nbytes
    return axes, shared


def vectorize_loop(loop: For) -> Stmt | None:
    """The body of a constant-extent loop rewritten over vectors of `extent` lanes, or None.

    The loop variable becomes `ramp(0, extent)`. None means the body cannot be expressed with
    vectors (a store that does not depend on the variable, a lane-dependent branch or loop
    bound, an allocation, a nested vectorized loop); codegen then unrolls it instead.
    """
    if not isinstance(loop.extent, IntImm) or loop.extent.value < 2:
        return None
    lanes = loop.extent.value
    zero, one = IntImm(0, loop.var.dtype), IntImm(1, loop.var.dtype)
    try:
        return _vec(loop.body, {loop.var: Ramp(zero, one, lanes)}, lanes)
    except _NotVectorizable:
        return None


def _vec_expr(e: Expr, mapping: dict[Var, Expr], lanes: int) -> Expr:
    out = substitute(e, mapping)
    for n in walk(out):
        if isinstance(n, Expr) and n.lanes not in (1, lanes):
            raise _NotVectorizable
        if isinstance(n, Ramp) and (n.base.lanes != 1 or n.stride.lanes != 1):
            raise _NotVectorizable
        if isinstance(n, Broadcast) and n.value.lanes != 1:
            raise _NotVectorizable
    return out


def _vec(s: Stmt, mapping: dict[Var, Expr], lanes: int) -> Stmt:
    if isinstance(s, Store):
        idx = tuple(_vec_expr(i, mapping, lanes) for i in s.indices)
        value = _vec_expr(s.value, mapping, lanes)
        if all(i.lanes == 1 for i in idx):
            raise _NotVectorizable  # every iteration hits one element: a reduction, not a map
        if value.lanes == 1:
            value = Broadcast(value, lanes)
        return Store(s.buffer, idx, value)
    if isinstance(s, Let):
        value = _vec_expr(s.value, mapping, lanes)
        if value.lanes == 1:
            return Let(s.var, value, _vec(s.body, mapping, lanes))
        if not s.var.dtype.startswith(("int", "uint")):
            var = Var(s.var.name, s.var.dtype, lanes)
            return Let(var, value, _vec(s.body, {**mapping, s.var: var}, lanes))
        # Integer lets are index arithmetic: inline them so loads still see unit-stride ramps.
        return _vec(s.body, {**mapping, s.var: value}, lanes)
    if isinstance(s, IfThenElse):
        cond = _vec_expr(s.cond, mapping, lanes)
        if cond.lanes != 1:
            raise _NotVectorizable
        else_ = _vec(s.else_, mapping, lanes) if s.else_ is not None else None
        return IfThenElse(cond, _vec(s.then, mapping, lanes), else_)
    if isinstance(s, For):
        extent = _vec_expr(s.extent, mapping, lanes)
        if extent.lanes != 1 or s.kind not in ("serial", "unrolled"):
            raise _NotVectorizable
        return For(s.var, extent, s.kind, _vec(s.body, mapping, lanes))
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_vec(x, mapping, lanes) for x in s.stmts))
    if isinstance(s, Evaluate):
        return Evaluate(_vec_expr(s.value, mapping, lanes))
    if isinstance(s, (Allocate, Barrier)):
        raise _NotVectorizable
    raise TypeError(f"unknown statement {type(s).__name__}")
