"""Translation of a Kernel into Python source for the reference interpreter.

Scalars are Python ints/bools and numpy float scalars (so float32 rounds like float32); vectors
are 1-D numpy arrays (integer vectors as int64). Names starting with `_` are runtime helpers
defined in interpret.py.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tvmc.kernel.buffer import Buffer
from tvmc.kernel.expr import (
    Add,
    And,
    Broadcast,
    Call,
    Cast,
    CmpOp,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    IntImm,
    Load,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    Ramp,
    Select,
    Sub,
    Var,
    is_float,
)
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
from tvmc.kernel.transform import contains

_INFIX = {Add: "+", Sub: "-", Mul: "*"}


class PythonEmitter:
    """Builds the source of `def <kernel>(<buffers>)` plus the constants it refers to."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.names: dict[Any, str] = {}
        self.constants: dict[str, Any] = {}
        self.lines: list[str] = []
        self.function_name = f"kernel_{kernel.name}"
        self.thread_vars: list[str] = []  # enclosing lockstep thread loops, innermost last
        self.sites: list[str] = []  # shared-memory accesses, e.g. "a_tile load 2"

    def source(self) -> str:
        """The generated Python source (built once)."""
        if not self.lines:
            params = ", ".join(self.name(b) for b in self.kernel.params)
            self.lines.append(f"def {self.function_name}({params}):")
            self.stmt(self.kernel.body, 1, in_thread=False)
            self.lines.append("    return None")
        return "\n".join(self.lines) + "\n"

    def name(self, obj: Var | Buffer) -> str:
        if obj not in self.names:
            base = re.sub(r"\W", "_", obj.name)
            prefix = "v" if isinstance(obj, Var) else "b"
            self.names[obj] = f"{prefix}_{base}_{len(self.names)}"
        return self.names[obj]

    def site(self, buffer: str, kind: str) -> int:
        """A number for one shared-memory access in the source (for bank statistics)."""
        self.sites.append(f"{buffer} {kind} {sum(x.startswith(buffer + ' ') for x in self.sites)}")
        return len(self.sites) - 1

    def const(self, value: Any) -> str:
        name = f"c{len(self.constants)}"
        self.constants[name] = value
        return name

    # ---- statements ------------------------------------------------------------------------------
    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def stmt(self, s: Stmt, depth: int, in_thread: bool) -> None:
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x, depth, in_thread)
            if not s.stmts:
                self.emit(depth, "pass")
        elif isinstance(s, For):
            self.loop(s, depth, in_thread)
        elif isinstance(s, Store):
            b, idx = self.name(s.buffer), self.indices(s.indices)
            lanes = max(s.value.lanes, max(i.lanes for i in s.indices))
            value = self.expr(s.value)
            name = s.buffer.name
            if s.buffer.scope == "shared":  # race-checked, and a site for bank statistics
                site = self.site(name, "store")
                if lanes == 1:
                    self.emit(depth, f"_sst({b}, {name!r}, {idx}, {value}, {site})")
                else:
                    self.emit(depth, f"_svst({b}, {name!r}, {idx}, {value}, {lanes}, {site})")
            elif lanes == 1:
                self.emit(depth, f"_st({b}, {name!r}, {idx}, {value})")
            else:
                self.emit(depth, f"_vst({b}, {name!r}, {idx}, {value}, {lanes})")
        elif isinstance(s, Let):
            self.emit(depth, f"{self.name(s.var)} = {self.expr(s.value)}")
            self.stmt(s.body, depth, in_thread)
        elif isinstance(s, IfThenElse):
            self.emit(depth, f"if {self.expr(s.cond)}:")
            self.stmt(s.then, depth + 1, in_thread)
            if s.else_ is not None:
                self.emit(depth, "else:")
                self.stmt(s.else_, depth + 1, in_thread)
        elif isinstance(s, Allocate):
            b = s.buffer
            alloc = "_shared_alloc" if b.scope == "shared" else "_alloc"
            self.emit(depth, f"{self.name(b)} = {alloc}({b.shape!r}, {b.dtype!r})")
            self.stmt(s.body, depth, in_thread)
        elif isinstance(s, Barrier):
            self.emit(depth, "yield _BARRIER" if in_thread else "pass")
        elif isinstance(s, Evaluate):
            self.emit(depth, f"_ = {self.expr(s.value)}")
        elif isinstance(s, WarpShuffle):
            # every thread posts its value, all meet, each takes its partner's, all meet again
            # (the second meeting keeps a fast thread from overwriting a post not yet read)
            t = self.thread_vars[-1]
            b, idx = self.name(s.buffer), self.indices(s.indices)
            self.emit(depth, f"_xch_{t}[{t}] = {self.expr(s.value)}")
            self.emit(depth, "yield")
            self.emit(depth, f"_st({b}, {s.buffer.name!r}, {idx}, _xch_{t}[{t} ^ {s.lane_mask}])")
            self.emit(depth, "yield")
        else:
            raise TypeError(f"unknown statement {type(s).__name__}")

    def loop(self, s: For, depth: int, in_thread: bool) -> None:
        v, extent = self.name(s.var), self.expr(s.extent)
        meets = contains(s, Barrier) or contains(s, WarpShuffle)
        thread_loop = s.kind in GPU_KINDS and s.kind.startswith("threadIdx")
        if not (thread_loop and meets):
            self.emit(depth, f"for {v} in range({extent}):")
            if thread_loop:  # threads that never meet: any shared element they share is a race
                self.emit(depth + 1, f"_NOW[1] = {v}")
            self.stmt(s.body, depth + 1, in_thread)
            return
        # Threads that meet at barriers: one generator per thread, advanced in lockstep.
        fn = f"_thread_{v}"
        self.emit(depth, f"_xch_{v} = {{}}")  # the threads' posts for warp shuffles
        self.emit(depth, f"def {fn}({v}):")
        self.thread_vars.append(v)
        self.stmt(s.body, depth + 1, in_thread=True)
        self.thread_vars.pop()
        self.emit(depth + 1, "yield from ()")  # a generator even if no barrier is reached
        threads = f"_lockstep([{fn}({v}) for {v} in range({extent})])"
        self.emit(depth, f"yield from {threads}" if in_thread else f"_drain({threads})")

    # ---- expressions -----------------------------------------------------------------------------
    def indices(self, indices: tuple[Expr, ...]) -> str:
        return "(" + "".join(f"{self.expr(i)}, " for i in indices) + ")"

    def expr(self, e: Expr) -> str:
        vec = e.lanes > 1
        if isinstance(e, Var):
            return self.name(e)
        if isinstance(e, IntImm):
            return repr(bool(e.value)) if e.dtype == "bool" else repr(e.value)
        if isinstance(e, FloatImm):
            return self.const(np.dtype(e.dtype).type(e.value))
        if isinstance(e, (Add, Sub, Mul)):
            return f"({self.expr(e.a)} {_INFIX[type(e)]} {self.expr(e.b)})"
        if isinstance(e, Div):
            a, b = self.expr(e.a), self.expr(e.b)
            return f"({a} / {b})" if is_float(e.dtype) else f"_tdiv({a}, {b})"
        if isinstance(e, FloorDiv):
            a, b = self.expr(e.a), self.expr(e.b)
            return f"np.floor({a} / {b})" if is_float(e.dtype) else f"({a} // {b})"
        if isinstance(e, Mod):
            a, b = self.expr(e.a), self.expr(e.b)
            return f"np.mod({a}, {b})" if is_float(e.dtype) else f"({a} % {b})"
        if isinstance(e, (Min, Max)):
            a, b, op = self.expr(e.a), self.expr(e.b), "<" if isinstance(e, Min) else ">"
            return f"np.where({a} {op} {b}, {a}, {b})" if vec else f"_sel({a} {op} {b}, {a}, {b})"
        if isinstance(e, CmpOp):
            return f"({self.expr(e.a)} {e.symbol} {self.expr(e.b)})"
        if isinstance(e, (And, Or)):
            a, b = self.expr(e.a), self.expr(e.b)
            fn = "np.logical_and" if isinstance(e, And) else "np.logical_or"
            return f"{fn}({a}, {b})" if vec else f"bool({fn}({a}, {b}))"
        if isinstance(e, Not):
            return f"np.logical_not({self.expr(e.a)})" if vec else f"(not {self.expr(e.a)})"
        if isinstance(e, Select):
            c, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
            return f"np.where({c}, {t}, {f})" if vec else f"_sel({c}, {t}, {f})"
        if isinstance(e, Cast):
            return self.cast(e)
        if isinstance(e, Load):
            b, idx = self.name(e.buffer), self.indices(e.indices)
            name = e.buffer.name
            if e.buffer.scope == "shared":  # race-checked, and a site for bank statistics
                site = self.site(name, "load")
                if vec:
                    return f"_svld({b}, {name!r}, {idx}, {e.lanes}, {site})"
                return f"_sld({b}, {name!r}, {idx}, {site})"
            if vec:
                return f"_vld({b}, {name!r}, {idx}, {e.lanes})"
            return f"_ld({b}, {name!r}, {idx})"
        if isinstance(e, Ramp):
            base, stride = self.expr(e.base), self.expr(e.stride)
            return f"(np.arange({e.lanes}, dtype=np.int64) * {stride} + {base})"
        if isinstance(e, Broadcast):
            dt = e.dtype if is_float(e.dtype) else ("bool" if e.dtype == "bool" else "int64")
            return f"np.full({e.lanes}, {self.expr(e.value)}, {dt!r})"
        if isinstance(e, Call):
            return self.call(e)
        raise TypeError(f"unknown expression {type(e).__name__}")

    def cast(self, e: Cast) -> str:
        value, vec = self.expr(e.value), e.lanes > 1
        if is_float(e.dtype):
            return f"np.asarray({value}).astype({e.dtype!r})" if vec else f"np.{e.dtype}({value})"
        if e.dtype == "bool":
            return f"({value} != 0)" if vec else f"bool({value} != 0)"
        return f"_icast({value}, {e.dtype!r}, {e.lanes})"

    def call(self, e: Call) -> str:
        args = ", ".join(self.expr(a) for a in e.args)
        if e.name.startswith("reduce_"):
            return f"_reduce({e.name[7:]!r}, {args}, {e.dtype!r})"
        return f"_f64(_MATH[{e.name!r}], {e.dtype!r}, {args})"
