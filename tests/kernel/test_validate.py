"""Structural validation: each error names the kernel, the statement and the problem."""

from __future__ import annotations

import pytest

from tvmc.kernel import (
    Add,
    Barrier,
    Buffer,
    For,
    IntImm,
    Kernel,
    KernelIRError,
    Let,
    Shuffle,
    Store,
    Var,
    loop,
    ramp,
    validate,
)

A, C = Buffer("A", (16,)), Buffer("C", (16,))


def _kernel(body, params=(A, C)) -> Kernel:
    return Kernel("bad", params, body)


def test_a_well_formed_kernel_passes():
    k = _kernel(loop("i", 16, lambda i: C.store(i, A[i] + 1.0)))
    assert validate(k) is k


def test_undefined_variable():
    j = Var("j")
    with pytest.raises(KernelIRError, match=r"kernel bad in `C\[j\] = A\[j\]`: variable j is not"):
        validate(_kernel(Store(C, (j,), A[j])))


def test_rank_mismatch():
    m = Buffer("M", (4, 4))
    with pytest.raises(KernelIRError, match="M has rank 2 but is indexed with 1"):
        validate(_kernel(loop("i", 4, lambda i: m.store(i, 0.0)), (m,)))


def test_dtype_mismatch_in_store_and_in_binary_ops():
    ints = Buffer("I", (16,), "int32")
    with pytest.raises(KernelIRError, match="storing int32 into C: float32"):
        validate(_kernel(loop("i", 16, lambda i: C.store(i, ints[i])), (ints, C)))
    i = Var("i")
    bad = Add(A[i], ints[i])  # built directly, bypassing the operator's own check
    with pytest.raises(KernelIRError, match="dtype mismatch"):
        validate(_kernel(For(i, IntImm(16), "serial", Store(C, (i,), bad)), (A, ints, C)))


def test_buffer_not_in_scope():
    other = Buffer("T", (16,), scope="local")
    with pytest.raises(KernelIRError, match="T is neither a param nor allocated"):
        validate(_kernel(loop("i", 16, lambda i: other.store(i, 0.0))))


def test_rebinding_a_variable_inside_its_scope():
    i = Var("i")
    inner = For(i, IntImm(4), "serial", Store(C, (i,), A[i]))
    with pytest.raises(KernelIRError, match="bound again"):
        validate(_kernel(For(i, IntImm(4), "serial", inner)))


def test_let_type_and_vector_lane_checks():
    x = Var("x", "float32")
    with pytest.raises(KernelIRError, match="let x: float32 bound to int32"):
        validate(_kernel(Let(x, IntImm(1), Store(C, (0,), A[0]))))
    with pytest.raises(KernelIRError, match="storing 8 lanes through a 16-lane index"):
        validate(_kernel(Store(C, (ramp(0, 16),), A[ramp(0, 8)])))


def test_shuffle_rules():
    eight, sixteen = A[ramp(0, 8)], A[ramp(0, 16)]
    with pytest.raises(KernelIRError, match="vectors of one dtype and lanes"):
        validate(_kernel(C.store(ramp(0, 16), Shuffle((eight, A[ramp(8, 4)]), tuple(range(16))))))
    with pytest.raises(KernelIRError, match="picks outside its 16 lanes"):
        validate(_kernel(C.store(ramp(0, 16), Shuffle((eight, eight), (*range(15), 16)))))
    ok = Shuffle((sixteen,), tuple(reversed(range(16))))
    validate(_kernel(C.store(ramp(0, 16), ok)))


def test_loop_kind_rules():
    with pytest.raises(KernelIRError, match="unknown loop kind 'sideways'"):
        loop("i", 4, lambda i: C.store(i, 0.0), kind="sideways")
    n = Var("n")
    unrolled = For(Var("i"), n, "unrolled", Barrier())
    with pytest.raises(KernelIRError, match="unrolled loop needs a constant extent"):
        validate(_kernel(Let(n, IntImm(4), unrolled)))
    nested = loop(
        "a", 2, lambda a: loop("b", 2, lambda b: Barrier(), kind="threadIdx.x"), kind="threadIdx.x"
    )
    with pytest.raises(KernelIRError, match="threadIdx.x is bound by an enclosing loop"):
        validate(_kernel(nested))
