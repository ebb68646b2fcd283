"""The reference interpreter against plain numpy, and its safety checks."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kernel.examples import CPU_EXAMPLES, GPU_EXAMPLES, TOLERANCE
from tvmc.kernel import (
    Barrier,
    Buffer,
    Kernel,
    KernelIRError,
    allocate,
    if_then_else,
    interpret,
    loop,
    python_source,
    seq,
)


@pytest.mark.parametrize("name", sorted({**CPU_EXAMPLES, **GPU_EXAMPLES}))
def test_examples_match_numpy(name):
    ex = {**CPU_EXAMPLES, **GPU_EXAMPLES}[name]()
    arrays = ex.inputs(np.random.default_rng(0))
    interpret(ex.kernel, *arrays)
    for got, want in zip(arrays[-ex.n_outputs :], ex.reference(*arrays)):
        rtol, atol = TOLERANCE.get(got.dtype.name, (0, 0))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_out_of_bounds_access_is_caught():
    a = Buffer("A", (4,))
    k = Kernel("oob", (a,), loop("i", 5, lambda i: a.store(i, 1.0)))
    with pytest.raises(IndexError, match=r"A: index 4 out of bounds \[0, 4\)"):
        interpret(k, np.zeros(4, np.float32))


def test_a_flat_offset_through_the_last_axis_stays_inside_the_buffer():
    """As compiled code addresses it, a last index past its axis reads the rows after it (a
    pointwise conv's planes as one row); past the buffer's end, or on any other axis, it is an
    error still."""
    a, b = Buffer("A", (2, 3)), Buffer("B", (6,))
    flat = Kernel("flat", (a, b), loop("i", 6, lambda i: b.store(i, a[0, i])))
    x, out = np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros(6, np.float32)
    interpret(flat, x, out)
    np.testing.assert_array_equal(out, x.reshape(-1))
    past = Kernel("past", (a, b), loop("i", 6, lambda i: b.store(i, a[1, i])))
    with pytest.raises(IndexError, match=r"A: index .* out of bounds: past its 6 elements"):
        interpret(past, x, out)
    other = Kernel("other", (a, b), loop("i", 3, lambda i: b.store(i, a[i, 0])))
    with pytest.raises(IndexError, match=r"A: index 2 out of bounds \[0, 2\) on axis 0"):
        interpret(other, x, out)


def test_negative_index_is_caught_not_wrapped():
    a = Buffer("A", (4,))
    k = Kernel("neg", (a,), loop("i", 4, lambda i: a.store(i, a[i - 1])))
    with pytest.raises(IndexError, match="index -1"):
        interpret(k, np.zeros(4, np.float32))


def test_scratch_starts_as_nan_so_uninitialised_reads_show():
    y = Buffer("Y", (2,))
    k = Kernel(
        "uninit", (y,), allocate("t", (2,), lambda t: loop("i", 2, lambda i: y.store(i, t[i])))
    )
    out = np.zeros(2, np.float32)
    interpret(k, out)
    assert np.isnan(out).all()


def test_wrong_array_is_rejected():
    ex = CPU_EXAMPLES["add"]()
    with pytest.raises(KernelIRError, match="param A wants a C-contiguous float32"):
        interpret(ex.kernel, np.zeros(3), np.zeros(100, np.float32), np.zeros(100, np.float32))


def test_threads_run_in_lockstep_between_barriers():
    # Each thread reads its neighbour's value after a barrier: wrong if threads ran one by one.
    y = Buffer("Y", (8,))
    k = Kernel(
        "shift",
        (y,),
        allocate(
            "s",
            (8,),
            lambda s: loop(
                "t",
                8,
                lambda t: seq(
                    s.store(t, t.astype("float32")),
                    Barrier(),
                    y.store(t, s[(t + 1) % 8]),
                ),
                kind="threadIdx.x",
            ),
            scope="shared",
        ),
    )
    out = np.zeros(8, np.float32)
    interpret(k, out)
    np.testing.assert_array_equal(out, np.roll(np.arange(8, dtype=np.float32), -1))
    assert "yield" in python_source(k)


def test_barrier_divergence_is_reported():
    y = Buffer("Y", (4,))
    k = Kernel(
        "diverge",
        (y,),
        loop(
            "t",
            4,
            lambda t: if_then_else(t < 2, seq(Barrier(), y.store(t, 1.0))),
            kind="threadIdx.x",
        ),
    )
    with pytest.raises(KernelIRError, match="barrier divergence"):
        interpret(k, np.zeros(4, np.float32))
