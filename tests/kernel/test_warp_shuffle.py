"""WarpShuffle: butterfly exchanges inside a warp, checked by the interpreter (lockstep posts)
and the validator; its NVPTX lowering is tested in tests/codegen/test_nvptx_shuffle.py."""

from __future__ import annotations

import numpy as np
import pytest

from tvmc.kernel import (
    Buffer,
    Kernel,
    KernelIRError,
    allocate,
    interpret,
    kernel_str,
    loop,
    seq,
    shuffle_xor,
    validate,
)


def warp_sum_kernel(rows: int = 3, threads: int = 64, dtype: str = "float32") -> Kernel:
    """Y[r, t] = the sum of X[r, :] over t's warp, by five butterfly steps."""
    x, y = Buffer("X", (rows, threads), dtype), Buffer("Y", (rows, threads), dtype)

    def thread(r, t):
        def body(w, other):
            steps = []
            for mask in (16, 8, 4, 2, 1):
                steps += [shuffle_xor(other, 0, w[0], mask), w.store(0, w[0] + other[0])]
            return seq(w.store(0, x[r, t]), *steps, y.store((r, t), w[0]))

        return allocate(
            "w", (1,), lambda w: allocate("o", (1,), lambda o: body(w, o), dtype), dtype
        )

    block = lambda r: loop("t", threads, lambda t: thread(r, t), kind="threadIdx.x")  # noqa: E731
    return Kernel("warp_sum", (x, y), loop("r", rows, block, kind="blockIdx.x"))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_butterfly_sums_each_warp(dtype, rng):
    k = warp_sum_kernel(dtype=dtype)
    x = (rng.standard_normal((3, 64)) * 10).astype(dtype)
    y = np.zeros_like(x)
    interpret(k, x, y)
    want = x.reshape(3, 2, 32).sum(-1, keepdims=True, dtype=np.float64).repeat(32, -1)
    np.testing.assert_allclose(y, want.reshape(3, 64).astype(dtype), rtol=1e-5)
    assert "shuffle_xor(w[0], 16)" in kernel_str(k)


def test_single_exchange_reads_the_partner_lane():
    x, y = Buffer("X", (32,)), Buffer("Y", (32,))
    k = Kernel(
        "swap",
        (x, y),
        loop(
            "t",
            32,
            lambda t: allocate(
                "o", (1,), lambda o: seq(shuffle_xor(o, 0, x[t], 5), y.store(t, o[0]))
            ),
            kind="threadIdx.x",
        ),
    )
    xv = np.arange(32, dtype=np.float32)
    yv = np.zeros(32, np.float32)
    interpret(k, xv, yv)
    np.testing.assert_array_equal(yv, xv[np.arange(32) ^ 5])


def test_validation():
    x = Buffer("X", (32,))
    with pytest.raises(KernelIRError, match="lane mask"):
        shuffle_xor(Buffer("o", (1,), scope="local"), 0, x[0], 32)
    outside = Kernel("bad", (x,), allocate("o", (1,), lambda o: shuffle_xor(o, 0, x[0], 1)))
    with pytest.raises(KernelIRError, match="threadIdx.x"):
        validate(outside)
    wide = Buffer("W", (32,), "float64")
    k64 = Kernel(
        "f64",
        (wide,),
        loop(
            "t",
            32,
            lambda t: allocate("o", (1,), lambda o: shuffle_xor(o, 0, wide[t], 1), "float64"),
            kind="threadIdx.x",
        ),
    )
    with pytest.raises(KernelIRError, match="shuffles move"):
        validate(k64)
