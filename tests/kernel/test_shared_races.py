"""The interpreter's shared-memory race check: between two barriers a GPU runs its threads in
any order, so a shared element that one thread writes and another reads or writes in the same
phase is an error, even where the interpreter's own order happens to give the right answer."""

from __future__ import annotations

import numpy as np
import pytest

from tvmc.kernel import (
    Barrier,
    Buffer,
    Kernel,
    KernelIRError,
    allocate,
    interpret,
    loop,
    seq,
    shuffle_xor,
)

T = 32


def neighbour_kernel(*phases) -> Kernel:
    """Y[t] = the shared element thread t+1 wrote; `phases` puts barriers between the steps."""
    x, y = Buffer("X", (T,)), Buffer("Y", (T,))

    def thread(s, t):
        write = s.store(t, x[t] * 2.0)
        read = y.store(t, s[(t + 1) % T])
        return seq(*(p(write, read) for p in phases))

    body = allocate("s", (T,), lambda s: loop("t", T, lambda t: thread(s, t), kind="threadIdx.x"),
                    "float32", "shared")  # fmt: skip
    return Kernel("neighbour", (x, y), loop("b", 1, lambda b: body, kind="blockIdx.x"))


def run(kernel: Kernel) -> np.ndarray:
    x = np.arange(T, dtype=np.float32)
    y = np.zeros(T, np.float32)
    interpret(kernel, x, y)
    return y


def test_a_barrier_between_write_and_read_is_race_free():
    y = run(neighbour_kernel(lambda w, r: seq(w, Barrier(), r)))
    np.testing.assert_array_equal(y, 2.0 * np.roll(np.arange(T, dtype=np.float32), -1))


def test_reading_another_threads_write_without_a_barrier_is_a_race():
    # the interpreter runs thread 0 first, so thread 0 alone would even read stale NaN; the
    # other 31 read a finished write: the check must not depend on that order
    with pytest.raises(KernelIRError, match="race on s "):
        run(neighbour_kernel(lambda w, r: seq(w, r), lambda w, r: Barrier()))


def test_overwriting_what_another_thread_read_is_a_race():
    x, y = Buffer("X", (T,)), Buffer("Y", (T,))

    def thread(s, t):
        return seq(s.store(t, x[t]), Barrier(), y.store(t, s[(t + 1) % T]), s.store(t, 0.0),
                   Barrier())  # fmt: skip

    body = allocate("s", (T,), lambda s: loop("t", T, lambda t: thread(s, t), kind="threadIdx.x"),
                    "float32", "shared")  # fmt: skip
    with pytest.raises(KernelIRError, match="writes what another thread read"):
        run(Kernel("war", (x, y), body))


def test_a_thread_may_reuse_its_own_elements_and_others_may_only_read():
    x, y = Buffer("X", (T,)), Buffer("Y", (T,))

    def thread(s, t):
        return seq(s.store(t, x[t]), s.store(t, s[t] + 1.0), Barrier(), y.store(t, s[0] + s[t]))

    body = allocate("s", (T,), lambda s: loop("t", T, lambda t: thread(s, t), kind="threadIdx.x"),
                    "float32", "shared")  # fmt: skip
    np.testing.assert_array_equal(run(Kernel("own", (x, y), body)), np.arange(T) + 2.0)


def test_a_warp_shuffle_is_no_barrier_for_shared_memory():
    x, y = Buffer("X", (T,)), Buffer("Y", (T,))

    def thread(s, o, t):
        return seq(s.store(t, x[t]), shuffle_xor(o, 0, x[t], 1), y.store(t, s[(t + 1) % T] + o[0]),
                   Barrier())  # fmt: skip

    def block(s):
        return loop("t", T, lambda t: allocate("o", (1,), lambda o: thread(s, o, t)),
                    kind="threadIdx.x")  # fmt: skip

    with pytest.raises(KernelIRError, match="race"):
        run(Kernel("shfl", (x, y), allocate("s", (T,), block, "float32", "shared")))


def test_threads_that_never_meet_are_checked_too():
    x, y = Buffer("X", (T,)), Buffer("Y", (T,))

    def thread(s, t):  # no barrier anywhere: threads run as a plain loop
        return seq(s.store(t, x[t]), y.store(t, s[(t + T - 1) % T]))

    body = allocate("s", (T,), lambda s: loop("t", T, lambda t: thread(s, t), kind="threadIdx.x"),
                    "float32", "shared")  # fmt: skip
    with pytest.raises(KernelIRError, match="race"):
        run(Kernel("loose", (x, y), body))
