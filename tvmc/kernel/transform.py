"""Generic walks and rewrites of kernel IR, and the loop vectorizer that codegen applies.

A node's children are what its class's `child_fields` name, so one child-rebuilding helper serves
every rewrite: a rewrite is a post-order function from node to node. Expressions are DAGs
(templates reuse one subexpression object many times), so every function here but `walk` visits
each distinct expression once per call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any, TypeVar

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
    Evaluate,
    For,
    IfThenElse,
    Let,
    Prefetch,
    SeqStmt,
    Stmt,
    Store,
)
from tvmc.kernel.visitor import Visitor, children, post_order, uses

Node = TypeVar("Node", Expr, Stmt)


def walk(node: Expr | Stmt) -> Iterator[Expr | Stmt]:
    """Every node under `node` (itself included), pre-order, a shared subexpression once per
    occurrence (what a tree has: exponential on deep DAGs; `distinct_nodes` is linear)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))


def distinct_nodes(node: Expr | Stmt) -> Iterator[Expr | Stmt]:
    """Every statement under `node` and each distinct expression object once, pre-order (the
    first occurrences in `walk`'s order). Statements are not merged: one object placed twice is
    code that runs twice."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Expr):
            if id(n) in seen:
                continue
            seen.add(id(n))
        yield n
        stack.extend(reversed(list(children(n))))


def rewrite(node: Node, fn: Callable[[Expr | Stmt], Expr | Stmt]) -> Node:
    """Post-order rewrite: children first, then `fn` on the rebuilt node.

    Binding positions (the `var` of For and Let) are left alone: they name, they do not use.
    `fn` sees each distinct node once per call; a node shared in the input is shared, rewritten,
    in the output.
    """
    done: dict[int, Any] = {}  # id -> result; every id stays its node's while `node` lives
    for n in post_order(node, edges=uses):
        changes = {}
        for name in n.child_fields:
            value = getattr(n, name)
            if name in n.binding_fields or value is None:
                continue
            if isinstance(value, tuple):
                new = tuple(done[id(v)] for v in value)
                if all(a is b for a, b in zip(new, value)):
                    new = value
            else:
                new = done[id(value)]
            if new is not value:
                changes[name] = new
        done[id(n)] = fn(replace(n, **changes) if changes else n)  # type: ignore[type-var]
    return done[id(node)]  # type: ignore[no-any-return]


def substitute(node: Node, mapping: Mapping[Var, Expr]) -> Node:
    """`node` with every Var in `mapping` replaced by its expression."""
    if not mapping:
        return node
    return rewrite(node, lambda n: mapping.get(n, n) if isinstance(n, Var) else n)


def free_vars(node: Expr | Stmt) -> list[Var]:
    """Vars used under `node` but bound outside it, in first-use order."""
    finder = _FreeVars()
    finder.visit(node, frozenset())
    return list(finder.found)


class _FreeVars(Visitor):
    """Statements recursively (they bind vars), expressions iteratively, each distinct
    expression once per set of bound vars."""

    def __init__(self) -> None:
        self.found: dict[Var, None] = {}
        self.seen: dict[int, tuple[Expr, frozenset[Var]]] = {}  # id -> (node, bound vars)

    def visit_For(self, s: For, bound: frozenset[Var]) -> None:
        self.visit(s.extent, bound)
        self.visit(s.body, bound | {s.var})

    def visit_Let(self, s: Let, bound: frozenset[Var]) -> None:
        self.visit(s.value, bound)
        self.visit(s.body, bound | {s.var})

    def visit_Stmt(self, s: Stmt, bound: frozenset[Var]) -> None:
        for c in children(s):
            self.visit(c, bound)

    def visit_Expr(self, e: Expr, bound: frozenset[Var]) -> None:
        stack = [e]  # pre-order, so vars are found in first-use order
        while stack:
            n = stack.pop()
            hit = self.seen.get(id(n))
            if hit is not None and hit[1] is bound:
                continue
            self.seen[id(n)] = (n, bound)
            if isinstance(n, Var) and n not in bound:
                self.found.setdefault(n)
            stack.extend(reversed(list(children(n))))


def free_buffers(node: Stmt) -> list[Buffer]:
    """Buffers loaded, stored or prefetched under `node` but not allocated inside it, in
    first-use order."""
    used: dict[Buffer, None] = {}
    nodes = list(distinct_nodes(node))
    allocated = {n.buffer for n in nodes if isinstance(n, Allocate)}
    for n in nodes:
        if isinstance(n, (Load, Store, Prefetch)) and n.buffer not in allocated:
            used.setdefault(n.buffer)
    return list(used)


def contains(node: Expr | Stmt, cls: type | tuple[type, ...]) -> bool:
    """Whether any node under `node` is an instance of `cls`."""
    return any(isinstance(n, cls) for n in distinct_nodes(node))


def known_multiple(e: Expr, env: Mapping[Var, int] | None = None) -> int:
    """A number that integer `e` is always a multiple of (0: `e` is always 0); 1 if unknown.

    `env` gives what each variable is known to be a multiple of (absent: 1). Codegen uses it to
    prove vector accesses aligned (a misaligned ld.v4 faults on a GPU), so every rule is exact:
    a sum keeps the gcd, a product multiplies, `a mod c` keeps gcd(a's, c), `a // c` divides
    a's multiple only when c divides it."""
    rules = _Multiple(env or {})
    for n in post_order(e):  # children first: each rule reads its operands' results
        rules.memo[id(n)] = rules.visit(n)
    return rules.memo[id(e)]


class _Multiple(Visitor):
    """known_multiple's rules, one method per node kind, over operands computed already."""

    def __init__(self, env: Mapping[Var, int]) -> None:
        self.env = env
        self.memo: dict[int, int] = {}

    def of(self, e: Expr) -> int:
        """The result for operand `e` (post_order computed it first)."""
        return self.memo[id(e)]

    def visit_IntImm(self, e: IntImm) -> int:
        return abs(e.value)

    def visit_Var(self, e: Var) -> int:
        return self.env.get(e, 1)

    def visit_Cast(self, e: Cast) -> int:
        integers = e.dtype.startswith(("int", "uint")) and e.value.dtype.startswith(("int", "uint"))
        return self.of(e.value) if integers else 1

    def visit_Add(self, e: Add | Sub | Min | Max) -> int:
        return math.gcd(self.of(e.a), self.of(e.b))

    visit_Sub = visit_Min = visit_Max = visit_Add

    def visit_Select(self, e: Select) -> int:
        return math.gcd(self.of(e.t), self.of(e.f))

    def visit_Mul(self, e: Mul) -> int:
        return self.of(e.a) * self.of(e.b)

    def visit_Mod(self, e: Mod | FloorDiv) -> int:
        if not isinstance(e.b, IntImm) or not e.b.value:
            return 1
        a, c = self.of(e.a), abs(e.b.value)
        if isinstance(e, Mod):
            return math.gcd(a, c)
        return 0 if a == 0 else a // c if a % c == 0 else 1

    visit_FloorDiv = visit_Mod

    def generic_visit(self, e: Any) -> int:
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
    for n in distinct_nodes(body):
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
        return _Vectorizer(lanes).visit(loop.body, {loop.var: Ramp(zero, one, lanes)})
    except _NotVectorizable:
        return None


def _vec_expr(e: Expr, mapping: dict[Var, Expr], lanes: int) -> Expr:
    out = substitute(e, mapping)
    for n in distinct_nodes(out):
        if isinstance(n, Expr) and n.lanes not in (1, lanes):
            raise _NotVectorizable
        if isinstance(n, Ramp) and (n.base.lanes != 1 or n.stride.lanes != 1):
            raise _NotVectorizable
        if isinstance(n, Broadcast) and n.value.lanes != 1:
            raise _NotVectorizable
    return out


class _Vectorizer(Visitor):
    """A loop body over `lanes`-wide vectors; `mapping` sends the loop variable to its ramp."""

    def __init__(self, lanes: int) -> None:
        self.lanes = lanes

    def expr(self, e: Expr, mapping: dict[Var, Expr]) -> Expr:
        return _vec_expr(e, mapping, self.lanes)

    def visit_Store(self, s: Store, mapping: dict[Var, Expr]) -> Stmt:
        idx = tuple(self.expr(i, mapping) for i in s.indices)
        value = self.expr(s.value, mapping)
        if all(i.lanes == 1 for i in idx):
            raise _NotVectorizable  # every iteration hits one element: a reduction, not a map
        if value.lanes == 1:
            value = Broadcast(value, self.lanes)
        return Store(s.buffer, idx, value)

    def visit_Let(self, s: Let, mapping: dict[Var, Expr]) -> Stmt:
        value = self.expr(s.value, mapping)
        if value.lanes == 1:
            return Let(s.var, value, self.visit(s.body, mapping))
        if not s.var.dtype.startswith(("int", "uint")):
            var = Var(s.var.name, s.var.dtype, self.lanes)
            return Let(var, value, self.visit(s.body, {**mapping, s.var: var}))
        # Integer lets are index arithmetic: inline them so loads still see unit-stride ramps.
        return self.visit(s.body, {**mapping, s.var: value})

    def visit_IfThenElse(self, s: IfThenElse, mapping: dict[Var, Expr]) -> Stmt:
        cond = self.expr(s.cond, mapping)
        if cond.lanes != 1:
            raise _NotVectorizable
        else_ = self.visit(s.else_, mapping) if s.else_ is not None else None
        return IfThenElse(cond, self.visit(s.then, mapping), else_)

    def visit_For(self, s: For, mapping: dict[Var, Expr]) -> Stmt:
        extent = self.expr(s.extent, mapping)
        if extent.lanes != 1 or s.kind not in ("serial", "unrolled"):
            raise _NotVectorizable
        return For(s.var, extent, s.kind, self.visit(s.body, mapping))

    def visit_SeqStmt(self, s: SeqStmt, mapping: dict[Var, Expr]) -> Stmt:
        return SeqStmt(tuple(self.visit(x, mapping) for x in s.stmts))

    def visit_Evaluate(self, s: Evaluate, mapping: dict[Var, Expr]) -> Stmt:
        return Evaluate(self.expr(s.value, mapping))

    def visit_Stmt(self, s: Stmt, mapping: dict[Var, Expr]) -> Stmt:
        raise _NotVectorizable  # Allocate, Barrier, WarpShuffle: no vector form
