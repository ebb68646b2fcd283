"""Accuracy of the polynomial float32 math functions, scalar and vector, against float64."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from tvmc.codegen import emit_cpu, load_jit
from tvmc.kernel import Buffer, Kernel, call, loop

N = 4096
_erf = np.vectorize(math.erf)

# name -> (input range, float64 reference, max relative error allowed). Measured on Zen 4:
# exp 7.7e-8, log 7.4e-8, tanh 2.3e-7, erf 3.2e-7, sigmoid 1.2e-7; the bounds leave room for
# targets without FMA (llvm.fmuladd then rounds twice).
CASES = {
    "exp": ((-87.0, 88.0), np.exp, 3e-7),
    "log": ((1e-30, 1e30), np.log, 3e-7),
    "tanh": ((-10.0, 10.0), np.tanh, 1e-6),
    "erf": ((-5.0, 5.0), _erf, 1e-6),
    "sigmoid": ((-80.0, 80.0), lambda x: 1 / (1 + np.exp(-x)), 1e-6),
}


@functools.cache
def _module(name: str, lanes: int):
    x, y = Buffer("X", (N,)), Buffer("Y", (N,))
    kind = "vectorized" if lanes > 1 else "serial"
    body = loop(
        "o",
        N // lanes,
        lambda o: loop(
            "l", lanes, lambda l: y.store(o * lanes + l, call(name, x[o * lanes + l])), kind=kind
        ),
    )
    return load_jit(emit_cpu([Kernel(f"f_{name}", (x, y), body)]))


def _inputs(lo: float, hi: float) -> np.ndarray:
    if lo > 0:  # log: spread over orders of magnitude
        return np.geomspace(lo, hi, N).astype(np.float32)
    return np.linspace(lo, hi, N).astype(np.float32)


@pytest.mark.parametrize("lanes", [1, 16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_relative_error(name, lanes):
    (lo, hi), ref, tol = CASES[name]
    x = _inputs(lo, hi)
    y = np.zeros(N, np.float32)
    _module(name, lanes).run(f"f_{name}", x, y)
    want = ref(x.astype(np.float64))
    rel = np.abs(y - want) / np.maximum(np.abs(want), np.finfo(np.float32).tiny)
    assert rel.max() < tol, f"{name}: max rel error {rel.max():.2e} at x={x[rel.argmax()]}"


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "erf", "sigmoid"])
def test_special_values(name):
    x = np.zeros(N, np.float32)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0, 1e-40], np.float32)
    x[: len(special)] = special
    y = np.zeros(N, np.float32)
    _module(name, 16).run(f"f_{name}", x, y)
    with np.errstate(all="ignore"):
        want = CASES[name][1](special.astype(np.float64)).astype(np.float32)
    got = y[: len(special)]
    if name == "exp":
        want[-2] = 0.0  # e**-100 is subnormal: flushed to zero by design
    if name == "log":
        want[-1] = np.log(np.float64(1e-40)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30, equal_nan=True)


def test_tanh_saturates_to_exactly_one():
    """Regression: the rational approximation alone stops at 1 - 2**-22."""
    import numpy as np

    from tvmc.codegen import emit_cpu, load_shared
    from tvmc.kernel import Buffer, Kernel, loop, tanh

    x, y = Buffer("x", (4,)), Buffer("y", (4,))
    kernel = Kernel("tanh_sat", (x, y), loop("i", 4, lambda i: y.store(i, tanh(x[i]))))
    xs = np.array([9.0, 35.0, -9.5, -100.0], np.float32)
    ys = np.zeros(4, np.float32)
    load_shared(emit_cpu([kernel])).run("tanh_sat", xs, ys)
    np.testing.assert_array_equal(ys, [1.0, 1.0, -1.0, -1.0])
