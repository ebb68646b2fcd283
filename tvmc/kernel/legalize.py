"""Narrow types made legal for the backends: computed wide, converted by bit manipulation.

Templates may compute on bfloat16, float8, float4, int4, ... as on any type. No backend has
instructions for them, so before code generation (and interpretation) `legalize` rewrites a
kernel: an operation on narrow operands computes in their wide type (float32, int32) and rounds
its result back, so every operation rounds once, as numpy's ufuncs on ml_dtypes arrays do; a
Cast from or to a narrow type becomes the integer arithmetic of `floatbits.convert`; a narrow
literal becomes its bits. What stays narrow moves bits without computing on them: loads,
stores, lets, selects and broadcasts, which the backends treat as integers of the same width.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tvmc.dtypes import is_narrow, wide_dtype
from tvmc.kernel.expr import (
    BinaryOp,
    Call,
    Cast,
    CmpOp,
    Expr,
    FloatImm,
    IntImm,
    const,
)
from tvmc.kernel.floatbits import convert, literal_array, narrow_literal
from tvmc.kernel.stmt import Kernel
from tvmc.kernel.transform import distinct_nodes, rewrite
from tvmc.kernel.visitor import Visitor


def legalize(kernel: Kernel) -> Kernel:
    """`kernel` with no arithmetic, conversion or literal of a narrow type left (the same
    object when it has no narrow value at all)."""
    if not uses_narrow(kernel):
        return kernel
    return replace(kernel, body=rewrite(kernel.body, _Legalizer().visit))


def uses_narrow(kernel: Kernel) -> bool:
    """Whether any buffer or expression of `kernel` has a narrow type."""
    if any(is_narrow(b.dtype) for b in kernel.params):
        return True
    return any(is_narrow(getattr(n, "dtype", "")) for n in distinct_nodes(kernel.body))


def widen(e: Expr) -> Expr:
    """A narrow value as its wide type."""
    return cast(e, wide_dtype(e.dtype))


def cast(e: Expr, dtype: str) -> Expr:
    """`e` converted to `dtype`, one side narrow: a literal converted now, as numpy would."""
    if isinstance(e, (FloatImm, IntImm)) and e.dtype != "bool":
        value: np.ndarray | None = np.asarray(e.value).astype(e.dtype)
    else:
        value = literal_array(e)
    if value is None:
        return convert(e, dtype)
    if is_narrow(dtype):
        return narrow_literal(value, dtype)
    return const(value.astype(dtype).item(), dtype)


class _Legalizer(Visitor):
    """One node, its children legal already (rewrite goes children first)."""

    def visit_FloatImm(self, e: FloatImm | IntImm) -> Expr:
        return narrow_literal(e.value, e.dtype) if is_narrow(e.dtype) else e

    visit_IntImm = visit_FloatImm

    def visit_BinaryOp(self, e: BinaryOp) -> Expr:
        if not is_narrow(e.a.dtype):
            return e
        wide = replace(e, a=widen(e.a), b=widen(e.b))
        return wide if isinstance(e, CmpOp) else cast(wide, e.dtype)

    def visit_Call(self, e: Call) -> Expr:
        if not any(is_narrow(a.dtype) for a in e.args):
            return e
        return cast(replace(e, args=tuple(widen(a) for a in e.args)), e.dtype)

    def visit_Cast(self, e: Cast) -> Expr:
        return cast(e.value, e.dtype) if is_narrow(e.dtype) or is_narrow(e.value.dtype) else e

    def generic_visit(self, node: object) -> object:
        return node  # loads, stores, selects, lets...: narrow values move as bits
