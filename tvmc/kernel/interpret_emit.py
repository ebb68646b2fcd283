"""Translation of a Kernel into Python source for the reference interpreter.

Scalars are Python ints/bools and numpy float scalars (so float32 rounds like float32); vectors
are 1-D numpy arrays (integer vectors as int64). Narrow types (bfloat16, float8, int4, ...) are
numpy scalars and arrays of their ml_dtypes type, moved but never computed on (`legalize`).
Names starting with `_` are runtime helpers defined in interpret.py.
"""

from __future__ import annotations

import re
from typing import Any

from tvmc.dtypes import is_narrow, numpy_dtype
from tvmc.kernel.buffer import Buffer
from tvmc.kernel.expr import (
    Add,
    And,
    BitAnd,
    BitNot,
    BitOr,
    BitXor,
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
    Reinterpret,
    Select,
    ShiftLeft,
    ShiftRight,
    Shuffle,
    Sub,
    Var,
    is_float,
    is_int,
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
    Prefetch,
    SeqStmt,
    Stmt,
    Store,
    WarpShuffle,
)
from tvmc.kernel.transform import contains
from tvmc.kernel.visitor import (
    EXPAND_LIMIT,
    Visitor,
    post_order,
    shared_subexpressions,
)

_INFIX = {Add: "+", Sub: "-", Mul: "*"}


class PythonEmitter(Visitor):
    """Builds the source of `def <kernel>(<buffers>)` plus the constants it refers to.

    Expressions become Python expressions, written out as trees; one whose tree would exceed
    EXPAND_LIMIT nodes first assigns each shared node to a temporary (`_e<k> = ...`) on the lines
    before its statement, so the source grows with the DAG, not the tree.
    """

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.names: dict[Any, str] = {}
        self.constants: dict[str, Any] = {}
        self.lines: list[str] = []
        self.function_name = f"kernel_{kernel.name}"
        self.thread_vars: list[str] = []  # enclosing lockstep thread loops, innermost last
        self.sites: list[str] = []  # shared-memory accesses, e.g. "a_tile load 2"
        self.built: dict[int, str] = {}  # a big expression's node texts (or temporaries' names)
        self.temp_count = 0

    def source(self) -> str:
        """The generated Python source (built once)."""
        if not self.lines:
            params = ", ".join(self.name(b) for b in self.kernel.params)
            self.lines.append(f"def {self.function_name}({params}):")
            self.stmt(self.kernel.body, 1, in_thread=False)
            self.lines.append("    return None")
        return "\n".join(self.lines) + "\n"

    def name(self, obj: Var | Buffer) -> str:
        """The Python name of a variable or buffer (unique in the source)."""
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
        """A name in the function's globals holding `value`."""
        name = f"c{len(self.constants)}"
        self.constants[name] = value
        return name

    # ---- statements ------------------------------------------------------------------------------
    def emit(self, depth: int, line: str) -> None:
        """Appends one source line at indentation `depth`."""
        self.lines.append("    " * depth + line)

    def stmt(self, s: Stmt, depth: int, in_thread: bool) -> None:
        """Emits `s` at indentation `depth` (`in_thread`: inside a lockstep thread generator)."""
        self.visit(s, depth, in_thread)

    def visit_SeqStmt(self, s: SeqStmt, depth: int, in_thread: bool) -> None:
        for x in s.stmts:
            self.stmt(x, depth, in_thread)
        if not s.stmts:
            self.emit(depth, "pass")

    def visit_For(self, s: For, depth: int, in_thread: bool) -> None:
        self.loop(s, depth, in_thread)

    def visit_Store(self, s: Store, depth: int, in_thread: bool) -> None:
        b = self.name(s.buffer)
        *index, value = self.exprs(depth, *s.indices, s.value)
        idx = self.index_tuple(index)
        lanes = max(s.value.lanes, max(i.lanes for i in s.indices))
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

    def visit_Let(self, s: Let, depth: int, in_thread: bool) -> None:
        var = self.name(s.var)  # named before the value's vars, as the source always had them
        (value,) = self.exprs(depth, s.value)
        self.emit(depth, f"{var} = {value}")
        self.stmt(s.body, depth, in_thread)

    def visit_IfThenElse(self, s: IfThenElse, depth: int, in_thread: bool) -> None:
        (cond,) = self.exprs(depth, s.cond)
        self.emit(depth, f"if {cond}:")
        self.stmt(s.then, depth + 1, in_thread)
        if s.else_ is not None:
            self.emit(depth, "else:")
            self.stmt(s.else_, depth + 1, in_thread)

    def visit_Allocate(self, s: Allocate, depth: int, in_thread: bool) -> None:
        b = s.buffer
        alloc = "_shared_alloc" if b.scope == "shared" else "_alloc"
        self.emit(depth, f"{self.name(b)} = {alloc}({b.shape!r}, {b.dtype!r})")
        self.stmt(s.body, depth, in_thread)

    def visit_Barrier(self, s: Barrier, depth: int, in_thread: bool) -> None:
        self.emit(depth, "yield _BARRIER" if in_thread else "pass")

    def visit_Prefetch(self, s: Prefetch, depth: int, in_thread: bool) -> None:
        # no effect, but the element must exist: the read checks the template's address
        idx = self.index_tuple(self.exprs(depth, *s.indices))
        self.emit(depth, f"_ = _ld({self.name(s.buffer)}, {s.buffer.name!r}, {idx})")

    def visit_Evaluate(self, s: Evaluate, depth: int, in_thread: bool) -> None:
        (value,) = self.exprs(depth, s.value)
        self.emit(depth, f"_ = {value}")

    def visit_WarpShuffle(self, s: WarpShuffle, depth: int, in_thread: bool) -> None:
        # every thread posts its value, all meet, each takes its partner's, all meet again
        # (the second meeting keeps a fast thread from overwriting a post not yet read)
        t = self.thread_vars[-1]
        b = self.name(s.buffer)
        *index, value = self.exprs(depth, *s.indices, s.value)
        idx = self.index_tuple(index)
        self.emit(depth, f"_xch_{t}[{t}] = {value}")
        self.emit(depth, "yield")
        self.emit(depth, f"_st({b}, {s.buffer.name!r}, {idx}, _xch_{t}[{t} ^ {s.lane_mask}])")
        self.emit(depth, "yield")

    def generic_visit(self, s: Any, *args: Any) -> Any:
        raise TypeError(f"unknown {'expression' if isinstance(s, Expr) else 'statement'} "
                        f"{type(s).__name__}")  # fmt: skip

    def loop(self, s: For, depth: int, in_thread: bool) -> None:
        """A Python for loop, or lockstep thread generators for threads that meet."""
        v = self.name(s.var)
        (extent,) = self.exprs(depth, s.extent)
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
    def exprs(self, depth: int, *exprs: Expr) -> list[str]:
        """Python texts of one statement's expressions. One too big to write out as a tree is
        built children first, each distinct node once, its shared nodes assigned to temporaries
        on lines (at `depth`) before the statement."""
        texts = []
        for e in exprs:
            if e.tree_nodes <= EXPAND_LIMIT:
                texts.append(self.expr(e))
                continue
            shared = {id(n) for n in shared_subexpressions(e)}
            for n in post_order(e, skip=lambda n: id(n) in self.built):
                text = self.built[id(n)] = self.visit(n)
                if id(n) in shared:
                    self.built[id(n)] = f"_e{self.temp_count}"
                    self.temp_count += 1
                    self.emit(depth, f"{self.built[id(n)]} = {text}")
            texts.append(self.built[id(e)])
        self.built = {}  # the temporaries hold this statement's values only
        return texts

    def index_tuple(self, texts: list[str]) -> str:
        """A Python tuple of index texts."""
        return "(" + "".join(f"{t}, " for t in texts) + ")"

    def expr(self, e: Expr) -> str:
        """Python text of `e`: built already in this statement, or written out as a tree."""
        text = self.built.get(id(e))
        return text if text is not None else self.methods[type(e)](self, e)

    def visit_Var(self, e: Var) -> str:
        return self.name(e)

    def visit_IntImm(self, e: IntImm) -> str:
        return repr(bool(e.value)) if e.dtype == "bool" else repr(e.value)

    def visit_FloatImm(self, e: FloatImm) -> str:
        return self.const(numpy_dtype(e.dtype).type(e.value))

    def visit_Add(self, e: Add | Sub | Mul) -> str:
        return f"({self.expr(e.a)} {_INFIX[type(e)]} {self.expr(e.b)})"

    visit_Sub = visit_Mul = visit_Add

    def visit_Div(self, e: Div) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        return f"({a} / {b})" if is_float(e.dtype) else f"_tdiv({a}, {b})"

    def visit_FloorDiv(self, e: FloorDiv) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        return f"np.floor({a} / {b})" if is_float(e.dtype) else f"({a} // {b})"

    def visit_Mod(self, e: Mod) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        return f"np.mod({a}, {b})" if is_float(e.dtype) else f"({a} % {b})"

    def visit_Min(self, e: Min | Max) -> str:
        a, b, op = self.expr(e.a), self.expr(e.b), "<" if isinstance(e, Min) else ">"
        if e.lanes > 1:
            return f"np.where({a} {op} {b}, {a}, {b})"
        return f"_sel({a} {op} {b}, {a}, {b})"

    visit_Max = visit_Min

    def visit_CmpOp(self, e: CmpOp) -> str:
        return f"({self.expr(e.a)} {e.symbol} {self.expr(e.b)})"

    def visit_And(self, e: And | Or) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        fn = "np.logical_and" if isinstance(e, And) else "np.logical_or"
        return f"{fn}({a}, {b})" if e.lanes > 1 else f"bool({fn}({a}, {b}))"

    visit_Or = visit_And

    def visit_BitAnd(self, e: BitAnd | BitOr | BitXor) -> str:
        # no wrap needed: the bits of in-range operands give an in-range result
        return f"({self.expr(e.a)} {e.symbol} {self.expr(e.b)})"

    visit_BitOr = visit_BitXor = visit_BitAnd

    def visit_ShiftLeft(self, e: ShiftLeft | ShiftRight) -> str:
        left = isinstance(e, ShiftLeft)
        return f"_shift({self.expr(e.a)}, {self.expr(e.b)}, {e.dtype!r}, {e.lanes}, {left})"

    visit_ShiftRight = visit_ShiftLeft

    def visit_BitNot(self, e: BitNot) -> str:
        return f"_wrap(~{self.expr(e.a)}, {e.dtype!r}, {e.lanes})"

    def visit_Not(self, e: Not) -> str:
        return f"np.logical_not({self.expr(e.a)})" if e.lanes > 1 else f"(not {self.expr(e.a)})"

    def visit_Select(self, e: Select) -> str:
        c, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
        return f"np.where({c}, {t}, {f})" if e.lanes > 1 else f"_sel({c}, {t}, {f})"

    def visit_Cast(self, e: Cast) -> str:
        value, vec = self.expr(e.value), e.lanes > 1
        if is_float(e.dtype):
            return f"np.asarray({value}).astype({e.dtype!r})" if vec else f"np.{e.dtype}({value})"
        if e.dtype == "bool":
            return f"({value} != 0)" if vec else f"bool({value} != 0)"
        return f"_icast({value}, {e.dtype!r}, {e.lanes})"

    def visit_Load(self, e: Load) -> str:
        b = self.name(e.buffer)
        idx = self.index_tuple([self.expr(i) for i in e.indices])
        name, vec = e.buffer.name, e.lanes > 1
        if e.buffer.scope == "shared":  # race-checked, and a site for bank statistics
            site = self.site(name, "load")
            if vec:
                return f"_svld({b}, {name!r}, {idx}, {e.lanes}, {site})"
            return f"_sld({b}, {name!r}, {idx}, {site})"
        if vec:
            return f"_vld({b}, {name!r}, {idx}, {e.lanes})"
        return f"_ld({b}, {name!r}, {idx})"

    def visit_Ramp(self, e: Ramp) -> str:
        base, stride = self.expr(e.base), self.expr(e.stride)
        return f"(np.arange({e.lanes}, dtype=np.int64) * {stride} + {base})"

    def visit_Reinterpret(self, e: Reinterpret) -> str:
        value = self.expr(e.value)
        return f"_reinterpret({value}, {e.value.dtype!r}, {e.dtype!r}, {e.lanes})"

    def visit_Broadcast(self, e: Broadcast) -> str:
        native_int = is_int(e.dtype) and not is_narrow(e.dtype)  # narrow ones: their own type
        dt = "int64" if native_int else e.dtype
        return f"np.full({e.lanes}, {self.expr(e.value)}, {dt!r})"

    def visit_Shuffle(self, e: Shuffle) -> str:
        vectors = ", ".join(f"np.atleast_1d({self.expr(v)})" for v in e.vectors)
        return f"np.concatenate(({vectors},))[{self.const(list(e.picks))}]"

    def visit_Call(self, e: Call) -> str:
        args = ", ".join(self.expr(a) for a in e.args)
        if e.name.startswith("reduce_"):
            return f"_reduce({e.name[7:]!r}, {args}, {e.dtype!r})"
        return f"_f64(_MATH[{e.name!r}], {e.dtype!r}, {args})"
