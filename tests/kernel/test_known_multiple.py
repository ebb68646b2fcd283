"""`known_multiple`: what codegen may assume an index is a multiple of (and so how aligned a vector
access is). Every claim must hold for every value the variables can take: a wrong one is a
misaligned 128-bit load, which faults on a GPU."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tvmc.kernel import IntImm, Var, const, maximum, minimum
from tvmc.kernel.expr import Add, Expr, FloorDiv, Max, Min, Mod, Mul, Sub
from tvmc.kernel.transform import known_multiple

X, Y = Var("x", "int32"), Var("y", "int32")
ENV = {X: 4, Y: 6}  # x is a multiple of 4, y of 6


def evaluate(e: Expr, values: dict[Var, int]) -> int:
    """Python's integer semantics, which the IR's // and % share."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return values[e]
    a, b = evaluate(e.a, values), evaluate(e.b, values)
    ops = {Add: a + b, Sub: a - b, Mul: a * b, Min: min(a, b), Max: max(a, b)}
    if isinstance(e, (FloorDiv, Mod)):
        return a // b if isinstance(e, FloorDiv) else a % b
    return ops[type(e)]


def leaves() -> st.SearchStrategy[Expr]:
    return st.one_of(st.sampled_from([X, Y]), st.integers(-64, 64).map(const))


def trees() -> st.SearchStrategy[Expr]:
    def grow(sub: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        binary = st.tuples(sub, sub, st.sampled_from(["+", "-", "*", "min", "max"]))
        divide = st.tuples(sub, st.integers(1, 16), st.sampled_from(["//", "%"]))
        return st.one_of(binary.map(_combine), divide.map(_combine))

    return st.recursive(leaves(), grow, max_leaves=8)


def _combine(t: tuple) -> Expr:
    a, b, op = t
    b = const(b) if isinstance(b, int) else b
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "min": lambda: minimum(a, b), "max": lambda: maximum(a, b),
            "//": lambda: a // b, "%": lambda: a % b}[op]()  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(trees(), st.integers(-20, 20), st.integers(-20, 20))
def test_every_claim_holds(e, kx, ky):
    m = known_multiple(e, ENV)
    value = evaluate(e, {X: 4 * kx, Y: 6 * ky})
    assert value == 0 if m == 0 else value % m == 0


def test_what_an_implicit_gemm_index_is_known_to_be():
    assert known_multiple(X * 16 + Y * 4, ENV) == 8  # gcd(64, 24)
    assert known_multiple((X * 8 + 4) % 16, ENV) == 4
    assert known_multiple((X * 8) // 4, ENV) == 8
    assert known_multiple((X * 8 + 1) // 4, ENV) == 1  # the quotient of an odd number: unknown
    assert known_multiple(const(0) * Y, ENV) == 0
    assert known_multiple(Var("free", "int32"), ENV) == 1
    assert math.gcd(known_multiple(X, ENV), 4) == 4
