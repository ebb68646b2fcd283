"""Loading ONNX files: inputs, opsets, external data, and every user error."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tvmc.errors import InputError, ModelError, UnsupportedModelError
from tvmc.frontend.converters import CONVERTERS


def relu_model(shape=(1, 3), opset=13, extra_nodes=(), dim_param=False):
    dims = ["N", *shape[1:]] if dim_param else list(shape)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu0"), *extra_nodes]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def save(model, tmp_path, name="m.onnx"):
    path = tmp_path / name
    onnx.save(model, path)
    return str(path)


def test_load_keeps_names_and_shapes(tmp_path):
    model = tvmc.load(save(relu_model((2, 5)), tmp_path))
    assert list(model.inputs) == ["x"] and list(model.outputs) == ["y"]
    assert model.inputs["x"].shape == (2, 5)


def test_input_shapes_and_dtypes_override(tmp_path):
    path = save(relu_model(dim_param=True), tmp_path)
    with pytest.raises(UnsupportedModelError, match=r"dynamic shape \['N', 3\].*--input-shapes"):
        tvmc.load(path)
    model = tvmc.load(path, shape_dict={"x": (4, 3)}, dtype_dict={"x": "float64"})
    assert str(model.inputs["x"]) == "float64[4,3]" and str(model.outputs["y"]) == "float64[4,3]"
    with pytest.raises(InputError, match=r"names \['nope'\].*its inputs: \['x'\]"):
        tvmc.load(path, shape_dict={"nope": (1,)})


def test_unsupported_ops_are_listed_once(tmp_path):
    extra = [
        helper.make_node("FooBar", ["y"], ["f1"], name="foo_a"),
        helper.make_node("FooBar", ["f1"], ["f2"], name="foo_b"),
        helper.make_node("Baz", ["f2"], ["f3"], name="baz", domain="com.example"),
    ]
    path = save(relu_model(extra_nodes=extra), tmp_path)
    with pytest.raises(UnsupportedModelError) as info:
        tvmc.load(path)
    message = str(info.value)
    assert "FooBar (2 nodes, first 'foo_a')" in message
    assert "com.example.Baz (1 node, first 'baz')" in message


def test_narrow_types_load_and_unsupported_ones_are_named(tmp_path):
    def cast_model(src, to):
        x = helper.make_tensor_value_info("x", src, [2])
        y = helper.make_tensor_value_info("y", to, [2])
        node = helper.make_node("Cast", ["x"], ["y"], to=to)
        graph = helper.make_graph([node], "g", [x], [y])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])

    model = tvmc.load(save(cast_model(TensorProto.BFLOAT16, TensorProto.INT4), tmp_path))
    assert str(model.inputs["x"]) == "bfloat16[2]" and str(model.outputs["y"]) == "int4[2]"
    for src, to, what in [(TensorProto.FLOAT6E2M3, TensorProto.FLOAT, "input 'x'"),
                          (TensorProto.FLOAT, TensorProto.STRING, "its 'to'")]:  # fmt: skip
        with pytest.raises(
            UnsupportedModelError,
            match=f"{what} has element type (FLOAT6E2M3|"
            "STRING), which tvmc does not support; supported: .*bfloat16",
        ):
            tvmc.load(save(cast_model(src, to), tmp_path))


def test_opset_too_old(tmp_path):
    with pytest.raises(UnsupportedModelError, match="opset 6"):
        tvmc.load(save(relu_model(opset=6), tmp_path))


@pytest.mark.parametrize("content", [b"", b"\x00garbage\xff" * 10])
def test_bad_files(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelError):
        tvmc.load(str(path))


def test_truncated_model(tmp_path):
    x = np.ones((64, 64), np.float32)
    model = relu_model((64, 64))
    model.graph.initializer.append(numpy_helper.from_array(x, "w"))
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        tvmc.load(str(path))


def test_missing_and_directory(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        tvmc.load(str(tmp_path / "none.onnx"))
    with pytest.raises(ModelError, match="is a directory"):
        tvmc.load(str(tmp_path))


def test_external_data(tmp_path):
    w = np.arange(4096, dtype=np.float32).reshape(64, 64)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [x],
        [y],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, location="ext.bin", size_threshold=0)
    assert (tmp_path / "ext.bin").exists()
    loaded = tvmc.load(str(path))
    np.testing.assert_array_equal(loaded.params["w"], w)
    (tmp_path / "ext.bin").unlink()
    with pytest.raises(ModelError, match="external data"):
        tvmc.load(str(path))


def test_unsupported_ops_inside_subgraphs_are_named(tmp_path):
    """A detector's NonMaxSuppression in an If branch, an unknown op in a Loop body nested in the
    other branch: one error names both and where they sit."""
    boxes = helper.make_tensor_value_info("selected", TensorProto.INT64, None)
    nms = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"], name="nms")
    then = helper.make_graph([nms], "detect", [], [boxes])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("FooBar", ["v"], ["w"])],
        "body",
        [helper.make_tensor_value_info(n, t, None)
         for n, t in (("i", TensorProto.INT64), ("c", TensorProto.BOOL), ("v", TensorProto.FLOAT))],
        [helper.make_tensor_value_info(n, t, None)
         for n, t in (("c_out", TensorProto.BOOL), ("w", TensorProto.FLOAT))],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["", "", "boxes"], ["looped"], body=body, name="refine")
    other = helper.make_graph([loop], "other", [], [helper.make_empty_tensor_value_info("looped")])
    branch = helper.make_node("If", ["c0"], ["y2"], then_branch=then, else_branch=other,
                              name="pick")  # fmt: skip
    extra = [helper.make_node("Greater", ["y", "y"], ["c0"]), branch]
    with pytest.raises(UnsupportedModelError) as info:
        tvmc.load(save(relu_model(extra_nodes=extra), tmp_path))
    message = str(info.value)
    if "NonMaxSuppression" not in CONVERTERS:  # until someone adds it
        assert "NonMaxSuppression (1 node, first 'nms' in If 'pick'.then_branch)" in message
    assert "FooBar (1 node, first 'w' in If 'pick'.else_branch > Loop 'refine'.body)" in message
