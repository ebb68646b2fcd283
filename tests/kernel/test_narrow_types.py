"""Narrow types in the kernel IR through the interpreter: conversions bit for bit as ml_dtypes'
astype, arithmetic rounded once per operation, literals, and what legalize leaves alone."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from tests.kernel.narrow import NARROW, bits_of, cast_kernel, edge_samples, every_pattern
from tvmc.dtypes import NARROW_FLOATS
from tvmc.kernel import (
    Buffer,
    Cast,
    FloatImm,
    Kernel,
    KernelIRError,
    Reinterpret,
    allocate,
    exp,
    interpret,
    kernel_str,
    legalize,
    loop,
    maximum,
    seq,
    validate,
)
from tvmc.kernel.legalize import uses_narrow
from tvmc.kernel.transform import distinct_nodes

LANES = 256  # interpreted vectors are numpy arrays: wide ones keep the interpreter fast


def run(src: str, dst: str, x: np.ndarray) -> np.ndarray:
    """`x.astype(dst)` computed by the interpreter."""
    y = np.zeros(x.size, dst)
    interpret(cast_kernel(src, dst, x.size, LANES), x, y)
    return y


def expected(x: np.ndarray, dst: str) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # NaN to int: numpy warns, ml_dtypes gives 0
        return x.astype(dst)


@pytest.mark.parametrize("src", NARROW)
def test_every_pattern_decodes_exactly(src):
    x = every_pattern(src, LANES)
    dst = "float32" if src in NARROW_FLOATS else "int32"
    np.testing.assert_array_equal(bits_of(run(src, dst, x)), bits_of(expected(x, dst)))


@pytest.mark.parametrize("dst", NARROW)
def test_float32_edges_encode_exactly(dst):
    fmt = dst if dst in NARROW_FLOATS else "float8_e5m2"  # integers: small values, ties, NaN
    x = edge_samples(fmt, step=32 if dst == "bfloat16" else 1)
    x = np.resize(x, -(-x.size // LANES) * LANES)
    np.testing.assert_array_equal(bits_of(run("float32", dst, x)), bits_of(expected(x, dst)))


PAIRS = [("bfloat16", "float8_e4m3fn"), ("float8_e5m2", "int4"), ("int4", "float4_e2m1fn"),
         ("uint2", "bfloat16"), ("float8_e8m0fnu", "float16"), ("int2", "bool")]  # fmt: skip


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_narrow_to_narrow_and_wide(src, dst):
    x = every_pattern(src, LANES)
    np.testing.assert_array_equal(bits_of(run(src, dst, x)), bits_of(expected(x, dst)))


@pytest.mark.parametrize("src", ["int8", "int64", "uint64", "bool", "float16", "float64"])
def test_wide_types_encode_like_ml_dtypes(src):
    values = np.arange(-LANES, LANES) * 3 if src != "bool" else np.arange(2 * LANES) % 3 == 0
    x = np.asarray(values).astype(src) if src != "float64" else np.linspace(-500, 500, 2 * LANES)
    for dst in ("bfloat16", "float8_e4m3fn", "int4", "uint2"):
        np.testing.assert_array_equal(bits_of(run(src, dst, x)), bits_of(expected(x, dst)))


def test_arithmetic_rounds_once_per_operation():
    a, b, y = (Buffer(n, (LANES,), "bfloat16") for n in "aby")
    body = loop("i", LANES, lambda i: y.store(i, exp(a[i] * b[i] + a[i])), kind="vectorized")
    kernel = Kernel("bf16_math", (a, b, y), body)
    rng = np.random.default_rng(0)
    x1, x2 = (rng.standard_normal(LANES).astype(ml_dtypes.bfloat16) for _ in range(2))
    out = np.zeros(LANES, ml_dtypes.bfloat16)
    interpret(kernel, x1, x2, out)
    # ml_dtypes' ufuncs compute each operation in float32 and round it: so must we
    step = (x1 * x2).astype(np.float32) + x1.astype(np.float32)
    want = np.exp(step.astype(ml_dtypes.bfloat16).astype(np.float64)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(bits_of(out), bits_of(want))


def test_literals_become_bits_and_fold():
    x, y = Buffer("x", (4,), "float8_e4m3fn"), Buffer("y", (4,), "float32")
    one, big = FloatImm(1.0, "float8_e4m3fn"), FloatImm(300.0, "float8_e4m3fn")
    body = loop("i", 4, lambda i: y.store(i, maximum(x[i], one).astype("float32") + big.astype(
        "float32")))  # fmt: skip
    kernel = Kernel("lit", (x, y), body)
    legal = legalize(kernel)
    narrow = [
        n
        for n in distinct_nodes(legal.body)
        if isinstance(n, (FloatImm, Cast))
        and "float8_e4m3fn" in (n.dtype, getattr(getattr(n, "value", None), "dtype", ""))
    ]
    assert not narrow  # fmt: skip
    assert "288.0" in kernel_str(legal)  # 300 rounded to float8_e4m3fn, folded to a float32
    out = np.zeros(4, np.float32)
    interpret(kernel, np.array([0.5, 2, -3, np.nan], ml_dtypes.float8_e4m3fn), out)
    np.testing.assert_array_equal(out, [289, 290, 289, 289])  # max(NaN, 1) is 1 in kernel IR


def test_scratch_and_selects_move_bits():
    x, y = Buffer("x", (8,), "int4"), Buffer("y", (8,), "int4")
    body = allocate("t", (8,), lambda t: seq(
        loop("i", 8, lambda i: t.store(i, x[7 - i])),
        loop("i", 8, lambda i: y.store(i, t[i]))), dtype="int4")  # fmt: skip
    data = np.arange(-4, 4).astype(ml_dtypes.int4)
    out = np.zeros(8, ml_dtypes.int4)
    interpret(Kernel("rev", (x, y), body), data, out)
    np.testing.assert_array_equal(out.astype(np.int8), data[::-1].astype(np.int8))


def test_kernels_without_narrow_types_are_left_alone():
    x, y = Buffer("x", (4,)), Buffer("y", (4,), "int32")
    kernel = Kernel("plain", (x, y), loop("i", 4, lambda i: y.store(i, x[i].astype("int32"))))
    assert not uses_narrow(kernel)
    assert legalize(kernel) is kernel


def test_reinterpret_needs_one_width():
    x, y = Buffer("x", (4,)), Buffer("y", (4,), "uint16")
    bad = Kernel("bad", (x, y), loop("i", 4, lambda i: y.store(i, Reinterpret("uint16", x[i]))))
    with pytest.raises(KernelIRError, match="reinterpret needs types of one width"):
        validate(bad)
    z = Buffer("z", (4,), "uint32")
    good = Kernel("good", (x, z), loop("i", 4, lambda i: z.store(i, Reinterpret("uint32", x[i]))))
    assert "reinterpret<uint32>(x[i])" in kernel_str(validate(good))
    out = np.zeros(4, np.uint32)
    interpret(good, np.array([1.0, -2.0, 0.0, np.inf], np.float32), out)
    np.testing.assert_array_equal(out, [0x3F800000, 0xC0000000, 0, 0x7F800000])
