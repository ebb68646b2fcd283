"""Tensor and shape op references (and their converters) against onnxruntime, across opsets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from tests.onnx_helpers import check_node, run_tvmc_reference, single_node_model
from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend import convert_model

I64 = np.int64


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=I64)


@pytest.fixture
def x(rng) -> np.ndarray:
    return rng.standard_normal((2, 3, 4, 5)).astype(np.float32)


# ---- Concat / Split ------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4])
def test_concat(axis, rng):
    shapes = [[2, 3, 4, 5] for _ in range(3)]
    for i, s in enumerate(shapes):
        s[axis] += i
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    check_node("Concat", {"a": a, "b": b}, {"axis": axis}, constants={"c": c})


@pytest.mark.parametrize(
    "opset,attrs,split,outputs",
    [
        (11, {"axis": 1}, None, 3),  # equal parts, one per output
        (11, {"axis": -1, "split": [1, 4]}, None, 2),
        (13, {"axis": 3}, [2, 0, 3], 3),  # sizes as an input, an empty part
        (13, {"axis": 0}, None, 2),
        (18, {"axis": 3, "num_outputs": 2}, None, 2),  # uneven: 3 + 2
        (18, {"axis": 1, "num_outputs": 2}, None, 2),  # uneven: 2 + 1
    ],
)
def test_split(opset, attrs, split, outputs, x):
    constants = {"split": i64(*split)} if split is not None else {}
    check_node("Split", {"x": x}, attrs, constants, num_outputs=outputs, opset=opset)


def test_split_uneven_before_18_is_an_error(x):
    model = single_node_model("Split", {"x": x}, {"axis": 3}, num_outputs=2, opset=13)
    with pytest.raises(ModelError, match="does not split into 2 equal parts"):
        convert_model(model)


# ---- Slice ---------------------------------------------------------------------------------------
BIG = np.iinfo(np.int64).max


@pytest.mark.parametrize(
    "starts,ends,axes,steps",
    [
        ([0, 1], [2, 3], None, None),
        ([1], [-1], [3], None),
        ([-100, 2], [100, BIG], [1, 2], [1, 1]),
        ([-1], [-BIG], [3], [-1]),  # reversed axis
        ([4, 3], [0, -100], [3, 2], [-2, -1]),
        ([0, 1], [5, 4], [-1, 1], [2, 3]),
        ([3], [1], [2], [1]),  # empty
    ],
)
@pytest.mark.parametrize("opset", [10, 13])
def test_slice_inputs(starts, ends, axes, steps, opset, x):
    constants = {"starts": i64(*starts), "ends": i64(*ends)}
    order = ["x", "starts", "ends"]
    if axes is not None:
        constants["axes"] = i64(*axes)
        order.append("axes")
    if steps is not None:
        constants["steps"] = i64(*steps)
        order += [] if axes is not None else [""]
        order.append("steps")
    check_node("Slice", {"x": x}, constants=constants, input_order=order, opset=opset)


@pytest.mark.parametrize("axes", [None, [0, 3]])
def test_slice_attributes_opset_9(axes, x):
    attrs = {"starts": [1, -3], "ends": [BIG, -1]}
    if axes is not None:
        attrs["axes"] = axes
    check_node("Slice", {"x": x}, attrs, opset=9)


@settings(max_examples=40, deadline=None)
@given(
    bounds=st.lists(
        st.tuples(st.integers(-8, 8), st.integers(-8, 8), st.sampled_from([-3, -2, -1, 1, 2, 3])),
        min_size=4,
        max_size=4,
    )
)
def test_slice_random_bounds(bounds):
    data = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    starts, ends, steps = zip(*bounds)
    constants = {"s": i64(*starts), "e": i64(*ends), "a": i64(0, 1, 2, 3), "st": i64(*steps)}
    check_node("Slice", {"x": data}, constants=constants)


# ---- Reshape family ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [[6, 20], [0, -1], [-1], [2, 0, 4, 5], [1, 2, 1, 60], [120]])
def test_reshape(shape, x):
    check_node("Reshape", {"x": x}, constants={"shape": i64(*shape)})


def test_reshape_allowzero(rng):
    empty = np.zeros((0, 3), np.float32)
    check_node("Reshape", {"x": empty}, {"allowzero": 1}, {"s": i64(3, 0)}, opset=14)


def test_reshape_bad_target_names_the_node(x):
    model = single_node_model("Reshape", {"x": x}, constants={"shape": i64(7, -1)})
    with pytest.raises(ModelError, match=r"Reshape node .*cannot reshape \[2, 3, 4, 5\]"):
        convert_model(model)


@pytest.mark.parametrize("axis", [0, 1, 2, 4, -1, -4])
def test_flatten(axis, x):
    check_node("Flatten", {"x": x}, {"axis": axis}, opset=13)


@pytest.mark.parametrize("perm", [None, [0, 2, 3, 1], [3, 1, 0, 2]])
def test_transpose(perm, x):
    check_node("Transpose", {"x": x}, {} if perm is None else {"perm": perm})


@pytest.mark.parametrize("axes", [None, [2], [0, -2]])
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze(axes, opset, rng):
    data = rng.standard_normal((1, 3, 1, 5)).astype(np.float32)
    if opset < 13 or axes is None:
        check_node("Squeeze", {"x": data}, {} if axes is None else {"axes": axes}, opset=opset)
    else:
        check_node("Squeeze", {"x": data}, constants={"axes": i64(*axes)}, opset=opset)


def test_squeeze_wide_axis_is_an_error(x):
    model = single_node_model("Squeeze", {"x": x}, constants={"axes": i64(1)}, opset=13)
    with pytest.raises(ModelError, match="size is not 1"):
        convert_model(model)


@pytest.mark.parametrize("axes", [[0], [-1], [0, 4], [1, -1, 3]])
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(axes, opset, rng):
    data = rng.standard_normal((3, 4, 2)).astype(np.float32)
    if opset < 13:
        check_node("Unsqueeze", {"x": data}, {"axes": axes}, opset=opset)
    else:
        check_node("Unsqueeze", {"x": data}, constants={"axes": i64(*axes)}, opset=opset)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode, rng):
    data = rng.standard_normal((2, 8, 3, 4)).astype(np.float32)
    check_node("DepthToSpace", {"x": data}, {"blocksize": 2, "mode": mode}, opset=13)


def test_space_to_depth(rng):
    data = rng.standard_normal((2, 3, 6, 4)).astype(np.float32)
    check_node("SpaceToDepth", {"x": data}, {"blocksize": 2}, opset=13)


# ---- Gather / Expand / Tile ----------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("indices", [[0, -1, 1], [[1, 0], [-2, 1]], 1])
@pytest.mark.parametrize("runtime_indices", [False, True])
def test_gather(axis, indices, runtime_indices, x):
    idx = np.array(indices, dtype=I64)
    if runtime_indices:
        check_node("Gather", {"x": x, "i": idx}, {"axis": axis})
    else:
        check_node("Gather", {"x": x}, {"axis": axis}, constants={"i": idx})


def test_gather_int32_indices_of_constant_data(rng):
    table = rng.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[3, 9, -10]], dtype=np.int32)
    check_node("Gather", {"ids": ids}, constants={"table": table}, input_order=["table", "ids"])


@pytest.mark.parametrize(
    "in_shape,shape", [((3, 1), (2, 1, 6)), ((1, 4), (3, 1)), ((2, 3), (3,)), ((5,), ())]
)
def test_expand(in_shape, shape, rng):
    data = rng.standard_normal(in_shape).astype(np.float32)
    check_node("Expand", {"x": data}, constants={"shape": np.array(shape, dtype=I64)})


@pytest.mark.parametrize("repeats", [[1, 1, 1, 1], [2, 1, 3, 1], [1, 0, 1, 2]])
def test_tile(repeats, x):
    check_node("Tile", {"x": x}, constants={"r": i64(*repeats)})


# ---- Pad -----------------------------------------------------------------------------------------
PADS = [[0, 1, 2, 0, 1, 0, 2, 3], [1, 0, 0, 1, 0, 2, 1, 0]]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", PADS)
def test_pad_attributes_opset_7(mode, pads, x):
    check_node("Pad", {"x": x}, {"pads": pads, "mode": mode, "value": 1.5}, opset=7)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", PADS)
def test_pad_inputs_opset_13(mode, pads, x):
    constants = {"pads": i64(*pads)}
    if mode == "constant":
        constants["value"] = np.array(-2.0, np.float32)
    check_node("Pad", {"x": x}, {"mode": mode}, constants, opset=13)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_negative_crops(mode, x):
    pads = i64(0, -1, 1, 0, 0, 1, -1, -1)
    check_node("Pad", {"x": x}, {"mode": mode}, constants={"pads": pads}, opset=13)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_axes_opset_19(mode, x):
    constants = {"pads": i64(1, 2, 3, 1), "value": np.array(0.5, np.float32), "axes": i64(-1, 1)}
    check_node("Pad", {"x": x}, {"mode": mode}, constants, opset=19)


def test_pad_integer_data(rng):
    data = rng.integers(-9, 9, (3, 4)).astype(np.int32)
    constants = {"pads": i64(1, 1, 0, 2), "value": np.array(7, np.int32)}
    check_node("Pad", {"x": data}, constants=constants, opset=13)


# ---- values known at conversion time -------------------------------------------------------------
@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"start": -3, "end": -1}, {"end": 10}])
def test_shape(attrs, x):
    check_node("Shape", {"x": x}, attrs, opset=15 if attrs else 13)


def test_size(x):
    check_node("Size", {"x": x})


@pytest.mark.parametrize(
    "value", [None, np.array([2.5], np.float32), np.array([7], I64), np.array([1], np.int32)]
)
def test_constant_of_shape(value):
    attrs = (
        {} if value is None else {"value": helper.make_tensor("v", _onnx_type(value), [1], value)}
    )
    check_node("ConstantOfShape", {}, attrs, constants={"shape": i64(2, 3)})


def _onnx_type(array: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(array.dtype)


@pytest.mark.parametrize(
    "attrs",
    [
        {"value": helper.make_tensor("v", 1, [2, 2], [1.0, 2.0, 3.0, 4.0])},
        {"value_float": 2.5},
        {"value_floats": [1.0, 2.0]},
        {"value_int": 3},
        {"value_ints": [4, 5, 6]},
    ],
)
def test_constant(attrs):
    check_node("Constant", {}, attrs, opset=13)


def test_constant_string_is_unsupported():
    model = single_node_model("Constant", {}, {"value_string": "hello"}, opset=13)
    with pytest.raises(UnsupportedModelError, match="value_string"):
        convert_model(model)


@pytest.mark.parametrize(
    "start,limit,delta",
    [(0, 5, 1), (10, 2, -3), (3, 3, 1), (1.0, 2.2, 0.3), (-2, 7, 4)],
)
def test_range(start, limit, delta):
    dtype = np.float32 if isinstance(start, float) else I64
    values = {k: np.array(v, dtype) for k, v in zip("sld", (start, limit, delta))}
    check_node("Range", {}, constants=values, opset=11)


def test_range_with_runtime_inputs_is_unsupported():
    values = {"s": np.array(0, I64), "l": np.array(5, I64)}
    model = single_node_model("Range", values, constants={"d": np.array(1, I64)}, opset=11)
    with pytest.raises(UnsupportedModelError, match="must be a constant"):
        convert_model(model)


def test_folded_chain_keeps_int64(x):
    # Shape -> Gather on constants folds through our references, dtype intact
    model = single_node_model("Gather", {}, {"axis": 0}, {"s": i64(2, 3, 4), "i": np.array(-1)})
    (out,) = run_tvmc_reference(model, {})
    assert out.dtype == np.int64 and out.tolist() == 4


def test_space_to_depth_crd_opset_28(rng):
    """SpaceToDepth gained `mode` in opset 28, newer than onnxruntime here: onnx's evaluator."""
    from onnx.reference import ReferenceEvaluator

    data = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    model = single_node_model(
        "SpaceToDepth", {"x": data}, {"blocksize": 2, "mode": "CRD"}, opset=28
    )
    (expected,) = ReferenceEvaluator(model).run(None, {"x": data})
    (actual,) = run_tvmc_reference(model, {"x": data})
    np.testing.assert_array_equal(actual, expected)


def test_unsqueeze_takes_a_scalar_axes_tensor(rng):
    """The affine_grid function passes a 0-d axes tensor: one axis (onnxruntime's Squeeze
    refuses one, so only Unsqueeze has an oracle; the converters accept both)."""
    data = rng.standard_normal((3, 1, 2)).astype(np.float32)
    check_node("Unsqueeze", {"x": data}, constants={"axes": np.array(0, np.int64)}, opset=13)
