"""Expression lowering on DAGs: shared subexpressions lowered once, so codegen stays linear."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kernel.examples import TOLERANCE, relu_chain
from tests.kernel.visits import count_visits
from tvmc.codegen import emit_cpu, load_jit
from tvmc.codegen.nvptx import emit_ptx
from tvmc.kernel import Buffer, Kernel, Var, nest, select


def _gpu_relu_chain(depth: int, n: int = 256, threads: int = 128) -> Kernel:
    x, y = Buffer("X", (n,)), Buffer("Y", (n,))

    def point(bx: Var, tx: Var):
        v = x[bx * threads + tx]
        for k in range(depth):
            v = select(v < 0.0, 0.0, v) - 0.01 * (k % 3)
        return y.store(bx * threads + tx, v)

    axes = [("bx", n // threads, "blockIdx.x"), ("tx", threads, "threadIdx.x")]
    return Kernel("gpu_relu_chain", (x, y), nest(axes, point))


@pytest.mark.parametrize(
    "emit",
    [lambda d: emit_cpu([relu_chain(d).kernel]), lambda d: emit_ptx([_gpu_relu_chain(d)])],
    ids=["cpu", "nvptx"],
)
def test_codegen_visits_grow_linearly_with_depth(emit):
    few, many = count_visits(lambda: emit(10)), count_visits(lambda: emit(100))
    assert many <= 12 * few  # as a tree, depth 100 would be 2**90 times depth 10's work


def test_a_100_deep_relu_chain_compiles_and_matches_numpy():
    ex = relu_chain(100)
    arrays = ex.inputs(np.random.default_rng(3))
    load_jit(emit_cpu([ex.kernel])).run(ex.kernel.name, *arrays)
    (want,) = ex.reference(*arrays)
    np.testing.assert_allclose(arrays[-1], want, *TOLERANCE["float32"])
