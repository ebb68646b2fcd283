"""Accuracy of sin, cos, tan, their inverses, the hyperbolic functions and expm1, in result ulps.

Each runs compiled (16 lanes and scalar) over a dense sweep plus special values. The reference is
numpy in float64 for float32 results, numpy in long double (x87, 64-bit significand) for float64
ones. Measured on this machine (max error over the sweeps below; 0.5 is correct rounding):

    function  float32  float64   sweep (plus uniform samples of the same intervals)
    sin/cos   0.501    0.78      [-1e5, 1e5], [-10, 10]; huge arguments over the whole range
    tan       0.501    0.85      as sin (float64 at 5.3e255, the hardest known case: 29)
    asin/acos 0.500    0.89      [-1, 1]
    atan      0.500    0.83      [-1e4, 1e4], [-10, 10]
    sinh/cosh 0.501    1.53      [-89, 89], [-1.5, 1.5] (float64: [-700, 700], [-1, 1])
    asinh     0.500    1.73      [-1e6, 1e6], [-1, 1]
    acosh     0.500    2.28      [1, 1e6], [1, 3]
    atanh     0.500    1.59      [-1, 1]
    expm1     0.500    2.16      [-80, 80], [-1, 1], [-1e-3, 1e-3] (float64: [-700, 700], ...)

The bounds asserted leave room for targets without FMA (llvm.fmuladd then rounds twice).
"""

from __future__ import annotations

import functools
import shutil
import subprocess

import numpy as np
import pytest

from tvmc.codegen import emit_cpu, load_jit
from tvmc.codegen.math_reduce import _BITS, DOUBLE, SINGLE, TWO_OVER_PI
from tvmc.codegen.nvptx import emit_ptx
from tvmc.kernel import CIRCULAR, Buffer, Kernel, call, loop

N = 1 << 14
FUNCTIONS = (*CIRCULAR, "expm1")
NUMPY = {name: getattr(np, "arc" + name[1:] if name[0] == "a" else name) for name in FUNCTIONS}
SWEEPS = {
    "sin": [(-1e5, 1e5), (-10, 10)],
    "cos": [(-1e5, 1e5), (-10, 10)],
    "tan": [(-1e5, 1e5), (-10, 10)],
    "asin": [(-1, 1)],
    "acos": [(-1, 1)],
    "atan": [(-1e4, 1e4), (-10, 10)],
    "sinh": [(-89, 89), (-1.5, 1.5)],
    "cosh": [(-89, 89), (-1.5, 1.5)],
    "asinh": [(-1e6, 1e6), (-1, 1)],
    "acosh": [(1, 1e6), (1, 3)],
    "atanh": [(-1, 1)],
    "expm1": [(-80, 80), (-1, 1), (-1e-3, 1e-3)],
}
WIDE_SWEEPS = {name: [(-700, 700), (-1, 1), (-1e-3, 1e-3)] for name in ("sinh", "cosh", "expm1")}
BOUND = {"float32": 0.51, "float64": 3.0}
LONG_DOUBLE = np.finfo(np.longdouble).nmant >= 63
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5, -0.5, 1e-30, -1e-30, 1e-40,
           88.0, 89.5, -89.5, 709.0, 710.4, 711.0, 1e20, -1e20, 3.4e38, 1e300, 1e-310,
           np.pi / 2, np.pi, 2.0**28, 1.6e6]  # fmt: skip


@functools.cache
def _module(name: str, lanes: int, dtype: str):
    x, y = Buffer("X", (N,), dtype), Buffer("Y", (N,), dtype)
    kind = "vectorized" if lanes > 1 else "serial"

    def inner(o):
        return loop("l", lanes, lambda l: y.store(o * lanes + l, call(name, x[o * lanes + l])),
                    kind=kind)  # fmt: skip

    return load_jit(emit_cpu([Kernel(f"f_{name}", (x, y), loop("o", N // lanes, inner))]))


def run(name: str, x: np.ndarray, lanes: int = 16) -> np.ndarray:
    """`name` over `x` (any length), compiled."""
    out = np.empty_like(x)
    for start in range(0, len(x), N):
        part = x[start : start + N]
        chunk, y = np.zeros(N, x.dtype), np.zeros(N, x.dtype)
        chunk[: len(part)] = part
        _module(name, lanes, x.dtype.name).run(f"f_{name}", chunk, y)
        out[start : start + len(part)] = y[: len(part)]
    return out


def ulp_errors(name: str, x: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - exact| in ulps of the rounded exact value (non-finite results: 0 if equal)."""
    wide = np.longdouble if x.dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        exact = NUMPY[name](x.astype(wide))
        rounded = exact.astype(x.dtype)
        spacing = np.spacing(np.abs(rounded)).astype(wide)
        err = np.abs(got.astype(wide) - exact) / spacing
    finite = np.isfinite(rounded)
    same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
    return np.where(finite, err, np.where(same, 0.0, np.inf)).astype(np.float64)


@pytest.mark.parametrize("lanes", [16, 1])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_accuracy_over_a_dense_sweep(name, dtype, lanes):
    if dtype == "float64" and not LONG_DOUBLE:
        pytest.skip("no long double wider than float64 for the reference")
    sweeps = WIDE_SWEEPS.get(name, SWEEPS[name]) if dtype == "float64" else SWEEPS[name]
    x = np.concatenate([np.linspace(lo, hi, N, dtype=dtype) for lo, hi in sweeps])
    err = ulp_errors(name, x, run(name, x, lanes))
    worst = int(err.argmax())
    assert err.max() <= BOUND[dtype], f"{name}: {err.max():.3f} ulp at x={x[worst]!r}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_special_values(name, dtype):
    if dtype == "float64" and not LONG_DOUBLE:
        pytest.skip("no long double wider than float64 for the reference")
    with np.errstate(all="ignore"):
        x = np.array(SPECIAL, dtype)
    got = run(name, x)
    err = ulp_errors(name, x, got)
    assert err.max() <= BOUND[dtype], dict(zip(x[err > BOUND[dtype]], got[err > BOUND[dtype]]))
    odd = name in ("sin", "tan", "asin", "atan", "sinh", "asinh", "atanh", "expm1")
    if odd:  # odd functions keep the sign of zero
        assert np.signbit(got[1]) and not np.signbit(got[0])
    np.testing.assert_array_equal(run(name, x, lanes=1), got)


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_huge_arguments_reduce_exactly(name, dtype, rng):
    """Payne-Hanek beyond the Cody-Waite range: random bit patterns of every exponent."""
    if dtype == "float64" and not LONG_DOUBLE:
        pytest.skip("no long double wider than float64 for the reference")
    if dtype == "float32":
        bits = rng.integers(0x4E000000, 0x7F800000, N, dtype=np.uint32)
    else:
        bits = rng.integers(0x4130000000000000, 0x7FF0000000000000, N, dtype=np.uint64)
    x = bits.view(dtype)
    x = np.concatenate([x, -x])
    err = ulp_errors(name, x, run(name, x))
    assert err.max() <= BOUND[dtype], f"{name}: {err.max():.3f} ulp at x={x[int(err.argmax())]!r}"


def test_near_multiples_of_half_pi_keep_their_digits():
    """The remainders that cancel most: float64 nearest to k * pi/2, inside and past 2**20."""
    if not LONG_DOUBLE:
        pytest.skip("no long double wider than float64 for the reference")
    k = np.round(np.linspace(1, 4e6, N))
    near = k * (np.pi / 2)
    x = np.concatenate([near, np.nextafter(near, 0), np.nextafter(near, np.inf)])
    for name in ("sin", "cos"):
        err = ulp_errors(name, x, run(name, x))
        assert err.max() <= BOUND["float64"], f"{name}: {err.max():.3f} ulp"


def _two_over_pi_bits(bits: int) -> int:
    """floor(2/pi * 2**bits) from Machin's formula in integers."""

    def arctan_inv(n: int, scale: int) -> int:
        total, term, k, sign = 0, (1 << scale) // n, 1, 1
        while term:
            total, term, k, sign = total + sign * (term // k), term // (n * n), k + 2, -sign
        return total

    scale = bits + 64
    pi = 4 * (4 * arctan_inv(5, scale) - arctan_inv(239, scale))
    return ((2 << (2 * scale)) // pi) >> (scale - bits)


def test_the_digits_of_two_over_pi():
    assert TWO_OVER_PI == _two_over_pi_bits(_BITS)
    assert len(SINGLE.values()) == 3 * 105 and len(DOUBLE.values()) == 4 * 1027


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptx_assembles_without_libm(tmp_path):
    def kernel(name: str, dtype: str) -> Kernel:
        x, y = Buffer("X", (256,), dtype), Buffer("Y", (256,), dtype)
        body = loop("t", 256, lambda t: y.store(t, call(name, x[t])), kind="threadIdx.x")
        return Kernel(f"k_{name}_{dtype}", (x, y), body)

    dtypes = ("float32", "float64", "float16")
    ptx = emit_ptx([kernel(name, dtype) for dtype in dtypes for name in FUNCTIONS]).ptx
    assert "call" not in ptx.split(".entry")[0]  # no external functions declared
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    done = subprocess.run(["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
