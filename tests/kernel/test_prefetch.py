"""The Prefetch statement through every pass: printed, validated, checked by the interpreter,
a `llvm.prefetch` on CPUs and nothing on NVPTX, never a change of any value."""

from __future__ import annotations

import numpy as np
import pytest

from tvmc.codegen import emit_cpu, load_jit
from tvmc.codegen.nvptx import emit_ptx
from tvmc.kernel import (
    Buffer,
    Kernel,
    KernelIRError,
    interpret,
    kernel_str,
    loop,
    minimum,
    prefetch,
    ramp,
    seq,
    validate,
)

A, C = Buffer("A", (64,)), Buffer("C", (64,))


def doubled(ahead: int) -> Kernel:
    """C[i] = 2 * A[i], prefetching A `ahead` elements on (clamped to A)."""

    def body(i):
        return seq(prefetch(A, minimum(i + ahead, 63)), C.store(i, A[i] * 2.0))

    return Kernel("doubled", (A, C), loop("i", 64, body))


def test_prefetch_is_printed_and_validated():
    k = doubled(16)
    validate(k)
    assert "prefetch(A[" in kernel_str(k)


def test_a_vector_prefetch_is_rejected():
    k = Kernel("bad", (A, C), prefetch(A, ramp(0, 16)))
    with pytest.raises(KernelIRError, match="one element"):
        validate(k)


def test_the_interpreter_checks_prefetch_addresses():
    a, c = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    interpret(doubled(16), a, c)
    np.testing.assert_array_equal(c, 2 * a)
    past = Kernel("past", (A, C), loop("i", 64, lambda i: prefetch(A, i + 1)))
    with pytest.raises(IndexError, match="out of bounds"):
        interpret(past, a, c)


def test_cpu_code_prefetches_and_computes_the_same():
    artifact = emit_cpu([doubled(16)])
    assert "llvm.prefetch" in artifact.llvm_ir
    a, c = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    load_jit(artifact).run("doubled", a, c)
    np.testing.assert_array_equal(c, 2 * a)


def test_nvptx_drops_the_hint():
    k = Kernel("doubled", (A, C), loop("i", 64, lambda i: seq(
        prefetch(A, i), C.store(i, A[i] * 2.0)), "threadIdx.x"))  # fmt: skip
    assert "prefetch" not in emit_ptx([k]).ptx
