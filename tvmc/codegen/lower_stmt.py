"""Kernel IR statements -> the body of one LLVM function (loops, branches, scratch memory).

`Lowering` is target-neutral; the CPU generator adds parallel loops (the thread pool) and the NVPTX
generator adds GPU-bound loops, shared memory and barriers by overriding the hooks
`parallel_loop`, `gpu_loop`, `allocate` and `barrier`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from llvmlite import ir

from tvmc.codegen.abi import SCRATCH_FAILED_SYMBOL
from tvmc.codegen.llvm_util import I32, I64, PTR, declare, ir_type, mem_type, shared_i32
from tvmc.codegen.lower_expr import ExprLowering
from tvmc.kernel import (
    Allocate,
    Barrier,
    Buffer,
    Evaluate,
    Expr,
    For,
    IfThenElse,
    IntImm,
    KernelIRError,
    Let,
    Prefetch,
    SeqStmt,
    Stmt,
    Store,
    Var,
)
from tvmc.kernel.transform import known_multiple, vectorize_loop
from tvmc.kernel.visitor import children

PREFETCH_LOCALITY = 2  # llvm.prefetch: 0 no reuse ... 3 keep in every level; 2 = x86 prefetcht1
MAX_UNROLL = 1024  # a loop asking to unroll (or scalarised vector loop) beyond this is a bug
STACK_LIMIT = 256 * 1024  # larger local scratch goes to the heap (worker stacks are small)


@dataclass
class ModuleState:
    """What the lowerings of one module share: the module, options, name counters."""

    module: ir.Module
    stack_limit: int = STACK_LIMIT
    counters: dict[str, int] = field(default_factory=dict)

    def unique(self, base: str) -> str:
        n = self.counters.get(base, 0)
        self.counters[base] = n + 1
        return f"{base}{n}"


class Lowering(ExprLowering):
    """Lowers statements into `fn`; allocas sit in the entry block so SROA makes them registers."""

    def __init__(self, state: ModuleState, fn: ir.Function, kernel_name: str) -> None:
        self.state, self.module, self.fn, self.kernel_name = state, state.module, fn, kernel_name
        self.entry = fn.append_basic_block("entry")
        self.start = fn.append_basic_block("start")
        self.alloca_b = ir.IRBuilder(self.entry)
        self.b = ir.IRBuilder(self.start)
        self.vars: dict[Var, ir.Value] = {}
        self.bufs: dict[Buffer, ir.Value] = {}
        self.multiples: dict[Var, int] = {}

    def finish(self) -> ir.Function:
        """Closes the function (return, entry branch) and returns it."""
        self.b.ret_void()
        self.alloca_b.branch(self.start)
        return self.fn

    # ---- statements ------------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        """Emits `s` at the builder's position."""
        self.visit(s)

    def visit_SeqStmt(self, s: SeqStmt) -> None:
        for x in s.stmts:
            self.stmt(x)

    def visit_Store(self, s: Store) -> None:
        self.store(s.buffer, s.indices, s.value)

    def visit_For(self, s: For) -> None:
        self.loop(s)

    def visit_Let(self, s: Let) -> None:
        self.vars[s.var] = self.expr(s.value)
        self.multiples[s.var] = known_multiple(s.value, self.multiples)
        self.stmt(s.body)
        del self.vars[s.var], self.multiples[s.var]

    def visit_IfThenElse(self, s: IfThenElse) -> None:
        self.if_then_else(s)

    def visit_Allocate(self, s: Allocate) -> None:
        ptr, release, may_fail = self.allocate(s.buffer)
        self.bufs[s.buffer] = ptr
        if not may_fail:
            self.stmt(s.body)
            release()
        else:  # no memory: the scope's work is skipped and the failure flagged for the caller
            missing = self.b.icmp_unsigned("==", ptr, ir.Constant(PTR, None))
            with self.b.if_else(missing, likely=False) as (failed, allocated):
                with failed:
                    flag = shared_i32(self.module, SCRATCH_FAILED_SYMBOL)
                    self.b.store(ir.Constant(I32, 1), flag)
                with allocated:
                    self.stmt(s.body)
                    release()
        del self.bufs[s.buffer]

    def visit_Barrier(self, s: Barrier) -> None:
        self.barrier()

    def visit_Evaluate(self, s: Evaluate) -> None:
        self.expr(s.value)

    def visit_Prefetch(self, s: Prefetch) -> None:
        self.prefetch(s.buffer, s.indices)

    def if_then_else(self, s: IfThenElse) -> None:
        """A branch on a scalar condition."""
        cond = self.expr(s.cond)
        if s.else_ is None:
            with self.b.if_then(cond):
                self.stmt(s.then)
            return
        with self.b.if_else(cond) as (then, otherwise):
            with then:
                self.stmt(s.then)
            with otherwise:
                self.stmt(s.else_)

    def loop(self, s: For) -> None:
        """Dispatches on the loop kind."""
        if s.kind == "serial":
            self.serial_loop(
                s.var, ir.Constant(ir_type(s.var.dtype), 0), self.expr(s.extent), s.body
            )
        elif s.kind == "unrolled":
            self.unroll(s)
        elif s.kind == "vectorized":
            body = vectorize_loop(s)
            if body is not None:
                self.stmt(body)
            else:
                self.unroll(s)  # not expressible with vectors: scalarise, still straight-line code
        elif s.kind == "parallel":
            self.parallel_loop(s)
        else:
            self.gpu_loop(s)

    def unroll(self, s: For) -> None:
        """The body once per iteration, with the variable a constant."""
        if not isinstance(s.extent, IntImm) or s.extent.value > MAX_UNROLL:
            raise KernelIRError(f"cannot unroll loop {s.var.name} of extent {s.extent}")
        for k in range(s.extent.value):
            self.vars[s.var] = ir.Constant(ir_type(s.var.dtype), k)
            self.multiples[s.var] = k
            self.stmt(s.body)
        self.vars.pop(s.var, None)
        self.multiples.pop(s.var, None)

    def serial_loop(self, var: Var, begin: ir.Value, end: ir.Value, body: Stmt) -> None:
        """`for var in [begin, end)` as a counted loop with a phi induction variable."""
        name = var.name
        pre = self.b.block
        header = self.fn.append_basic_block(f"{name}.header")
        loop_body = self.fn.append_basic_block(f"{name}.body")
        exit_ = self.fn.append_basic_block(f"{name}.exit")
        self.b.branch(header)
        self.b.position_at_end(header)
        i = self.b.phi(begin.type, name=name)
        i.add_incoming(begin, pre)
        self.b.cbranch(self.b.icmp_signed("<", i, end), loop_body, exit_)
        self.b.position_at_end(loop_body)
        self.vars[var] = i
        self.stmt(body)
        nxt = self.b.add(i, ir.Constant(begin.type, 1))
        nxt.flags.extend(["nuw", "nsw"])
        i.add_incoming(nxt, self.b.block)
        self.b.branch(header)
        self.b.position_at_end(exit_)
        del self.vars[var]

    # ---- hooks -----------------------------------------------------------------------------------
    def parallel_loop(self, s: For) -> None:
        """Default: a parallel loop runs serially (targets with threads override this)."""
        self.serial_loop(s.var, ir.Constant(ir_type(s.var.dtype), 0), self.expr(s.extent), s.body)

    def gpu_loop(self, s: For) -> None:
        """Default: GPU-bound loops are an error (CPU targets)."""
        raise KernelIRError(f"loop {s.var.name} is bound to {s.kind}, which this target lacks")

    def prefetch(self, buf: Buffer, indices: tuple[Expr, ...]) -> None:
        """`llvm.prefetch` of the element's line for reading into every cache level but L1
        (locality 2): what a tile fetches ahead is read one tile loop step later, when several
        tiles' worth of other data has passed through L1."""
        fn = declare(self.module, "llvm.prefetch.p0", ir.VoidType(), [PTR, I32, I32, I32])
        ptr = self.element_ptr(buf, self.flat_offset(buf, indices))
        read, locality, data = (ir.Constant(I32, v) for v in (0, PREFETCH_LOCALITY, 1))
        self.b.call(fn, [ptr, read, locality, data])

    def barrier(self) -> None:
        """Default: barriers are an error (CPU targets)."""
        raise KernelIRError("barrier() needs a GPU target")

    def allocate(self, buf: Buffer) -> tuple[ir.Value, Callable[[], object], bool]:
        """Scratch memory for `buf`, a callable that releases it at the end of its scope, and
        whether the pointer may be NULL (heap memory that could not be had)."""
        t = ir.ArrayType(mem_type(buf.dtype), buf.size)
        size = heap_bytes(buf, self.state.stack_limit)
        if not size:
            ptr = self.alloca_b.alloca(t, name=buf.name)
            ptr.align = 64
            ptr.type = PTR  # llvmlite types allocas; opaque keeps gep/store type checks happy
            return ptr, lambda: None, False
        malloc = declare(self.module, "aligned_alloc", PTR, [I64, I64])
        free = declare(self.module, "free", ir.VoidType(), [PTR])
        ptr = self.b.call(malloc, [ir.Constant(I64, 64), ir.Constant(I64, size)], name=buf.name)
        return ptr, lambda: self.b.call(free, [ptr]), True


def heap_bytes(buf: Buffer, stack_limit: int = STACK_LIMIT) -> int:
    """The heap bytes `allocate` takes for local scratch `buf` (0: it goes on the stack)."""
    if buf.nbytes <= stack_limit:
        return 0
    return -(-buf.nbytes // 64) * 64  # aligned_alloc wants a multiple of the alignment


def heap_peak(stmt: Stmt, threads: int, stack_limit: int = STACK_LIMIT) -> int:
    """The most heap scratch `stmt` holds at once, its parallel loops on `threads` threads
    (each thread's iteration allocates its own; loops nested in one run serially, as the pool
    runs them)."""
    if isinstance(stmt, Allocate):
        return heap_bytes(stmt.buffer, stack_limit) + heap_peak(stmt.body, threads, stack_limit)
    if isinstance(stmt, For) and stmt.kind == "parallel":
        extent = stmt.extent.value if isinstance(stmt.extent, IntImm) else threads
        return min(threads, extent) * heap_peak(stmt.body, 1, stack_limit)
    inner = (heap_peak(c, threads, stack_limit) for c in children(stmt) if isinstance(c, Stmt))
    return max(inner, default=0)  # statements in sequence or branches: one at a time
