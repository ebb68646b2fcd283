"""Ops on bfloat16, compiled natively (a few lowered for CUDA and interpreted): computed in
float32 and rounded to bfloat16 where stored.

onnxruntime has no bfloat16 kernels on the CPU, so the expected output is onnxruntime's on the
same values in float32, rounded to bfloat16. Both round one float32 result, so they differ by at
most one bfloat16 ulp (2**-8 relative) where the two float32 results straddle a rounding
boundary: rtol 2**-7.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tests.lowering_helpers import run_graph_lowered
from tests.onnx_helpers import run_onnxruntime, single_node_model
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes

BF16, F32 = ml_dtypes.bfloat16, np.float32
RTOL, ATOL = 2**-7, 1e-6


def check(op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any] | None = None,
          constants: Mapping[str, np.ndarray] | None = None, opset: int = 21,
          **options: Any) -> None:  # fmt: skip
    """`op` on the inputs rounded to bfloat16, compiled by tvmc, against onnxruntime in float32
    on the same values, rounded to bfloat16 (floating inputs only become bfloat16)."""

    def narrow(values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: v.astype(BF16) if v.dtype == F32 else v for k, v in values.items()}

    def wide(values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: v.astype(F32) if v.dtype == BF16 else v for k, v in values.items()}

    ins, consts = narrow(inputs), narrow(constants or {})
    model = single_node_model(op, ins, attrs, consts, opset=opset)
    reference = single_node_model(op, wide(ins), attrs, wide(consts), opset=opset)
    expected = run_onnxruntime(reference, wide(ins))
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    assert op in {n.op for n in graph.nodes} or op in ("Gemm", "Clip"), "not lowered"
    got = run_graph_lowered(graph, ins, **options)
    for output, want in zip(model.graph.output, expected):
        y = got[output.name]
        if want.dtype == F32:
            assert y.dtype == BF16, f"{op}: {y.dtype}"
            np.testing.assert_allclose(y.astype(F32), want.astype(BF16).astype(F32),
                                       rtol=RTOL, atol=ATOL)  # fmt: skip
        else:
            np.testing.assert_array_equal(y, want)


def normal(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(F32)


UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Neg", "Abs", "Floor", "Softplus", "HardSwish"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op, rng):
    check(op, {"x": normal(rng, 2, 3, 37, scale=3)})


@pytest.mark.parametrize("op", ["Sqrt", "Log", "Reciprocal"])
def test_unary_positive(op, rng):
    check(op, {"x": np.abs(normal(rng, 4, 33)) + F32(0.1)})


def test_unary_with_attributes(rng):
    x = normal(rng, 3, 40, scale=3)
    check("LeakyRelu", {"x": x}, {"alpha": 0.3})
    check("Elu", {"x": x}, {"alpha": 0.5})
    check("Gelu", {"x": x}, {"approximate": "tanh"})
    check("Clip", {"x": x}, constants={"lo": np.array(-1, F32), "hi": np.array(2, F32)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"])
def test_binary_broadcasting(op, rng):
    a, b = normal(rng, 2, 3, 17), normal(rng, 3, 1) + F32(3)
    if op == "Pow":
        a = np.abs(a) + F32(0.5)
    check(op, {"a": a, "b": b})


@pytest.mark.parametrize("op", ["Equal", "Less", "GreaterOrEqual"])
def test_comparisons(op, rng):
    a = normal(rng, 4, 19)
    check(op, {"a": a, "b": np.where(rng.random(a.shape) < 0.3, a, normal(rng, 4, 19))})


def test_where_and_data_movement(rng):
    x = normal(rng, 2, 6, 5)
    check("Where", {"c": rng.random((6, 5)) < 0.5, "a": x, "b": normal(rng, 1, 5)})
    check("Transpose", {"x": x}, {"perm": [2, 0, 1]})
    check("Concat", {"a": x, "b": normal(rng, 2, 3, 5)}, {"axis": 1})
    check("Gather", {"x": x}, {"axis": 1}, {"i": np.array([[0, 5], [2, 2]], np.int64)})
    check("Pad", {"x": x}, {"mode": "reflect"}, {"p": np.array([0, 1, 2, 0, 1, 2], np.int64)})


@pytest.mark.parametrize(("m", "k", "n"), [(4, 32, 16), (1, 7, 3), (33, 65, 17)])
def test_matmul(m, k, n, rng):
    check("MatMul", {"a": normal(rng, m, k), "b": normal(rng, k, n)})
    check("MatMul", {"a": normal(rng, 2, m, k)}, constants={"b": normal(rng, k, n)})


def test_gemm(rng):
    a, b, c = normal(rng, 5, 24), normal(rng, 12, 24), normal(rng, 12)
    check("Gemm", {"a": a}, {"transB": 1, "alpha": 0.5, "beta": 2.0}, {"b": b, "c": c})


@pytest.mark.parametrize(("group", "pads"), [(1, [1, 1, 1, 1]), (2, [0, 0, 0, 0])])
def test_conv(group, pads, rng):
    x, w, b = normal(rng, 1, 4, 9, 9), normal(rng, 8, 4 // group, 3, 3), normal(rng, 8)
    check("Conv", {"x": x}, {"group": group, "pads": pads}, {"w": w, "b": b})


def test_pools(rng):
    x = normal(rng, 1, 3, 10, 10)
    check("MaxPool", {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2]})
    check("AveragePool", {"x": x}, {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]})
    check("GlobalAveragePool", {"x": x})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2"])
def test_reductions(op, rng):
    check(op, {"x": normal(rng, 3, 8, 21)}, {"keepdims": 0}, {"axes": np.array([2], np.int64)})


def test_argmax_and_softmax(rng):
    x = normal(rng, 4, 37, scale=2)
    check("ArgMax", {"x": x}, {"axis": 1})
    check("Softmax", {"x": x}, {"axis": -1})
    check("LogSoftmax", {"x": x}, {"axis": -1})


def test_norms(rng):
    x = normal(rng, 2, 4, 24)
    check("LayerNormalization", {"x": x}, {"axis": -1},
          {"s": normal(rng, 24), "b": normal(rng, 24)})  # fmt: skip
    check("InstanceNormalization", {"x": x}, {}, {"s": normal(rng, 4), "b": normal(rng, 4)})


def test_resize(rng):
    scales = np.array([1, 1, 2, 2], F32)
    check("Resize", {"x": normal(rng, 1, 2, 5, 6)}, {"mode": "linear"},
          {"roi": np.array([], F32), "scales": scales})  # fmt: skip


def test_interpreted_and_cuda_lowerings(rng):
    a, b = normal(rng, 9, 40), normal(rng, 40, 24)
    check("MatMul", {"a": a, "b": b}, use_interpreter=True)
    for op, attrs in (("MatMul", {}), ("Softmax", {"axis": -1})):
        inputs = {"a": a, "b": b} if op == "MatMul" else {"x": a}
        check(op, inputs, attrs, target=LoweringTarget(kind="cuda"))
