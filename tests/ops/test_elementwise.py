"""Elementwise op references against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from tests.onnx_helpers import check_node

UNARY = [
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Neg",
    "Abs",
    "Erf",
    "HardSwish",
    "Softplus",
    "Floor",
    "Ceil",
]
POSITIVE = ["Sqrt", "Log", "Reciprocal"]


@pytest.mark.parametrize("op", UNARY + POSITIVE)
@pytest.mark.parametrize("shape", [(7,), (2, 3, 5), ()])
def test_unary(op, shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    if op in POSITIVE:
        x = np.abs(x) + 0.1
    check_node(op, {"x": x})


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("LeakyRelu", {}),
        ("LeakyRelu", {"alpha": 0.3}),
        ("Elu", {"alpha": 0.5}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("Gelu", {}),
        ("Gelu", {"approximate": "tanh"}),
    ],
)
def test_unary_with_attributes(op, attrs, rng):
    x = rng.standard_normal((3, 8)).astype(np.float32) * 3
    check_node(op, {"x": x}, attrs, opset=20 if op == "Gelu" else 17)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater"])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((4, 1, 5), (3, 1)), ((5,), ())])
def test_binary_broadcast(op, shapes, rng):
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    if op == "Pow":
        a = np.abs(a) + 0.5
    check_node(op, {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_truncates(dtype):
    a = np.array([7, -7, 7, -7, 0], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3], dtype=dtype)
    check_node("Div", {"a": a, "b": b})


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
def test_variadic(op, rng):
    xs = {
        f"x{i}": rng.standard_normal(s).astype(np.float32)
        for i, s in enumerate([(2, 3), (3,), (1, 3)])
    }
    check_node(op, xs)


@pytest.mark.parametrize("opset", [7, 11, 13])
def test_clip_across_opsets(opset, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32) * 4
    if opset < 11:
        check_node("Clip", {"x": x}, {"min": -1.0, "max": 2.0}, opset=opset)
    else:
        bounds = {"lo": np.array(-1.0, np.float32), "hi": np.array(2.0, np.float32)}
        check_node("Clip", {"x": x}, constants=bounds, opset=opset)
        check_node("Clip", {"x": x}, constants={"hi": bounds["hi"]}, input_order=["x", "", "hi"],
                   opset=opset)  # fmt: skip


def test_prelu_where_cast_not(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    check_node("PRelu", {"x": x}, constants={"slope": np.array([[0.1], [0.2], [0.3]], np.float32)})
    cond = rng.standard_normal((3, 4)) > 0
    check_node("Where", {"c": cond, "x": x, "y": np.float32(1.5) * x})
    check_node("Cast", {"x": x * 10}, {"to": 7})  # int64: truncation toward zero
    check_node("Not", {"c": cond})


@pytest.mark.parametrize("ratio,supported", [(0.0, True), (0.25, False)])
def test_dropout_in_training_mode_passes_only_with_a_ratio_of_0(ratio, supported):
    """Nothing is dropped at ratio 0, so training mode is the identity; above 0 it is random."""
    from onnx import TensorProto, helper, numpy_helper

    from tvmc.errors import UnsupportedModelError
    from tvmc.frontend import convert_model

    consts = [numpy_helper.from_array(np.array(ratio, np.float32), "r"),
              numpy_helper.from_array(np.array(True), "t")]  # fmt: skip
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info(
        "m", TensorProto.BOOL, [2, 3])], consts)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if not supported:
        with pytest.raises(UnsupportedModelError, match="training mode"):
            convert_model(model)
        return
    g = convert_model(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    from tvmc.ops import run_reference

    out = run_reference(g, {"x": x})
    np.testing.assert_array_equal(out["y"], x)
    assert out["m"].all()
