"""Reductions and ArgMax/ArgMin against onnxruntime, axes as attribute and as input.

Tolerance: float32 rtol 1e-5, atol 1e-5: the references sum in float64, onnxruntime in float32
over at most a few dozen elements here (a few ulps apart).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.onnx_helpers import check_node, single_node_model
from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend import convert_model

REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]  # fmt: skip
TOL = {"rtol": 1e-5, "atol": 1e-5}


def axes_are_input(op: str, opset: int) -> bool:
    return opset >= (13 if op == "ReduceSum" else 18)


def reduce_model_args(op, axes, opset, **attrs):
    """Attributes and constants of a ReduceXxx node with `axes` where `opset` puts them."""
    attrs = {k: v for k, v in attrs.items() if v is not None}
    constants = {}
    if axes is not None:
        if axes_are_input(op, opset):
            constants["axes"] = np.array(axes, np.int64)
        else:
            attrs["axes"] = axes
    return attrs, constants


def check_reduce(op, x, axes, opset, keepdims=None, noop=None):
    attrs, constants = reduce_model_args(op, axes, opset, keepdims=keepdims,
                                         noop_with_empty_axes=noop)  # fmt: skip
    check_node(op, {"x": x}, attrs, constants=constants, opset=opset, **TOL)


def data(op, shape, rng, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-4, 5, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    return np.abs(x) + dtype(0.5) if op == "ReduceLogSum" else x


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("axes", [None, [1], [-1], [0, 2], [2, 0], [-3, 1, 2]])
@pytest.mark.parametrize("keepdims", [None, 0, 1])
def test_reductions(op, opset, axes, keepdims, rng):
    check_reduce(op, data(op, (2, 3, 4), rng), axes, opset, keepdims)


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("noop", [0, 1])
@pytest.mark.parametrize("axes", [None, []])  # absent, or an empty tensor
def test_empty_axes(op, noop, axes, rng):
    """Empty axes reduce everything, or nothing with noop_with_empty_axes (still squaring, ...)."""
    check_reduce(op, data(op, (2, 3), rng), axes, 18, noop=noop)


def test_noop_reduction_becomes_identity(rng):
    attrs, consts = reduce_model_args("ReduceSum", None, 13, noop_with_empty_axes=1)
    model = single_node_model("ReduceSum", {"x": data("ReduceSum", (2, 3), rng)}, attrs, consts,
                              opset=13)  # fmt: skip
    assert [n.op for n in convert_model(model).nodes] == ["Identity"]


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
def test_axes_attribute_is_canonical(op, rng):
    attrs, consts = reduce_model_args(op, [-1, 0], 18, keepdims=0)
    model = single_node_model(op, {"x": data(op, (2, 3, 4), rng)}, attrs, consts, opset=18)
    (node,) = convert_model(model).nodes
    assert node.attrs == {"axes": (0, 2), "keepdims": False}


@pytest.mark.parametrize(
    "op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare"]
)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("opset", [13, 18])
def test_integer_reductions(op, dtype, opset, rng):
    check_reduce(op, data(op, (3, 5), rng, dtype), [1], opset, keepdims=0)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
def test_max_min_small_types(op, dtype, rng):
    """int8/uint8 from opset 18 (axes as input), bool from opset 20."""
    x = rng.integers(0, 2 if dtype is np.bool_ else 100, (3, 4)).astype(dtype)
    check_reduce(op, x, [1], 20 if dtype is np.bool_ else 18)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_double_and_scalar_results(op, rng):
    check_reduce(op, data(op, (4, 3), rng, np.float64), None, 13, keepdims=0)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_max_min_keep_infinities(op):
    x = np.array([[np.inf, 1.0, -np.inf], [-np.inf, -np.inf, 2.0]], np.float32)
    check_reduce(op, x, [1], 13)


@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    picks=st.lists(st.integers(-4, 3), max_size=4),
    keepdims=st.integers(0, 1),
    op=st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceLogSumExp"]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None)
def test_random_axes(shape, picks, keepdims, op, seed):
    rank = len(shape)
    axes = sorted({p % rank for p in picks})  # valid, distinct axes; empty means all
    x = data(op, tuple(shape), np.random.default_rng(seed))
    check_reduce(op, x, [a - rank if a % 2 else a for a in axes] or None, 18, keepdims)


@pytest.mark.parametrize(
    "axes,message",
    [([3], "axis 3 is out of range for rank 3"), ([1, -2], r"axes \[1, -2\] name a dimension")],
)
def test_reduce_axes_errors(axes, message, rng):
    attrs, consts = reduce_model_args("ReduceMean", axes, 18)
    model = single_node_model("ReduceMean", {"x": data("", (2, 3, 4), rng)}, attrs, consts,
                              opset=18)  # fmt: skip
    with pytest.raises(ModelError, match="ReduceMean node.*" + message):
        convert_model(model)


def test_runtime_axes_are_rejected(rng):
    inputs = {"x": data("", (2, 3), rng), "axes": np.array([1], np.int64)}
    with pytest.raises(UnsupportedModelError, match="axes.*must be a constant"):
        convert_model(single_node_model("ReduceSum", inputs, opset=13))


# ---- ArgMax / ArgMin -----------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [None, 1, -1, -3])
@pytest.mark.parametrize("keepdims", [None, 0])
@pytest.mark.parametrize("last", [None, 0, 1])
def test_arg_reductions(op, axis, keepdims, last, rng):
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties: first versus last index
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
    check_node(op, {"x": x}, {k: v for k, v in attrs.items() if v is not None}, opset=13)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
@pytest.mark.parametrize("opset", [11, 12, 13])
def test_arg_reductions_dtypes_and_opsets(op, dtype, opset, rng):
    x = rng.integers(-3, 3, (4, 6)).astype(dtype)
    attrs = {"axis": 1} if opset < 12 else {"axis": 1, "select_last_index": 1}
    check_node(op, {"x": x}, attrs, opset=opset)


def test_argmax_axis_out_of_range(rng):
    model = single_node_model("ArgMax", {"x": data("", (2, 3), rng)}, {"axis": 2})
    with pytest.raises(ModelError, match="ArgMax node.*axis 2 is out of range for rank 2"):
        convert_model(model)
