"""pool_before_conv: an AveragePool after a pointwise conv runs first; results do not change."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.onnx_helpers import assert_close, run_onnxruntime
from tests.passes.checks import apply_and_compare
from tests.passes.test_fold_batch_norm import make_model
from tvmc.frontend import convert_model
from tvmc.ops import run_reference
from tvmc.passes import OPTIMIZE_PIPELINE, run_passes
from tvmc.passes.pool_before_conv import pool_before_conv

# Pooling first sums the inputs before the weights multiply them: a few ulps per output.
TOL = {"rtol": 1e-4, "atol": 1e-5}


def transition(rng, conv_attrs=None, pool_attrs=None, bias=True, size=8, extra=()):
    """DenseNet's transition: relu -> conv 1x1 (8 -> 4 channels) -> AveragePool; `extra`
    nodes may read the conv's output too."""
    x = rng.standard_normal((1, 8, size, size)).astype(np.float32)
    conv_attrs = {"kernel_shape": [1, 1], **(conv_attrs or {})}
    weights = {"w": rng.standard_normal((4, 8, *conv_attrs["kernel_shape"])).astype(np.float32)}
    if bias:
        weights["b"] = rng.standard_normal(4).astype(np.float32)
    pool_attrs = {"kernel_shape": [2, 2], "strides": [2, 2], **(pool_attrs or {})}
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Conv", ["r", *weights], ["c"], **conv_attrs),
        helper.make_node("AveragePool", ["c"], ["y"], **pool_attrs),
        *extra,
    ]
    outputs = ["y", *(o for n in extra for o in n.output)]
    return make_model(nodes, {"x": x}, outputs, weights), {"x": x}, weights


def check_swap(model, inputs, swapped: bool):
    """Run the pass, verify, compare with the graph before and onnxruntime; say if it moved."""
    after_graph = apply_and_compare(model, inputs, pool_before_conv, TOL)
    order = [n.op for n in after_graph.nodes]
    pool = next(i for i, op in enumerate(order) if op.endswith("Pool"))
    assert (pool < order.index("Conv")) == swapped
    return after_graph


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "pool_attrs",
    [
        {},  # DenseNet: 2x2 stride 2
        {"kernel_shape": [3, 3], "strides": [2, 2]},  # overlapping windows, odd edge dropped
        {"kernel_shape": [3, 2], "strides": [1, 2], "count_include_pad": 1},
    ],
)
def test_transition_pools_first(pool_attrs, bias, rng):
    model, inputs, _ = transition(rng, pool_attrs=pool_attrs, bias=bias, size=9)
    graph = check_swap(model, inputs, swapped=True)
    pooled = graph.nodes[1].outputs[0]
    assert graph.types[pooled].shape[1] == 8  # the pool now averages the conv's input channels


@pytest.mark.parametrize(
    "conv_attrs,pool_attrs",
    [
        ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, {}),  # not pointwise
        ({"strides": [2, 2]}, {}),  # a strided 1x1 conv drops pixels before the average
        ({"pads": [1, 1, 1, 1]}, {}),  # padding: border pixels are the bias, not conv(0)
        ({}, {"pads": [1, 1, 1, 1]}),  # padded windows average zeros the conv never made
        ({}, {"ceil_mode": 1}),  # partial windows
        ({}, {"kernel_shape": [1, 1], "strides": [1, 1]}),  # the image stays as large
    ],
)
def test_what_does_not_commute_or_gain_stays(conv_attrs, pool_attrs, rng):
    model, inputs, _ = transition(rng, conv_attrs, pool_attrs, size=9)
    check_swap(model, inputs, swapped=False)


def test_a_conv_output_read_elsewhere_stays(rng):
    extra = [helper.make_node("Relu", ["c"], ["z"])]
    model, inputs, _ = transition(rng, extra=extra)
    check_swap(model, inputs, swapped=False)


def test_max_pool_stays(rng):
    model, inputs, _ = transition(rng)
    model.graph.node[2].op_type = "MaxPool"
    check_swap(model, inputs, swapped=False)


def test_in_the_optimize_pipeline_after_batch_norm_folding(rng):
    """conv -> BN -> AveragePool: the BN folds into the conv, then the pool moves before it."""
    model, inputs, weights = transition(rng)
    scale, beta, mean = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    var = (rng.random(4) + 0.5).astype(np.float32)
    relu, conv, pool = model.graph.node
    bn = helper.make_node("BatchNormalization", ["c", "s", "be", "m", "v"], ["n"])
    pool.input[0] = "n"
    params = {**weights, "s": scale, "be": beta, "m": mean, "v": var}
    model = make_model([relu, conv, bn, pool], inputs, ["y"], params)
    graph = run_passes(convert_model(model), OPTIMIZE_PIPELINE, verify=True)
    assert [n.op for n in graph.nodes] == ["Relu", "AveragePool", "Conv"]
    (expected,) = run_onnxruntime(model, inputs)
    assert_close(run_reference(graph, inputs)["y"], np.asarray(expected), **TOL)
