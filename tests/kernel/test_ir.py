"""Kernel IR construction, the printer, and the generic transforms."""

from __future__ import annotations

import pytest

from tvmc.kernel import (
    Add,
    Broadcast,
    Buffer,
    Cast,
    FloatImm,
    FloorDiv,
    For,
    IntImm,
    Kernel,
    KernelIRError,
    Load,
    Mul,
    Ramp,
    Store,
    Var,
    allocate,
    exp,
    expr_str,
    fma,
    if_then_else,
    kernel_str,
    let,
    loop,
    ramp,
    seq,
)
from tvmc.kernel.transform import free_buffers, free_vars, substitute, vectorize_loop


def test_operators_build_nodes_with_literals_of_the_right_dtype():
    i = Var("i")
    e = i * 4 + 1
    assert isinstance(e, Add) and isinstance(e.a, Mul)
    assert e.b == IntImm(1, "int32") and e.dtype == "int32"
    x = Buffer("X", (8,))[i] * 2
    assert x.b == FloatImm(2.0, "float32")
    assert isinstance(i // 2, FloorDiv)
    assert (i < 3).dtype == "bool"


def test_vars_compare_by_identity_other_nodes_structurally():
    i, j = Var("i"), Var("i")
    assert i != j and i == i
    assert i + 1 == i + 1
    assert i + 1 != j + 1
    assert len({i + 1, i + 1}) == 1


def test_mixing_dtypes_is_an_error_naming_both():
    with pytest.raises(KernelIRError, match="int32 vs float32"):
        Var("i") + Var("x", "float32")
    with pytest.raises(KernelIRError, match="float literal"):
        Var("i") + 0.5


def test_expressions_have_no_truth_value():
    with pytest.raises(TypeError, match="no truth value"):
        bool(Var("i") < 3)


def test_buffer_indexing_and_vectors():
    b = Buffer("B", (4, 32))
    i = Var("i")
    v = b[i, ramp(16, 16)]
    assert isinstance(v, Load) and v.lanes == 16 and v.dtype == "float32"
    assert b.strides == (32, 1) and b.nbytes == 512
    s = b.store((i, ramp(0, 16)), 0.0)
    assert isinstance(s, Store) and s.value == FloatImm(0.0)
    assert (v * 2.0).lanes == 16  # the scalar literal broadcasts implicitly
    assert fma(Broadcast(b[i, 0], 16), v, v).lanes == 16


def test_printer_shows_loops_kinds_and_scopes():
    a, c = Buffer("A", (64,)), Buffer("C", (64,))
    k = Kernel(
        "k",
        (a, c),
        loop(
            "i",
            4,
            lambda i: allocate(
                "t",
                (16,),
                lambda t: seq(
                    loop("j", 16, lambda j: t.store(j, exp(a[i * 16 + j])), kind="vectorized"),
                    let("s", t[0] + t[1], lambda s: if_then_else(s > 0.0, c.store(i, s))),
                ),
            ),
            kind="parallel",
        ),
    )
    text = kernel_str(k)
    assert "kernel k(A: float32[64], C: float32[64]) {" in text
    assert "  for (i: int32, 0, 4) parallel {" in text
    assert "    allocate t: float32[16], local {" in text
    assert "      for (j: int32, 0, 16) vectorized {" in text
    assert "        t[j] = exp(A[i * 16 + j])" in text
    assert "      let s: float32 = t[0] + t[1]" in text
    assert "      if (s > 0.0) {" in text


def test_printer_parenthesises_by_precedence():
    i, j = Var("i"), Var("j")
    assert expr_str((i + j) * 2) == "(i + j) * 2"
    assert expr_str(i - (j - 1)) == "i - (j - 1)"
    assert expr_str(i * 2 + j % 3) == "i * 2 + j % 3"
    assert expr_str(ramp(i * 16, 16)) == "ramp(i * 16, 1, 16)"
    assert expr_str(Cast("float32", i)) == "float32(i)"


def test_substitute_and_free_vars():
    i, j, n = Var("i"), Var("j"), Var("n")
    b = Buffer("B", (8,))
    s = For(j, n, "serial", b.store(j, b[i + j]))
    assert free_vars(s) == [n, i]
    assert free_buffers(s) == [b]
    s2 = substitute(s, {i: IntImm(3)})
    assert free_vars(s2) == [n]
    assert s2.var is j  # binding positions are never substituted


def test_vectorize_loop_turns_the_variable_into_a_ramp():
    a, c = Buffer("A", (64,)), Buffer("C", (64,))
    io = Var("io")
    lp = loop("ii", 16, lambda ii: c.store(io * 16 + ii, a[io * 16 + ii] * 2.0), kind="vectorized")
    body = vectorize_loop(lp)
    assert isinstance(body, Store) and body.value.lanes == 16
    assert any(isinstance(n, Ramp) for n in [body.indices[0].b])


def test_vectorize_loop_refuses_reductions_into_one_element():
    a, c = Buffer("A", (16,)), Buffer("C", (1,))
    lp = loop("j", 16, lambda j: c.store(0, c[0] + a[j]), kind="vectorized")
    assert vectorize_loop(lp) is None
