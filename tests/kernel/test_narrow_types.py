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
    let,
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


def test_arithmetic_computes_in_float32_and_rounds_where_kept():
    a, b, y, z = (Buffer(n, (LANES,), "bfloat16") for n in "abyz")
    w = Buffer("w", (LANES,), "float32")

    def body(i):
        value = exp(a[i] * b[i] + a[i])
        return seq(y.store(i, value), w.store(i, (a[i] * b[i]).astype("float32")),
                   let("t", a[i] * b[i], lambda t: z.store(i, t + a[i])))  # fmt: skip

    kernel = Kernel("bf16_math", (a, b, y, z, w), loop("i", LANES, body, kind="vectorized"))
    rng = np.random.default_rng(0)
    x1, x2 = (rng.standard_normal(LANES).astype(ml_dtypes.bfloat16) for _ in range(2))
    out = [np.zeros(LANES, ml_dtypes.bfloat16) for _ in "yz"] + [np.zeros(LANES, np.float32)]
    interpret(kernel, x1, x2, *out)
    f1, f2 = x1.astype(np.float32), x2.astype(np.float32)
    # the whole expression in float32, rounded once where it is stored
    want = np.exp((f1 * f2 + f1).astype(np.float64)).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(bits_of(out[0]), bits_of(want))
    # a let keeps a bfloat16, so rounds; a Cast converts the bfloat16 value, so rounds first
    t = (f1 * f2).astype(ml_dtypes.bfloat16)
    want_z = (t.astype(np.float32) + f1).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(bits_of(out[1]), bits_of(want_z))
    np.testing.assert_array_equal(out[2], t.astype(np.float32))


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
