"""Einsum, decomposed by the frontend (tvmc/frontend/einsum.py) into Transpose, Reshape, Gather,
ReduceSum, MatMul and Mul, compiled natively node by node (one case interpreted as CUDA) against
onnxruntime, or against numpy for element types onnxruntime's Einsum lacks.

Tolerances: MatMul and ReduceSum sum in another order than onnxruntime (rtol 1e-5, atol 1e-5
over at most a few dozen terms).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import run_graph_lowered
from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes

TOL = {"rtol": 1e-5, "atol": 1e-5}
CUDA = LoweringTarget(kind="cuda")

# (equation, operand shapes, an op the decomposition must lower)
CASES = [
    ("ij,jk->ik", [(3, 4), (4, 37)], "MatMul"),
    ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)], "MatMul"),
    ("ijk,jil->kl", [(3, 4, 5), (4, 3, 6)], "MatMul"),  # both contracted labels transposed
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 6)], "MatMul"),  # broadcast ellipsis
    ("ij,jk", [(3, 4), (4, 5)], "MatMul"),  # implicit output: ik
    ("ba,ca", [(3, 4), (5, 4)], "MatMul"),  # implicit output: bc
    ("Ab,bC->CA", [(3, 4), (4, 2)], "MatMul"),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)], "MatMul"),
    ("i,i", [(7,), (7,)], "MatMul"),
    ("i,j->ij", [(3,), (5,)], "Mul"),  # outer product: no summed label
    ("ij,ij->ij", [(3, 37), (3, 37)], "Mul"),
    ("ij,ij->i", [(3, 37), (3, 37)], "MatMul"),
    ("ij->ji", [(3, 4)], "Transpose"),
    ("ij->", [(3, 4)], "ReduceSum"),
    ("ijk->ki", [(3, 4, 5)], "ReduceSum"),
    ("ii->i", [(5, 5)], "Gather"),
    ("ii", [(5, 5)], "ReduceSum"),  # the trace
    ("...ii->...i", [(3, 5, 5)], "Gather"),
    ("bii,bj->bij", [(2, 4, 4), (2, 3)], "Gather"),
    ("...,...->...", [(2, 3), (1, 3)], "Mul"),
]


@pytest.mark.parametrize("equation,shapes,lowered", CASES, ids=[c[0] for c in CASES])
def test_einsum(equation, shapes, lowered, rng):
    arrays = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    check("Einsum", arrays, {"equation": equation}, opset=12, expect=lowered, **TOL)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
def test_einsum_dtypes(dtype, rng):
    a, b = (rng.integers(-5, 5, s).astype(dtype) for s in [(2, 3, 4), (4, 2)])
    check("Einsum", {"a": a}, {"equation": "bij,jk->bki"}, {"b": b}, opset=13, expect="MatMul")


def against_numpy(equation: str, *arrays: np.ndarray) -> set[str]:
    """Einsum lowered node by node against np.einsum; returns the ops it lowered to."""
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    model = single_node_model("Einsum", feeds, {"equation": equation}, opset=12)
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (got,) = run_graph_lowered(graph, feeds).values()
    want = np.einsum(equation, *arrays).astype(arrays[0].dtype)
    np.testing.assert_allclose(got, want, **TOL)
    return {n.op for n in graph.nodes}


@pytest.mark.parametrize("dtype", [np.int8, np.uint16])
def test_einsum_types_without_matmul_multiply_and_sum(dtype, rng):
    """MatMul has no int8/uint16: a broadcasting Mul and a ReduceSum."""
    a, b = (rng.integers(0, 5, s).astype(dtype) for s in [(3, 4), (4, 5)])
    assert {"Mul", "ReduceSum"} <= against_numpy("ij,jk->ki", a, b)


def test_einsum_ellipses_of_different_ranks(rng):
    """numpy right-aligns them (onnxruntime refuses unequal ellipsis ranks)."""
    a, b = (rng.standard_normal(s).astype(np.float32) for s in [(2, 1, 3, 4), (5, 4, 6)])
    assert "MatMul" in against_numpy("...ij,...jk->...ik", a, b)
    assert "MatMul" in against_numpy("...ij,...jk", a, b)


def test_einsum_cuda(rng):
    a, b = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 4), (2, 4, 5)])
    attrs = {"equation": "bij,bjk->bki"}
    check("Einsum", {"a": a, "b": b}, attrs, opset=12, expect="MatMul", target=CUDA, **TOL)


def test_einsum_constant_operands_fold(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    check("Einsum", {"a": a}, {"equation": "ij,jk->ik"}, {"w": np.eye(4, dtype=np.float32)},
          opset=12, expect="MatMul", **TOL)  # fmt: skip


@pytest.mark.parametrize(
    "equation,message",
    [("ij,jk->ik", "2 operands for 1 inputs"), ("ijk->i", "term ijk for an input of rank 2"),
     ("i1->i", "not letters"), ("ij->iz", "output labels"), ("ij->ii", "output labels")],
)  # fmt: skip
def test_einsum_bad_equations_name_the_node(equation, message):
    model = single_node_model("Einsum", {"x": np.ones((2, 3), np.float32)},
                              {"equation": equation}, opset=12)  # fmt: skip
    with pytest.raises(ModelError, match=f"Einsum node.*{message}"):
        convert_model(model)
