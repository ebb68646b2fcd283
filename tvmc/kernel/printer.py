"""A readable text form of kernel IR (what `tvmc compile --dump-code kernel` shows)."""

from __future__ import annotations

from tvmc.kernel.expr import (
    Add,
    And,
    BinaryOp,
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
)
from tvmc.kernel.stmt import (
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

_PREC = {Or: 1, And: 2, Add: 4, Sub: 4, Mul: 5, Div: 5, FloorDiv: 5, Mod: 5}
_ATOM = 7


def _prec(e: Expr) -> int:
    if isinstance(e, CmpOp):
        return 3
    if isinstance(e, Not):
        return 6
    return _PREC.get(type(e), _ATOM)


def expr_str(e: Expr) -> str:
    """One expression as text, with only the parentheses precedence needs."""
    return _expr(e, 0)


def _expr(e: Expr, need: int) -> str:
    text = _bare(e)
    return f"({text})" if _prec(e) < need else text


def _bare(e: Expr) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        if e.dtype == "bool":
            return "true" if e.value else "false"
        return str(e.value) if e.dtype == "int32" else f"{e.dtype}({e.value})"
    if isinstance(e, FloatImm):
        return repr(e.value) if e.dtype == "float32" else f"{e.dtype}({e.value!r})"
    if isinstance(e, (Min, Max)):
        return f"{e.symbol}({_expr(e.a, 0)}, {_expr(e.b, 0)})"
    if isinstance(e, BinaryOp):
        p = _prec(e)
        return f"{_expr(e.a, p)} {e.symbol} {_expr(e.b, p + 1)}"
    if isinstance(e, Not):
        return f"!{_expr(e.a, 6)}"
    if isinstance(e, Select):
        return f"select({_expr(e.cond, 0)}, {_expr(e.t, 0)}, {_expr(e.f, 0)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({_expr(e.value, 0)})"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(_expr(i, 0) for i in e.indices)}]"
    if isinstance(e, Ramp):
        return f"ramp({_expr(e.base, 0)}, {_expr(e.stride, 0)}, {e.lanes})"
    if isinstance(e, Broadcast):
        return f"broadcast({_expr(e.value, 0)}, {e.lanes})"
    if isinstance(e, Call):
        return f"{e.name}({', '.join(_expr(a, 0) for a in e.args)})"
    raise TypeError(f"unknown expression {type(e).__name__}")


def _type(dtype: str, lanes: int) -> str:
    return dtype if lanes == 1 else f"{dtype}x{lanes}"


def stmt_lines(s: Stmt, indent: int = 0) -> list[str]:
    """One statement as indented lines."""
    pad = "  " * indent
    if isinstance(s, SeqStmt):
        return [line for x in s.stmts for line in stmt_lines(x, indent)]
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else f" {s.kind}"
        head = f"{pad}for ({s.var.name}: {s.var.dtype}, 0, {expr_str(s.extent)}){kind} {{"
        return [head, *stmt_lines(s.body, indent + 1), f"{pad}}}"]
    if isinstance(s, Store):
        index = ", ".join(expr_str(i) for i in s.indices)
        return [f"{pad}{s.buffer.name}[{index}] = {expr_str(s.value)}"]
    if isinstance(s, Let):
        t = _type(s.var.dtype, s.var.lanes)
        return [f"{pad}let {s.var.name}: {t} = {expr_str(s.value)}", *stmt_lines(s.body, indent)]
    if isinstance(s, IfThenElse):
        lines = [f"{pad}if ({expr_str(s.cond)}) {{", *stmt_lines(s.then, indent + 1)]
        if s.else_ is not None:
            lines += [f"{pad}}} else {{", *stmt_lines(s.else_, indent + 1)]
        return [*lines, f"{pad}}}"]
    if isinstance(s, Allocate):
        b = s.buffer
        head = f"{pad}allocate {b.name}: {b.dtype}{list(b.shape)}, {b.scope} {{"
        return [head, *stmt_lines(s.body, indent + 1), f"{pad}}}"]
    if isinstance(s, Barrier):
        return [f"{pad}barrier()"]
    if isinstance(s, Evaluate):
        return [f"{pad}evaluate({expr_str(s.value)})"]
    if isinstance(s, WarpShuffle):
        index = ", ".join(expr_str(i) for i in s.indices)
        return [f"{pad}{s.buffer.name}[{index}] = shuffle_xor({expr_str(s.value)}, {s.lane_mask})"]
    raise TypeError(f"unknown statement {type(s).__name__}")


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
