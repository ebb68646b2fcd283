"""Bit operations on integers (&, |, ^, ~, <<, >>): construction, checks, printing, and their
results compiled (16 lanes and scalar, CPU) and interpreted against numpy for every integer type."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tvmc.codegen import emit_cpu, emit_ptx, load_jit
from tvmc.dtypes import NATIVE_INTS as INT_DTYPES  # narrow ints compute as int32
from tvmc.kernel import (
    NE,
    And,
    BitAnd,
    BitNot,
    BitXor,
    Buffer,
    Kernel,
    KernelIRError,
    Not,
    ShiftLeft,
    ShiftRight,
    Var,
    expr_str,
    interpret,
    loop,
    seq,
    validate,
)

N = 37  # two 16-lane vectors and a scalar tail
OPS = {
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
    "not": lambda a, b: ~a,
}


def numpy_result(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What numpy computes, shifts by amounts outside [0, bits) shifting every bit out."""
    if op in ("shl", "shr"):
        k = b.astype(np.int64)
        inside = (k >= 0) & (k < a.dtype.itemsize * 8)
        amount = np.where(inside, k, 0).astype(a.dtype)
        if op == "shl":
            return np.where(inside, np.left_shift(a, amount), a.dtype.type(0))
        fill = np.where(a < 0, a.dtype.type(-1) if a.dtype.kind == "i" else 0, a.dtype.type(0))
        return np.where(inside, np.right_shift(a, amount), fill.astype(a.dtype))
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}.get(op)
    return fn(a, b) if fn else np.invert(a)


def bit_kernel(op: str, dtype: str, lanes: int) -> Kernel:
    a, b, y = (Buffer(n, (N,), dtype) for n in "aby")
    body = OPS[op]
    vectors = N // lanes * lanes

    def vector(o):
        return loop("l", lanes, lambda l: y.store(o * lanes + l, body(a[o * lanes + l],
                                                                      b[o * lanes + l])),
                    kind="vectorized" if lanes > 1 else "serial")  # fmt: skip

    tail = loop("t", N - vectors, lambda t: y.store(vectors + t, body(a[vectors + t],
                                                                      b[vectors + t])))  # fmt: skip
    return Kernel(f"bits_{op}", (a, b, y), seq(loop("o", N // lanes, vector), tail))


def operands(dtype: str, rng) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    bits = np.dtype(dtype).itemsize * 8
    a = rng.integers(info.min, info.max, N, endpoint=True, dtype=dtype)
    a[:4] = [info.min, info.max, 0, 1]
    # amounts in range, at and past the width, and negative ones for signed types
    b = rng.integers(0, bits, N).astype(dtype)
    b[:6] = [0, bits - 1, bits, bits + 3, min(info.max, 2 * bits), bits // 2]
    if info.min < 0:
        b[6:9] = [-1, -bits, info.min]
    return a, b


@pytest.mark.parametrize("lanes", [16, 1])
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", sorted(OPS))
def test_compiled_and_interpreted_match_numpy(op, dtype, lanes, rng):
    a, b = operands(dtype, rng)
    kernel = bit_kernel(op, dtype, lanes)
    want = numpy_result(op, a, b)
    compiled = np.zeros(N, dtype)
    load_jit(emit_cpu([kernel])).run(kernel.name, a, b, compiled)
    np.testing.assert_array_equal(compiled, want)
    interpreted = np.zeros(N, dtype)
    interpret(kernel, a, b, interpreted)
    np.testing.assert_array_equal(interpreted, want)


def test_operators_pick_logical_nodes_for_bools_and_bit_nodes_for_integers():
    p, q = Var("p", "bool"), Var("q", "bool")
    i, j = Var("i", "uint8"), Var("j", "uint8")
    assert isinstance(p & q, And) and isinstance(p.ne(q), NE) and isinstance(~p, Not)
    assert isinstance(i & j, BitAnd) and isinstance(i ^ j, BitXor) and isinstance(~i, BitNot)
    assert isinstance(i << 3, ShiftLeft) and (i >> j).dtype == "uint8"
    assert isinstance(i >> j, ShiftRight) and (~i).dtype == "uint8"


def test_printer_uses_python_precedence():
    i, j = Var("i"), Var("j")
    assert expr_str((i + 1) << j & 7 | ~i) == "i + 1 << j & 7 | ~i"
    assert expr_str(i & (j | 1)) == "i & (j | 1)"


def test_bit_operations_need_integers():
    x, y = Buffer("x", (4,)), Buffer("y", (4,))
    with pytest.raises(KernelIRError, match="needs integer operands"):
        validate(Kernel("bad", (x, y), loop("i", 4, lambda i: y.store(i, BitAnd(x[i], x[i])))))
    with pytest.raises(KernelIRError, match="~ needs an integer operand"):
        validate(Kernel("bad", (x, y), loop("i", 4, lambda i: y.store(i, BitNot(x[i])))))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptx_of_every_bit_operation_assembles(tmp_path):
    def kernel(op: str, dtype: str) -> Kernel:
        a, b, y = (Buffer(n, (64,), dtype) for n in "aby")
        body = loop("t", 64, lambda t: y.store(t, OPS[op](a[t], b[t])), kind="threadIdx.x")
        return Kernel(f"k_{op}_{dtype}", (a, b, y), body)

    ptx = emit_ptx([kernel(op, dtype) for op in OPS for dtype in ("int8", "uint32", "int64")]).ptx
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    done = subprocess.run(["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
