"""Pooling and LRN references against onnxruntime, across opsets and padding modes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.onnx_helpers import check_node, single_node_model
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.ops import run_reference

POOLS = ["MaxPool", "AveragePool"]


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize(
    "x_shape,attrs",
    [
        ((1, 2, 7, 8), {"kernel_shape": [2, 2]}),
        ((2, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((1, 2, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [0, 1, 1, 0]}),
        ((1, 2, 9), {"kernel_shape": [3], "strides": [2]}),  # 1D
        ((1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 3], "strides": [2, 2, 2]}),  # 3D
    ],
)
@pytest.mark.parametrize("opset", [7, 11, 13, 22])
def test_pool(op, x_shape, attrs, opset, rng):
    check_node(op, {"x": randn(rng, *x_shape)}, attrs, opset=opset)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 0]])
@pytest.mark.parametrize("opset", [10, 12, 19])
def test_pool_ceil_mode(op, pads, opset, rng):
    # 7 and 8 with stride 2 and 3: ceil mode adds a window, and with end pads the last window would
    # start inside the padding, which ONNX (as onnxruntime) drops
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "pads": pads, "ceil_mode": 1}
    check_node(op, {"x": randn(rng, 1, 2, 7, 8)}, attrs, opset=opset)


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("pads", [[1, 1, 1, 1], [2, 0, 1, 2]])
def test_average_pool_count_include_pad(ceil_mode, count_include_pad, pads, rng):
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": pads, "ceil_mode": ceil_mode,
             "count_include_pad": count_include_pad}  # fmt: skip
    check_node("AveragePool", {"x": randn(rng, 1, 2, 8, 7)}, attrs, opset=19)


@pytest.mark.parametrize("op,opset", [("MaxPool", 12), ("AveragePool", 19)])
@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_pool_dilations(op, opset, ceil_mode, count_include_pad, rng):
    attrs = {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [2, 1], "pads": [1, 0, 2, 1],
             "ceil_mode": ceil_mode}  # fmt: skip
    if op == "AveragePool":
        attrs["count_include_pad"] = count_include_pad
    elif count_include_pad:
        pytest.skip("MaxPool has no count_include_pad")
    check_node(op, {"x": randn(rng, 1, 2, 10, 9)}, attrs, opset=opset)


@pytest.mark.parametrize("op", POOLS)
@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_pool_auto_pad(op, auto_pad, ceil_mode, rng):
    attrs = {
        "kernel_shape": [3, 2],
        "strides": [2, 2],
        "auto_pad": auto_pad,
        "ceil_mode": ceil_mode,
    }
    check_node(op, {"x": randn(rng, 1, 2, 9, 8)}, attrs, opset=11)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_max_pool_integers(dtype, rng):
    x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (1, 2, 6, 5), dtype=dtype)
    attrs = {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "strides": [2, 2]}
    check_node("MaxPool", {"x": x}, attrs, opset=12)


@settings(max_examples=60, deadline=None)
@given(op=st.sampled_from(POOLS), data=st.data())
def test_pool_random_2d(op, data):
    kernel = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=2))
    strides = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=2))
    # onnxruntime expects pads smaller than the kernel, as frameworks produce them
    pads = [data.draw(st.integers(0, k - 1)) for k in kernel * 2]
    size = [k + data.draw(st.integers(0, 5)) for k in kernel]
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads,
             "ceil_mode": data.draw(st.integers(0, 1))}  # fmt: skip
    if op == "AveragePool":
        attrs["count_include_pad"] = data.draw(st.integers(0, 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    check_node(op, {"x": randn(rng, 2, 3, *size)}, attrs, opset=13)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 5, 6), (1, 4, 3, 2, 5)])
def test_global_pool(op, shape, rng):
    check_node(op, {"x": randn(rng, *shape)})


@pytest.mark.parametrize(
    "attrs",
    [{"size": 3}, {"size": 5, "alpha": 1e-2, "beta": 0.6, "bias": 2.0}, {"size": 1}],
)
@pytest.mark.parametrize("opset", [7, 13])
def test_lrn(attrs, opset, rng):
    check_node("LRN", {"x": randn(rng, 2, 7, 5, 6) * 3}, attrs, opset=opset)


def test_lrn_even_size_follows_the_spec(rng):
    """onnxruntime rejects even sizes; ONNX sums floor((size-1)/2) channels before, rest after."""
    graph = convert_model(single_node_model("LRN", {"x": randn(rng, 1, 4, 1, 1)}, {"size": 2}))
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 4, 1, 1)
    out = run_reference(graph, {"x": x})["out0"].ravel()
    square_sum = np.array([1 + 4, 4 + 9, 9 + 16, 16], np.float32)
    np.testing.assert_allclose(out, x.ravel() / (1 + 1e-4 / 2 * square_sum) ** 0.75, rtol=1e-6)


def test_pool_errors_say_what(rng):
    x = {"x": randn(rng, 1, 2, 4, 4)}
    with pytest.raises(ModelError, match="storage_order must be 0 or 1, got 2"):
        convert_model(single_node_model("MaxPool", x, {"kernel_shape": [2, 2], "storage_order": 2},
                                        num_outputs=2))  # fmt: skip
    with pytest.raises(ModelError, match="does not fit input"):
        convert_model(single_node_model("AveragePool", x, {"kernel_shape": [5, 5]}))
    with pytest.raises(ModelError, match="kernel_shape \\[2\\] needs 2 values"):
        convert_model(single_node_model("MaxPool", x, {"kernel_shape": [2]}))
    with pytest.raises(ModelError, match="Required attribute 'kernel_shape' is missing"):
        convert_model(single_node_model("MaxPool", x, {"strides": [2, 2]}))
    with pytest.raises(ModelError, match="LpPool node.*p must be a positive integer, got 0"):
        convert_model(single_node_model("LpPool", x, {"kernel_shape": [2, 2], "p": 0}))
    with pytest.raises(ModelError, match="LpPool node.*Required attribute 'kernel_shape'"):
        convert_model(single_node_model("LpPool", x, {"p": 2}))
    with pytest.raises(ModelError, match="LpPool does not support dtype int32"):
        xi = {"x": np.ones((1, 2, 4, 4), np.int32)}
        convert_model(single_node_model("LpPool", xi, {"kernel_shape": [2, 2]}))
