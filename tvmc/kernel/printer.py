"""A readable text form of kernel IR (what `tvmc compile --dump-code kernel` shows)."""

from __future__ import annotations

from tvmc.kernel.expr import (
    Add,
    And,
    BinaryOp,
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
)
from tvmc.kernel.stmt import (
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
from tvmc.kernel.visitor import (
    EXPAND_LIMIT,
    Visitor,
    post_order,
    shared_subexpressions,
)

_PREC: dict[type, float] = {Or: 1, And: 2, Add: 4, Sub: 4, Mul: 5, Div: 5, FloorDiv: 5, Mod: 5}
_PREC.update({BitOr: 3.2, BitXor: 3.4, BitAnd: 3.6, ShiftLeft: 3.8, ShiftRight: 3.8})  # Python's
_ATOM = 7


def _prec(e: Expr) -> float:
    if isinstance(e, CmpOp):
        return 3
    if isinstance(e, (Not, BitNot)):
        return 6
    return _PREC.get(type(e), _ATOM)


def expr_str(e: Expr) -> str:
    """One expression as text, with only the parentheses precedence needs (an expression too big
    to write out as a tree ends with the definitions of its shared nodes: `... where %0 = ...`)."""
    printer = _ExprPrinter()
    text = printer.text(e)
    return f"{text} where {', '.join(printer.definitions)}" if printer.definitions else text


class _ExprPrinter(Visitor):
    """Expression text, each distinct node's bare text built once. An expression of more than
    EXPAND_LIMIT tree nodes is built children first (no deep recursion) and names its shared
    nodes `%k` instead of writing them out at every use."""

    def __init__(self, first_name: int = 0) -> None:
        self.bare: dict[int, str] = {}  # id -> text without enclosing parentheses
        self.names: dict[int, str] = {}
        self.first_name = first_name
        self.definitions: list[str] = []  # "%k = text", children before parents

    def text(self, e: Expr) -> str:
        """`e` as text (after defining its shared nodes, when it is too big to write out)."""
        if e.tree_nodes > EXPAND_LIMIT:
            shared = {id(n) for n in shared_subexpressions(e)}
            for n in post_order(e, skip=lambda n: id(n) in self.bare):
                self.bare[id(n)] = self.visit(n)
                if id(n) in shared:
                    name = self.names[id(n)] = f"%{self.first_name + len(self.names)}"
                    self.definitions.append(f"{name} = {self.bare[id(n)]}")
        return self.expr(e, 0)

    def expr(self, e: Expr, need: float) -> str:
        """`e`, parenthesised when its precedence is below `need`."""
        name = self.names.get(id(e))
        if name is not None:
            return name
        text = self.bare.get(id(e))
        if text is None:  # the method table, not visit(): one frame less per level
            text = self.bare[id(e)] = self.methods[type(e)](self, e)
        return f"({text})" if _prec(e) < need else text

    def visit_Var(self, e: Var) -> str:
        return e.name

    def visit_IntImm(self, e: IntImm) -> str:
        if e.dtype == "bool":
            return "true" if e.value else "false"
        return str(e.value) if e.dtype == "int32" else f"{e.dtype}({e.value})"

    def visit_FloatImm(self, e: FloatImm) -> str:
        return repr(e.value) if e.dtype == "float32" else f"{e.dtype}({e.value!r})"

    def visit_BinaryOp(self, e: BinaryOp) -> str:
        p = _prec(e)
        return f"{self.expr(e.a, p)} {e.symbol} {self.expr(e.b, p + 1)}"

    def visit_Min(self, e: Min | Max) -> str:
        return f"{e.symbol}({self.expr(e.a, 0)}, {self.expr(e.b, 0)})"

    visit_Max = visit_Min

    def visit_Not(self, e: Not) -> str:
        return f"!{self.expr(e.a, 6)}"

    def visit_BitNot(self, e: BitNot) -> str:
        return f"~{self.expr(e.a, 6)}"

    def visit_Select(self, e: Select) -> str:
        return f"select({self.expr(e.cond, 0)}, {self.expr(e.t, 0)}, {self.expr(e.f, 0)})"

    def visit_Cast(self, e: Cast) -> str:
        return f"{e.dtype}({self.expr(e.value, 0)})"

    def visit_Reinterpret(self, e: Reinterpret) -> str:
        return f"reinterpret<{e.dtype}>({self.expr(e.value, 0)})"

    def visit_Load(self, e: Load) -> str:
        return f"{e.buffer.name}[{', '.join(self.expr(i, 0) for i in e.indices)}]"

    def visit_Ramp(self, e: Ramp) -> str:
        return f"ramp({self.expr(e.base, 0)}, {self.expr(e.stride, 0)}, {e.lanes})"

    def visit_Broadcast(self, e: Broadcast) -> str:
        return f"broadcast({self.expr(e.value, 0)}, {e.lanes})"

    def visit_Call(self, e: Call) -> str:
        return f"{e.name}({', '.join(self.expr(a, 0) for a in e.args)})"

    def visit_Shuffle(self, e: Shuffle) -> str:
        vectors = ", ".join(self.expr(v, 0) for v in e.vectors)
        return f"shuffle([{vectors}], {list(e.picks)})"


def _type(dtype: str, lanes: int) -> str:
    return dtype if lanes == 1 else f"{dtype}x{lanes}"


def stmt_lines(s: Stmt, indent: int = 0) -> list[str]:
    """One statement as indented lines."""
    printer = _StmtPrinter()
    printer.visit(s, indent)
    return printer.lines


class _StmtPrinter(Visitor):
    """Statement lines; a statement's big expressions put their definitions on lines before it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.named = 0  # shared nodes named so far: names stay unique in one printout

    def exprs(self, indent: int, *exprs: Expr) -> list[str]:
        """Texts of `exprs`, after emitting the definitions of any named shared nodes."""
        printer = _ExprPrinter(self.named)
        texts = [printer.text(e) for e in exprs]
        self.named += len(printer.definitions)
        self.lines += [f"{'  ' * indent}{d}" for d in printer.definitions]
        return texts

    def emit(self, indent: int, line: str) -> None:
        self.lines.append(f"{'  ' * indent}{line}")

    def visit_SeqStmt(self, s: SeqStmt, indent: int) -> None:
        for x in s.stmts:
            self.visit(x, indent)

    def visit_For(self, s: For, indent: int) -> None:
        (extent,) = self.exprs(indent, s.extent)
        kind = "" if s.kind == "serial" else f" {s.kind}"
        self.emit(indent, f"for ({s.var.name}: {s.var.dtype}, 0, {extent}){kind} {{")
        self.visit(s.body, indent + 1)
        self.emit(indent, "}")

    def visit_Store(self, s: Store, indent: int) -> None:
        *index, value = self.exprs(indent, *s.indices, s.value)
        self.emit(indent, f"{s.buffer.name}[{', '.join(index)}] = {value}")

    def visit_Let(self, s: Let, indent: int) -> None:
        (value,) = self.exprs(indent, s.value)
        self.emit(indent, f"let {s.var.name}: {_type(s.var.dtype, s.var.lanes)} = {value}")
        self.visit(s.body, indent)

    def visit_IfThenElse(self, s: IfThenElse, indent: int) -> None:
        (cond,) = self.exprs(indent, s.cond)
        self.emit(indent, f"if ({cond}) {{")
        self.visit(s.then, indent + 1)
        if s.else_ is not None:
            self.emit(indent, "} else {")
            self.visit(s.else_, indent + 1)
        self.emit(indent, "}")

    def visit_Allocate(self, s: Allocate, indent: int) -> None:
        b = s.buffer
        self.emit(indent, f"allocate {b.name}: {b.dtype}{list(b.shape)}, {b.scope} {{")
        self.visit(s.body, indent + 1)
        self.emit(indent, "}")

    def visit_Barrier(self, s: Barrier, indent: int) -> None:
        self.emit(indent, "barrier()")

    def visit_Prefetch(self, s: Prefetch, indent: int) -> None:
        index = self.exprs(indent, *s.indices)
        self.emit(indent, f"prefetch({s.buffer.name}[{', '.join(index)}])")

    def visit_Evaluate(self, s: Evaluate, indent: int) -> None:
        (value,) = self.exprs(indent, s.value)
        self.emit(indent, f"evaluate({value})")

    def visit_WarpShuffle(self, s: WarpShuffle, indent: int) -> None:
        *index, value = self.exprs(indent, *s.indices, s.value)
        shuffle = f"shuffle_xor({value}, {s.lane_mask})"
        self.emit(indent, f"{s.buffer.name}[{', '.join(index)}] = {shuffle}")


def kernel_str(kernel: Kernel) -> str:
    """The whole kernel: signature, attributes and body."""
    params = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in kernel.params)
    lines = [f"kernel {kernel.name}({params}) {{"]
    if kernel.attrs:
        attrs = ", ".join(f"{k}={v!r}" for k, v in sorted(kernel.attrs.items()))
        lines.append(f"  // attrs: {attrs}")
    lines += stmt_lines(kernel.body, 1)
    lines.append("}")
    return "\n".join(lines)
