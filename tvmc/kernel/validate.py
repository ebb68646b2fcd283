"""Structural checks of a Kernel: scoping of vars and buffers, ranks, dtypes and lanes.

Errors name the kernel and the offending statement, so a template author sees what to fix.
"""

from __future__ import annotations

from tvmc.kernel.buffer import Buffer
from tvmc.kernel.expr import (
    INTRINSICS,
    And,
    BinaryOp,
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
    Select,
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
    SeqStmt,
    Stmt,
    Store,
    WarpShuffle,
)


def validate(kernel: Kernel) -> Kernel:
    """`kernel` itself when well formed, else a KernelIRError saying where and why."""
    names = [b.name for b in kernel.params]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise KernelIRError(f"kernel {kernel.name}: duplicate param names {sorted(dup)}")
    for b in kernel.params:
        if b.scope != "global":
            raise KernelIRError(f"kernel {kernel.name}: param {b.name} has scope {b.scope}")
    _Checker(kernel).stmt(kernel.body, frozenset(), frozenset(kernel.params), ())
    return kernel


class _Checker:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.where: Stmt | None = None

    def fail(self, message: str) -> KernelIRError:
        # rendered only on failure: printing every statement's subtree made validation quadratic
        context = f" in `{stmt_lines(self.where)[0].strip()}`" if self.where is not None else ""
        return KernelIRError(f"kernel {self.kernel.name}{context}: {message}")

    def stmt(
        self, s: Stmt, vars_: frozenset[Var], bufs: frozenset[Buffer], gpu: tuple[str, ...]
    ) -> None:
        self.where = s
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x, vars_, bufs, gpu)
        elif isinstance(s, For):
            self.bind(s.var, vars_)
            ext = self.expr(s.extent, vars_, bufs)
            if not is_int(ext.dtype) or ext.lanes != 1 or ext.dtype != s.var.dtype:
                raise self.fail(f"loop extent must be a scalar {s.var.dtype}, got {ext.dtype}")
            if s.kind in ("vectorized", "unrolled") and not isinstance(s.extent, IntImm):
                raise self.fail(f"a {s.kind} loop needs a constant extent")
            if s.kind in gpu:
                raise self.fail(f"{s.kind} is bound by an enclosing loop already")
            inner = (*gpu, s.kind) if s.kind in GPU_KINDS else gpu
            self.stmt(s.body, vars_ | {s.var}, bufs, inner)
        elif isinstance(s, Store):
            lanes = self.access(s.buffer, s.indices, vars_, bufs)
            value = self.expr(s.value, vars_, bufs)
            if value.dtype != s.buffer.dtype:
                raise self.fail(f"storing {value.dtype} into {s.buffer.name}: {s.buffer.dtype}")
            if value.lanes not in (1, lanes):
                raise self.fail(f"storing {value.lanes} lanes through a {lanes}-lane index")
        elif isinstance(s, Let):
            self.bind(s.var, vars_)
            value = self.expr(s.value, vars_, bufs)
            if (value.dtype, value.lanes) != (s.var.dtype, s.var.lanes):
                raise self.fail(f"let {s.var.name}: {s.var.dtype} bound to {value.dtype}")
            self.stmt(s.body, vars_ | {s.var}, bufs, gpu)
        elif isinstance(s, IfThenElse):
            cond = self.expr(s.cond, vars_, bufs)
            if cond.dtype != "bool" or cond.lanes != 1:
                raise self.fail(f"if needs a scalar bool condition, got {cond.dtype}x{cond.lanes}")
            self.stmt(s.then, vars_, bufs, gpu)
            if s.else_ is not None:
                self.stmt(s.else_, vars_, bufs, gpu)
        elif isinstance(s, Allocate):
            b = s.buffer
            if b.scope == "global":
                raise self.fail(f"allocate {b.name}: scope must be local or shared")
            if any(x.name == b.name for x in bufs):
                raise self.fail(f"allocate {b.name}: a buffer of that name is already in scope")
            self.stmt(s.body, vars_, bufs | {b}, gpu)
        elif isinstance(s, Evaluate):
            self.expr(s.value, vars_, bufs)
        elif isinstance(s, WarpShuffle):
            lanes = self.access(s.buffer, s.indices, vars_, bufs)
            value = self.expr(s.value, vars_, bufs)
            if s.buffer.scope != "local" or lanes != 1 or value.lanes != 1:
                raise self.fail("a shuffle stores one scalar into local scratch")
            if value.dtype != s.buffer.dtype or value.dtype not in WarpShuffle.DTYPES:
                raise self.fail(f"shuffles move {'/'.join(WarpShuffle.DTYPES)}, not {value.dtype}")
            if "threadIdx.x" not in gpu:
                raise self.fail("a shuffle runs inside a threadIdx.x loop")
        elif not isinstance(s, Barrier):
            raise self.fail(f"unknown statement {type(s).__name__}")

    def bind(self, var: Var, vars_: frozenset[Var]) -> None:
        check_dtype(var.dtype)
        if var in vars_:
            raise self.fail(f"variable {var.name} is bound again inside its own scope")

    def access(
        self, buf: Buffer, indices: tuple[Expr, ...], vars_: frozenset[Var], bufs: frozenset[Buffer]
    ) -> int:
        if buf not in bufs:
            raise self.fail(f"buffer {buf.name} is neither a param nor allocated in scope")
        if len(indices) != buf.ndim:
            raise self.fail(f"{buf.name} has rank {buf.ndim} but is indexed with {len(indices)}")
        lanes = {self.expr(i, vars_, bufs).lanes for i in indices} - {1}
        for i in indices:
            if not is_int(i.dtype):
                raise self.fail(f"index {expr_str(i)} of {buf.name} is {i.dtype}, not an integer")
        if len(lanes) > 1:
            raise self.fail(f"indices of {buf.name} mix lanes {sorted(lanes)}")
        return lanes.pop() if lanes else 1

    def expr(self, e: Expr, vars_: frozenset[Var], bufs: frozenset[Buffer]) -> Expr:
        """Checks `e` recursively and returns it."""
        if isinstance(e, Var):
            if e not in vars_:
                raise self.fail(f"variable {e.name} is not defined here")
        elif isinstance(e, (IntImm, FloatImm)):
            check_dtype(e.dtype)
            if isinstance(e, FloatImm) and not is_float(e.dtype):
                raise self.fail(f"float literal {e.value} with dtype {e.dtype}")
        elif isinstance(e, BinaryOp):
            a, b = self.expr(e.a, vars_, bufs), self.expr(e.b, vars_, bufs)
            if a.dtype != b.dtype:
                raise self.fail(f"dtype mismatch in {expr_str(e)}: {a.dtype} vs {b.dtype}")
            self.lanes(e, a.lanes, b.lanes)
            logical = isinstance(e, (And, Or))
            if logical != (a.dtype == "bool") and not isinstance(e, CmpOp):
                raise self.fail(f"{e.symbol} on {a.dtype} operands in {expr_str(e)}")
        elif isinstance(e, Not):
            if self.expr(e.a, vars_, bufs).dtype != "bool":
                raise self.fail(f"! needs a bool operand in {expr_str(e)}")
        elif isinstance(e, Select):
            c = self.expr(e.cond, vars_, bufs)
            t, f = self.expr(e.t, vars_, bufs), self.expr(e.f, vars_, bufs)
            if c.dtype != "bool" or t.dtype != f.dtype:
                raise self.fail(f"select needs a bool condition, equal arm dtypes: {expr_str(e)}")
            self.lanes(e, c.lanes, t.lanes, f.lanes)
        elif isinstance(e, Cast):
            check_dtype(e.dtype)
            self.expr(e.value, vars_, bufs)
        elif isinstance(e, Load):
            self.access(e.buffer, e.indices, vars_, bufs)
        elif isinstance(e, Ramp):
            base, stride = self.expr(e.base, vars_, bufs), self.expr(e.stride, vars_, bufs)
            if not is_int(base.dtype) or base.lanes != 1 or stride.dtype != base.dtype:
                raise self.fail(f"ramp needs a scalar integer base and stride: {expr_str(e)}")
        elif isinstance(e, Broadcast):
            if self.expr(e.value, vars_, bufs).lanes != 1:
                raise self.fail(f"broadcast of a vector: {expr_str(e)}")
        elif isinstance(e, Call):
            self.call(e, vars_, bufs)
        else:
            raise self.fail(f"unknown expression {type(e).__name__}")
        return e

    def call(self, e: Call, vars_: frozenset[Var], bufs: frozenset[Buffer]) -> None:
        if e.name not in INTRINSICS:
            raise self.fail(f"unknown intrinsic {e.name}; valid: {', '.join(INTRINSICS)}")
        arity, float_only, _ = INTRINSICS[e.name]
        args = [self.expr(a, vars_, bufs) for a in e.args]
        if len(args) != arity:
            raise self.fail(f"{e.name} takes {arity} argument(s), got {len(args)}")
        if len({a.dtype for a in args}) > 1 or (float_only and not is_float(args[0].dtype)):
            raise self.fail(f"bad argument dtypes for {e.name}: {[a.dtype for a in args]}")
        self.lanes(e, *(a.lanes for a in args))

    def lanes(self, e: Expr, *lanes: int) -> None:
        if len(set(lanes) - {1}) > 1:
            raise self.fail(f"operands with lanes {list(lanes)} in {expr_str(e)}")
