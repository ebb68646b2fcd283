"""Shape arithmetic and generated weights fold to constants while converting."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.onnx_helpers import run_onnxruntime
from tvmc.frontend import convert_model
from tvmc.ops import run_reference
from tvmc.passes import IMPORT_PIPELINE, run_passes


def view_model(opset: int, batch: int | str = 2) -> helper.ModelProto:
    """x.view(x.size(0), -1) as PyTorch exports it, times a ConstantOfShape weight, plus a Range."""

    def const(name: str, value) -> helper.NodeProto:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))

    if opset >= 13:
        unsqueeze = helper.make_node("Unsqueeze", ["dim0", "axes0"], ["dim0_1d"])
    else:
        unsqueeze = helper.make_node("Unsqueeze", ["dim0"], ["dim0_1d"], axes=[0])
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        const("zero", np.array(0, np.int64)),
        helper.make_node("Gather", ["shape", "zero"], ["dim0"], axis=0),
        const("axes0", np.array([0], np.int64)),
        unsqueeze,
        const("minus1", np.array([-1], np.int64)),
        helper.make_node("Concat", ["dim0_1d", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        const("wshape", np.array([1, 12], np.int64)),
        helper.make_node(
            "ConstantOfShape",
            ["wshape"],
            ["w"],
            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5]),
        ),  # fmt: skip
        helper.make_node("Mul", ["flat", "w"], ["scaled"]),
        const("start", np.array(0.0, np.float32)),
        const("limit", np.array(12.0, np.float32)),
        const("delta", np.array(1.0, np.float32)),
        helper.make_node("Range", ["start", "limit", "delta"], ["ramp"]),
        helper.make_node("Add", ["scaled", "ramp"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "view",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


@pytest.mark.parametrize("opset", [11, 13])
def test_shape_chain_and_generated_weights_fold(opset, rng):
    model = view_model(opset)
    graph = convert_model(model)
    assert graph.op_counts() == {"Add": 1, "Mul": 1, "Reshape": 1}
    (reshape,) = [n for n in graph.nodes if n.op == "Reshape"]
    assert reshape.attrs["shape"] == (2, 12)
    graph = run_passes(graph, IMPORT_PIPELINE, verify=True)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (expected,) = run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(run_reference(graph, {"x": x})["y"], expected, rtol=1e-6)


def test_dynamic_batch_resolves_from_input_shapes(rng):
    model = view_model(13, batch="N")
    graph = convert_model(model, shape_dict={"x": (5, 3, 4)})
    (reshape,) = [n for n in graph.nodes if n.op == "Reshape"]
    assert reshape.attrs["shape"] == (5, 12)
    x = rng.standard_normal((5, 3, 4)).astype(np.float32)
    (expected,) = run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(run_reference(graph, {"x": x})["y"], expected, rtol=1e-6)
