"""fold_batch_norm: BN after a conv with constant weights disappears; results do not change."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from tests.onnx_helpers import onnx_type
from tests.passes.checks import apply_and_compare
from tvmc.passes.fold_batch_norm import fold_batch_norm

# Folding rescales the weights before the float32 sums instead of after: a few ulps per product.
TOL = {"rtol": 1e-4, "atol": 1e-5}


def make_model(nodes, inputs, outputs, initializers, opset=17):
    """A multi-node ONNX model: `inputs` {name: array} at run time, `initializers` constant."""
    graph = helper.make_graph(
        nodes,
        "fold_test",
        [helper.make_tensor_value_info(k, onnx_type(v.dtype), v.shape) for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def bn_params(rng, prefix, channels):
    scale, bias, mean = (rng.standard_normal(channels).astype(np.float32) for _ in range(3))
    var = (rng.random(channels) + 0.5).astype(np.float32)
    names = [f"{prefix}_{p}" for p in ("scale", "bias", "mean", "var")]
    return names, dict(zip(names, (scale, bias, mean, var)))


def bn(prefix, data, out, params, epsilon=1e-5):
    return helper.make_node("BatchNormalization", [data, *params], [out], epsilon=epsilon)


def check_fold(model, inputs, expect_ops):
    """Fold, verify, and compare against the unfolded graph and onnxruntime."""
    folded = apply_and_compare(model, inputs, fold_batch_norm, TOL)
    assert folded.op_counts() == expect_ops
    return folded


def test_conv_bn_relu_folds(rng):
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    names, params = bn_params(rng, "bn", 4)
    init = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
            "b": rng.standard_normal(4).astype(np.float32), **params}  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        bn("bn", "c", "n", names, epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["y"]),
    ]
    folded = check_fold(make_model(nodes, {"x": x}, ["y"], init), {"x": x}, {"Conv": 1, "Relu": 1})
    assert set(folded.params) == {"w_bn", "b_bn"}  # the originals and the statistics are gone
    assert "c" not in folded.types


@pytest.mark.parametrize("group", [1, 2, 6])  # 6: depthwise
def test_conv_without_bias_bn_as_graph_output(group, rng):
    x = rng.standard_normal((1, 6, 7, 7)).astype(np.float32)
    names, params = bn_params(rng, "bn", 6)
    init = {"w": rng.standard_normal((6, 6 // group, 3, 3)).astype(np.float32), **params}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], group=group, strides=[2, 2]),
        bn("bn", "c", "y", names),
    ]
    folded = check_fold(make_model(nodes, {"x": x}, ["y"], init), {"x": x}, {"Conv": 1})
    assert folded.nodes[0].outputs == ["y"]


@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose_bn_folds(group, rng):
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    names, params = bn_params(rng, "bn", 3 * group)
    init = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
            "b": rng.standard_normal(3 * group).astype(np.float32), **params}  # fmt: skip
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"], group=group, strides=[2, 2]),
        bn("bn", "c", "y", names),
    ]
    check_fold(make_model(nodes, {"x": x}, ["y"], init), {"x": x}, {"ConvTranspose": 1})


def test_shared_weight_and_statistics_fold_separately(rng):
    """Two convs share one weight, two BNs one set of statistics: both fold, nothing dangles."""
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    names, params = bn_params(rng, "bn", 4)
    init = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32), **params}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c1"]),
        helper.make_node("Conv", ["x", "w"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        bn("bn1", "c1", "y1", names),
        bn("bn2", "c2", "y2", names, epsilon=1e-2),
    ]
    model = make_model(nodes, {"x": x}, ["y1", "y2"], init)
    folded = check_fold(model, {"x": x}, {"Conv": 2})
    assert len(folded.params) == 4


def test_conv_read_twice_keeps_bn(rng):
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    names, params = bn_params(rng, "bn", 3)
    init = {"w": rng.standard_normal((3, 3, 1, 1)).astype(np.float32), **params}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        bn("bn", "c", "n", names),
        helper.make_node("Add", ["c", "n"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], init)
    check_fold(model, {"x": x}, {"Add": 1, "BatchNormalization": 1, "Conv": 1})


def test_conv_output_is_a_model_output_keeps_bn(rng):
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    names, params = bn_params(rng, "bn", 3)
    init = {"w": rng.standard_normal((3, 3, 1, 1)).astype(np.float32), **params}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), bn("bn", "c", "y", names)]
    model = make_model(nodes, {"x": x}, ["c", "y"], init)
    check_fold(model, {"x": x}, {"BatchNormalization": 1, "Conv": 1})


def test_bn_not_after_a_constant_conv_stays(rng):
    """BN after Relu, and after a conv whose weight is a run-time input, cannot fold."""
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 3)).astype(np.float32)
    names, params = bn_params(rng, "bn", 3)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        bn("bn1", "r", "y1", names),
        helper.make_node("Conv", ["x", "w"], ["c"]),
        bn("bn2", "c", "y2", names),
    ]
    model = make_model(nodes, {"x": x, "w": w}, ["y1", "y2"], params)
    folded = check_fold(model, {"x": x, "w": w}, {"BatchNormalization": 2, "Conv": 1, "Relu": 1})
    assert set(folded.params) == set(params)
