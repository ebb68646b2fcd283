"""Narrow types made legal for the backends: computed wide, rounded where they are stored.

Templates may compute on bfloat16, float8, float4, int4, ... as on any type. No backend has
instructions for them, so before code generation (and interpretation) `legalize` rewrites a
kernel. Arithmetic, comparisons and intrinsics on narrow values compute in the wide type
(float32, int32) without rounding in between: an expression of narrow type is evaluated in
float32 as a whole and rounded to its type where its value is kept, which is where it is stored,
bound by a let or converted by a Cast (a conversion first rounds its operand to the operand's
own type, so `Cast` means what it says). A fused chain of elementwise bfloat16 ops thus rounds
once, at its store, as a float32 computation rounded to bfloat16 would. Conversions become the
integer arithmetic of `floatbits.convert`; a narrow float literal becomes a float32 literal (the
computation around it is float32), a narrow integer literal the int32 of its wrapped value.
What needs no arithmetic moves the bits: loads, stores, lets, selects between stored values,
broadcasts; the backends treat those as integers of the same width.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tvmc.dtypes import is_narrow, numpy_dtype, wide_dtype
from tvmc.kernel.expr import (
    BinaryOp,
    Broadcast,
    Call,
    Cast,
    Expr,
    FloatImm,
    IntImm,
    Reinterpret,
    Select,
    Shuffle,
    const,
)
from tvmc.kernel.floatbits import convert, literal_array, narrow_literal
from tvmc.kernel.stmt import Kernel, Stmt
from tvmc.kernel.transform import distinct_nodes
from tvmc.kernel.visitor import Visitor, post_order


def legalize(kernel: Kernel) -> Kernel:
    """`kernel` with no arithmetic, conversion or literal of a narrow type left (the same
    object when it has no narrow value at all)."""
    if not uses_narrow(kernel):
        return kernel
    return replace(kernel, body=_Legalizer().stmt(kernel.body))


def uses_narrow(kernel: Kernel) -> bool:
    """Whether any buffer or expression of `kernel` has a narrow type."""
    if any(is_narrow(b.dtype) for b in kernel.params):
        return True
    return any(is_narrow(getattr(n, "dtype", "")) for n in distinct_nodes(kernel.body))


class _Legalizer(Visitor):
    """Each distinct expression's legal form, once: of its own type when that is not narrow;
    for a narrow expression either its bits (narrow type: a load, a select of loads...) or its
    unrounded value in the wide type. `bits` and `wide` turn one form into the other."""

    def __init__(self) -> None:
        self.memo: dict[int, tuple[Expr, Expr]] = {}  # id -> (original kept alive, legal form)

    # ---- statements ------------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> Stmt:
        """`s` with every expression in it legal; a narrow value kept is rounded (`bits`)."""
        changes: dict[str, Any] = {}
        for name in s.child_fields:
            value = getattr(s, name)
            if name in s.binding_fields or value is None:
                continue
            if isinstance(value, tuple):
                new: Any = tuple(self.field(v) for v in value)
                if all(a is b for a, b in zip(new, value)):
                    continue
            else:
                new = self.field(value)
                if new is value:
                    continue
            changes[name] = new
        return replace(s, **changes) if changes else s

    def field(self, node: Expr | Stmt) -> Expr | Stmt:
        if isinstance(node, Stmt):
            return self.stmt(node)
        return self.bits(node) if is_narrow(node.dtype) else self.legal(node)

    # ---- expressions -----------------------------------------------------------------------------
    def legal(self, e: Expr) -> Expr:
        """The legal form of `e` (children first, each distinct node once)."""
        hit = self.memo.get(id(e))
        if hit is None:
            for n in post_order(e, skip=lambda n: id(n) in self.memo):
                self.memo[id(n)] = (n, self.visit(n))  # type: ignore[arg-type]
            hit = self.memo[id(e)]
        return hit[1]

    def bits(self, e: Expr) -> Expr:
        """Narrow `e` as its bits, rounded to its type if it was computed wide."""
        form = self.legal(e)
        return form if form.dtype == e.dtype else cast(form, e.dtype)

    def wide(self, e: Expr) -> Expr:
        """Narrow `e`'s value in its wide type (exact when it is stored bits)."""
        form = self.legal(e)
        return form if form.dtype != e.dtype else cast(form, wide_dtype(e.dtype))

    def visit_FloatImm(self, e: FloatImm) -> Expr:
        # a narrow float literal is a float32 one: the expression around it computes in float32
        # (1/6 in a bfloat16 HardSwish stays 1/6), and where it is kept it is rounded anyway
        return FloatImm(float(np.float32(e.value)), "float32") if is_narrow(e.dtype) else e

    def visit_IntImm(self, e: IntImm) -> Expr:
        if not is_narrow(e.dtype):
            return e
        return cast(narrow_literal(e.value, e.dtype), wide_dtype(e.dtype))  # wrapped, as int32

    def visit_BinaryOp(self, e: BinaryOp) -> Expr:
        if is_narrow(e.a.dtype):
            return replace(e, a=self.wide(e.a), b=self.wide(e.b))  # computed wide, not rounded
        return self.rebuilt(e)

    def visit_Call(self, e: Call) -> Expr:
        if any(is_narrow(a.dtype) for a in e.args):
            return replace(e, args=tuple(self.wide(a) for a in e.args))
        return self.rebuilt(e)

    def visit_Select(self, e: Select) -> Expr:
        t, f = self.legal(e.t), self.legal(e.f)
        if is_narrow(e.dtype) and (t.dtype != e.dtype or f.dtype != e.dtype):
            return Select(self.legal(e.cond), self.wide(e.t), self.wide(e.f))
        return self.rebuilt(e)

    def visit_Cast(self, e: Cast) -> Expr:
        if is_narrow(e.value.dtype):  # the operand rounded to its own type, then converted
            return cast(self.bits(e.value), e.dtype)
        return cast(self.legal(e.value), e.dtype) if is_narrow(e.dtype) else self.rebuilt(e)

    def visit_Reinterpret(self, e: Reinterpret) -> Expr:
        if is_narrow(e.value.dtype):  # the operand's bits, rounded to its type if computed wide
            return Reinterpret(e.dtype, self.bits(e.value))
        return self.rebuilt(e)

    def visit_Shuffle(self, e: Shuffle) -> Expr:
        if is_narrow(e.dtype):  # lanes move as they are: narrow ones as their bits
            return replace(e, vectors=tuple(self.bits(v) for v in e.vectors))
        return self.rebuilt(e)

    def visit_Broadcast(self, e: Broadcast) -> Expr:
        return Broadcast(self.legal(e.value), e.lanes)

    def generic_visit(self, e: Any) -> Expr:
        return self.rebuilt(e)

    def rebuilt(self, e: Expr) -> Expr:
        """`e` over its children's legal forms (itself when none changed)."""
        changes: dict[str, Any] = {}
        for name in e.child_fields:
            value = getattr(e, name)
            if isinstance(value, tuple):
                new: Any = tuple(self.legal(v) for v in value)
                if all(a is b for a, b in zip(new, value)):
                    continue
            else:
                new = self.legal(value)
                if new is value:
                    continue
            changes[name] = new
        return replace(e, **changes) if changes else e


def cast(e: Expr, dtype: str) -> Expr:
    """`e` converted to `dtype`, one side narrow: a literal converted now, as numpy would."""
    if e.dtype == dtype:
        return e
    value = _literal_array(e)
    if value is None:
        return convert(e, dtype)
    if is_narrow(dtype):
        return narrow_literal(value, dtype)
    return const(value.astype(dtype).item(), dtype)


def _literal_array(e: Expr) -> np.ndarray | None:
    """The value of a literal (0-d array of its type), narrow literals included, else None."""
    if isinstance(e, (FloatImm, IntImm)) and e.dtype != "bool":
        return np.asarray(e.value).astype(numpy_dtype(e.dtype))
    return literal_array(e)
