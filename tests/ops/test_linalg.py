"""MatMul and Gemm references against onnxruntime.

Tolerance: float32 rtol 1e-4 (atol 1e-5): BLAS and onnxruntime sum the K products in different
orders and blockings, so results differ by a few ulps times sqrt(K).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.onnx_helpers import check_node, single_node_model
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.ops import get_op

F32 = {"rtol": 1e-4, "atol": 1e-5}


def random(rng, shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(
    "a,b",
    [
        ((4,), (4, 3)),  # 1-D left: a row, the row dim removed again
        ((3, 4), (4,)),  # 1-D right: a column
        ((4,), (4,)),  # dot product: a scalar
        ((4,), (2, 4, 3)),  # 1-D against a batch
        ((2, 3, 4), (4,)),
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((4, 5), (2, 5, 3)),
        ((2, 1, 3, 4), (5, 4, 6)),  # batch dims broadcast: [2,5]
        ((1, 3, 4), (2, 4, 2)),
    ],
)
def test_matmul_shapes(a, b, rng):
    check_node("MatMul", {"a": random(rng, a), "b": random(rng, b)}, **F32)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("opset", [9, 13])
def test_matmul_dtypes(dtype, opset, rng):
    a = rng.integers(0, 6, (2, 3, 4)).astype(dtype)
    check_node("MatMul", {"a": a, "b": rng.integers(0, 6, (4, 5)).astype(dtype)}, opset=opset)


def test_matmul_float16(rng):
    a, b = random(rng, (3, 8), np.float16), random(rng, (8, 2), np.float16)
    check_node("MatMul", {"a": a, "b": b}, rtol=2e-3, atol=2e-3)  # a few float16 ulps


def test_matmul_constant_weight(rng):
    check_node("MatMul", {"a": random(rng, (2, 4))}, constants={"w": random(rng, (4, 3))}, **F32)


@pytest.mark.parametrize(
    "a,b,message",
    [((3, 4), (5, 6), "inner dimensions differ"), ((3, 4), (3, 4), "K=4")],
)
def test_matmul_errors(a, b, message, rng):
    model = single_node_model("MatMul", {"a": random(rng, a), "b": random(rng, b)})
    with pytest.raises(ModelError, match=message):
        convert_model(model)


C_SHAPES = [None, (), (1,), (5,), (1, 5), (3, 1), (3, 5)]


@pytest.mark.parametrize("trans_a,trans_b", list(itertools.product([0, 1], repeat=2)))
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 2.0), (-1.5, 0.0)])
@pytest.mark.parametrize("c_shape", C_SHAPES)
def test_gemm(trans_a, trans_b, alpha, beta, c_shape, rng):
    m, k, n = 3, 4, 5
    a = random(rng, (k, m) if trans_a else (m, k))
    b = random(rng, (n, k) if trans_b else (k, n))
    attrs = {"transA": trans_a, "transB": trans_b, "alpha": alpha, "beta": beta}
    consts = {} if c_shape is None else {"c": random(rng, c_shape)}
    check_node("Gemm", {"a": a}, attrs, constants={"b": b, **consts}, opset=13, **F32)


@pytest.mark.parametrize("opset", [7, 9, 11])
def test_gemm_old_opsets(opset, rng):
    """Before opset 11 C is required; numpy-style broadcasting of C holds from opset 7."""
    a, b, c = random(rng, (3, 4)), random(rng, (5, 4)), random(rng, (5,))
    check_node("Gemm", {"a": a, "b": b, "c": c}, {"transB": 1, "alpha": 2.0}, opset=opset, **F32)


def test_gemm_runtime_bias(rng):
    a, b, c = random(rng, (3, 4)), random(rng, (4, 5)), random(rng, (3, 5))
    check_node("Gemm", {"a": a, "b": b, "c": c}, {"beta": 0.5}, **F32)


def test_gemm_stays_one_op(rng):
    model = single_node_model(
        "Gemm", {"a": random(rng, (3, 4))}, {"transB": 1, "alpha": 0.5},
        constants={"b": random(rng, (5, 4)), "c": random(rng, (5,))},
    )  # fmt: skip
    (node,) = convert_model(model).nodes
    assert node.op == "Gemm"
    assert node.attrs == {"transA": False, "transB": True, "alpha": 0.5, "beta": 1.0}


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_gemm_integer_reference(dtype, rng):
    """onnxruntime has no integer Gemm kernel: compare with numpy directly."""
    a, b, c = (random(rng, s, dtype) for s in [(4, 3), (4, 2), (2,)])
    attrs = {"transA": True, "transB": False, "alpha": 1.0, "beta": 1.0}
    out = get_op("Gemm").reference(attrs, a, b, c)
    np.testing.assert_array_equal(out, a.T @ b + c)
    assert out.dtype == dtype


@pytest.mark.parametrize(
    "a,b,c,attrs,message",
    [
        ((3, 4), (5, 4), None, {}, "K=4.*K=5"),
        ((3, 4), (4, 5), (3,), {}, r"C of shape \[3\] does not broadcast to \[3,5\]"),
        ((2, 3, 4), (4, 5), None, {}, "2-D A and B"),
    ],
)
def test_gemm_errors(a, b, c, attrs, message, rng):
    inputs = {"a": random(rng, a), "b": random(rng, b)}
    if c is not None:
        inputs["c"] = random(rng, c)
    with pytest.raises(ModelError, match=message):
        convert_model(single_node_model("Gemm", inputs, attrs, opset=13))
