"""Structural checks of a Kernel: scoping of vars and buffers, ranks, dtypes and lanes.

Errors name the kernel and the offending statement, so a template author sees what to fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvmc.dtypes import numpy_dtype
from tvmc.kernel.buffer import Buffer
from tvmc.kernel.expr import (
    INTRINSICS,
    And,
    BinaryOp,
    BitNot,
    BitwiseOp,
    Broadcast,
    Call,
    Cast,
    CmpOp,
    Expr,
    FloatImm,
    IntImm,
    KernelIRError,
    Load,
    Not,
    Or,
    Ramp,
    Reinterpret,
    Select,
    Shuffle,
    Var,
    check_dtype,
    is_float,
    is_int,
)
from tvmc.kernel.printer import expr_str, stmt_lines
from tvmc.kernel.stmt import (
    GPU_KINDS,
    Allocate,
    Barrier,
    Evaluate,
    For,
    IfThenElse,
    Kernel,
    Let,
    Prefetch,
    SeqStmt,
    Stmt,
    Store,
    WarpShuffle,
)
from tvmc.kernel.visitor import EXPAND_LIMIT, Visitor, post_order


def validate(kernel: Kernel) -> Kernel:
    """`kernel` itself when well formed, else a KernelIRError saying where and why."""
    names = [b.name for b in kernel.params]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise KernelIRError(f"kernel {kernel.name}: duplicate param names {sorted(dup)}")
    for b in kernel.params:
        if b.scope != "global":
            raise KernelIRError(f"kernel {kernel.name}: param {b.name} has scope {b.scope}")
    _Checker(kernel).stmt(kernel.body, _Scope(frozenset(), frozenset(kernel.params), ()))
    return kernel


@dataclass(frozen=True, eq=False)
class _Scope:
    """What is defined at a node: vars, buffers, and the GPU axes enclosing loops bind."""

    vars: frozenset[Var]
    bufs: frozenset[Buffer]
    gpu: tuple[str, ...]

    def inner(self, var: Var | None = None, buf: Buffer | None = None, gpu: str = "") -> _Scope:
        """The scope inside a statement binding `var`, allocating `buf` or binding axis `gpu`."""
        return _Scope(self.vars | {var} if var is not None else self.vars,
                      self.bufs | {buf} if buf is not None else self.bufs,
                      (*self.gpu, gpu) if gpu else self.gpu)  # fmt: skip


class _Checker(Visitor):
    """Checks statements under their scope, and expressions once per distinct node and scope
    object (one per statement body), so a shared subexpression is checked once, not per use."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.where: Stmt | None = None
        self.checked: dict[int, tuple[Expr, _Scope]] = {}  # id -> (node kept alive, its scope)

    def fail(self, message: str) -> KernelIRError:
        # rendered only on failure: printing every statement's subtree made validation quadratic
        context = f" in `{stmt_lines(self.where)[0].strip()}`" if self.where is not None else ""
        return KernelIRError(f"kernel {self.kernel.name}{context}: {message}")

    # ---- statements ------------------------------------------------------------------------------
    def stmt(self, s: Stmt, scope: _Scope) -> None:
        """Checks `s` and everything under it."""
        if not isinstance(s, Stmt):
            raise self.fail(f"unknown statement {type(s).__name__}")
        self.where = s
        self.visit(s, scope)

    def visit_SeqStmt(self, s: SeqStmt, scope: _Scope) -> None:
        for x in s.stmts:
            self.stmt(x, scope)

    def visit_For(self, s: For, scope: _Scope) -> None:
        self.bind(s.var, scope)
        ext = self.expr(s.extent, scope)
        if not is_int(ext.dtype) or ext.lanes != 1 or ext.dtype != s.var.dtype:
            raise self.fail(f"loop extent must be a scalar {s.var.dtype}, got {ext.dtype}")
        if s.kind in ("vectorized", "unrolled") and not isinstance(s.extent, IntImm):
            raise self.fail(f"a {s.kind} loop needs a constant extent")
        if s.kind in scope.gpu:
            raise self.fail(f"{s.kind} is bound by an enclosing loop already")
        axis = s.kind if s.kind in GPU_KINDS else ""
        self.stmt(s.body, scope.inner(var=s.var, gpu=axis))

    def visit_Store(self, s: Store, scope: _Scope) -> None:
        lanes = self.access(s.buffer, s.indices, scope)
        value = self.expr(s.value, scope)
        if value.dtype != s.buffer.dtype:
            raise self.fail(f"storing {value.dtype} into {s.buffer.name}: {s.buffer.dtype}")
        if value.lanes not in (1, lanes):
            raise self.fail(f"storing {value.lanes} lanes through a {lanes}-lane index")

    def visit_Let(self, s: Let, scope: _Scope) -> None:
        self.bind(s.var, scope)
        value = self.expr(s.value, scope)
        if (value.dtype, value.lanes) != (s.var.dtype, s.var.lanes):
            raise self.fail(f"let {s.var.name}: {s.var.dtype} bound to {value.dtype}")
        self.stmt(s.body, scope.inner(var=s.var))

    def visit_IfThenElse(self, s: IfThenElse, scope: _Scope) -> None:
        cond = self.expr(s.cond, scope)
        if cond.dtype != "bool" or cond.lanes != 1:
            raise self.fail(f"if needs a scalar bool condition, got {cond.dtype}x{cond.lanes}")
        self.stmt(s.then, scope)
        if s.else_ is not None:
            self.stmt(s.else_, scope)

    def visit_Allocate(self, s: Allocate, scope: _Scope) -> None:
        b = s.buffer
        if b.scope == "global":
            raise self.fail(f"allocate {b.name}: scope must be local or shared")
        if any(x.name == b.name for x in scope.bufs):
            raise self.fail(f"allocate {b.name}: a buffer of that name is already in scope")
        self.stmt(s.body, scope.inner(buf=b))

    def visit_Prefetch(self, s: Prefetch, scope: _Scope) -> None:
        if self.access(s.buffer, s.indices, scope) != 1:
            raise self.fail(f"a prefetch of {s.buffer.name} names one element, not a vector")

    def visit_Evaluate(self, s: Evaluate, scope: _Scope) -> None:
        self.expr(s.value, scope)

    def visit_WarpShuffle(self, s: WarpShuffle, scope: _Scope) -> None:
        lanes = self.access(s.buffer, s.indices, scope)
        value = self.expr(s.value, scope)
        if s.buffer.scope != "local" or lanes != 1 or value.lanes != 1:
            raise self.fail("a shuffle stores one scalar into local scratch")
        if value.dtype != s.buffer.dtype or value.dtype not in WarpShuffle.DTYPES:
            raise self.fail(f"shuffles move {'/'.join(WarpShuffle.DTYPES)}, not {value.dtype}")
        if "threadIdx.x" not in scope.gpu:
            raise self.fail("a shuffle runs inside a threadIdx.x loop")

    def visit_Barrier(self, s: Barrier, scope: _Scope) -> None:
        pass

    def generic_visit(self, node: object, scope: _Scope) -> None:
        kind = "statement" if isinstance(node, Stmt) else "expression"
        raise self.fail(f"unknown {kind} {type(node).__name__}")

    def bind(self, var: Var, scope: _Scope) -> None:
        check_dtype(var.dtype)
        if var in scope.vars:
            raise self.fail(f"variable {var.name} is bound again inside its own scope")

    def access(self, buf: Buffer, indices: tuple[Expr, ...], scope: _Scope) -> int:
        if buf not in scope.bufs:
            raise self.fail(f"buffer {buf.name} is neither a param nor allocated in scope")
        if len(indices) != buf.ndim:
            raise self.fail(f"{buf.name} has rank {buf.ndim} but is indexed with {len(indices)}")
        lanes = {self.expr(i, scope).lanes for i in indices} - {1}
        for i in indices:
            if not is_int(i.dtype):
                raise self.fail(f"index {expr_str(i)} of {buf.name} is {i.dtype}, not an integer")
        if len(lanes) > 1:
            raise self.fail(f"indices of {buf.name} mix lanes {sorted(lanes)}")
        return lanes.pop() if lanes else 1

    # ---- expressions -----------------------------------------------------------------------------
    def expr(self, e: Expr, scope: _Scope) -> Expr:
        """Checks `e` and returns it, each node once per scope object. An expression too big to
        be a tree is checked children first (one level of recursion, however deep it is)."""
        if self.done(e, scope):
            return e
        if not isinstance(e, Expr):
            raise self.fail(f"unknown expression {type(e).__name__}")
        if e.tree_nodes <= EXPAND_LIMIT:  # the method table, not visit(): a frame less per level
            self.methods[type(e)](self, e, scope)
        else:
            for n in post_order(e, skip=lambda n: self.done(n, scope)):
                self.visit(n, scope)
                self.checked[id(n)] = (n, scope)  # type: ignore[assignment]
        self.checked[id(e)] = (e, scope)
        return e

    def done(self, e: Expr | Stmt, scope: _Scope) -> bool:
        """Whether `e` was checked in `scope` already."""
        hit = self.checked.get(id(e))
        return hit is not None and hit[1] is scope

    def visit_Var(self, e: Var, scope: _Scope) -> None:
        if e not in scope.vars:
            raise self.fail(f"variable {e.name} is not defined here")

    def visit_IntImm(self, e: IntImm, scope: _Scope) -> None:
        check_dtype(e.dtype)

    def visit_FloatImm(self, e: FloatImm, scope: _Scope) -> None:
        check_dtype(e.dtype)
        if not is_float(e.dtype):
            raise self.fail(f"float literal {e.value} with dtype {e.dtype}")

    def visit_BinaryOp(self, e: BinaryOp, scope: _Scope) -> None:
        a, b = self.expr(e.a, scope), self.expr(e.b, scope)
        if a.dtype != b.dtype:
            raise self.fail(f"dtype mismatch in {expr_str(e)}: {a.dtype} vs {b.dtype}")
        self.lanes(e, a.lanes, b.lanes)
        logical = isinstance(e, (And, Or))
        if logical != (a.dtype == "bool") and not isinstance(e, CmpOp):
            raise self.fail(f"{e.symbol} on {a.dtype} operands in {expr_str(e)}")
        if isinstance(e, BitwiseOp) and not is_int(a.dtype):
            raise self.fail(f"{e.symbol} needs integer operands in {expr_str(e)}")

    def visit_Not(self, e: Not, scope: _Scope) -> None:
        if self.expr(e.a, scope).dtype != "bool":
            raise self.fail(f"! needs a bool operand in {expr_str(e)}")

    def visit_BitNot(self, e: BitNot, scope: _Scope) -> None:
        if not is_int(self.expr(e.a, scope).dtype):
            raise self.fail(f"~ needs an integer operand in {expr_str(e)}")

    def visit_Select(self, e: Select, scope: _Scope) -> None:
        c, t, f = self.expr(e.cond, scope), self.expr(e.t, scope), self.expr(e.f, scope)
        if c.dtype != "bool" or t.dtype != f.dtype:
            raise self.fail(f"select needs a bool condition, equal arm dtypes: {expr_str(e)}")
        self.lanes(e, c.lanes, t.lanes, f.lanes)

    def visit_Cast(self, e: Cast, scope: _Scope) -> None:
        check_dtype(e.dtype)
        self.expr(e.value, scope)

    def visit_Reinterpret(self, e: Reinterpret, scope: _Scope) -> None:
        check_dtype(e.dtype)
        value = self.expr(e.value, scope)
        if "bool" in (e.dtype, value.dtype) or _width(e.dtype) != _width(value.dtype):
            raise self.fail(f"reinterpret needs types of one width: {value.dtype} as {e.dtype}")

    def visit_Load(self, e: Load, scope: _Scope) -> None:
        self.access(e.buffer, e.indices, scope)

    def visit_Ramp(self, e: Ramp, scope: _Scope) -> None:
        base, stride = self.expr(e.base, scope), self.expr(e.stride, scope)
        if not is_int(base.dtype) or base.lanes != 1 or stride.dtype != base.dtype:
            raise self.fail(f"ramp needs a scalar integer base and stride: {expr_str(e)}")

    def visit_Broadcast(self, e: Broadcast, scope: _Scope) -> None:
        if self.expr(e.value, scope).lanes != 1:
            raise self.fail(f"broadcast of a vector: {expr_str(e)}")

    def visit_Shuffle(self, e: Shuffle, scope: _Scope) -> None:
        vectors = [self.expr(v, scope) for v in e.vectors]
        if not vectors or len({(v.dtype, v.lanes) for v in vectors}) > 1:
            raise self.fail(f"a shuffle takes vectors of one dtype and lanes: {expr_str(e)}")
        total = len(vectors) * vectors[0].lanes
        if not e.picks or any(not 0 <= p < total for p in e.picks):
            raise self.fail(f"shuffle picks outside its {total} lanes: {expr_str(e)}")

    def visit_Call(self, e: Call, scope: _Scope) -> None:
        if e.name not in INTRINSICS:
            raise self.fail(f"unknown intrinsic {e.name}; valid: {', '.join(INTRINSICS)}")
        arity, float_only, _ = INTRINSICS[e.name]
        args = [self.expr(a, scope) for a in e.args]
        if len(args) != arity:
            raise self.fail(f"{e.name} takes {arity} argument(s), got {len(args)}")
        if len({a.dtype for a in args}) > 1 or (float_only and not is_float(args[0].dtype)):
            raise self.fail(f"bad argument dtypes for {e.name}: {[a.dtype for a in args]}")
        self.lanes(e, *(a.lanes for a in args))

    def lanes(self, e: Expr, *lanes: int) -> None:
        if len(set(lanes) - {1}) > 1:
            raise self.fail(f"operands with lanes {list(lanes)} in {expr_str(e)}")


def _width(dtype: str) -> int:
    return numpy_dtype(dtype).itemsize
