"""Softmax-like ops and normalizations against onnxruntime, across the opset-13 axis change.

Tolerance: the references compute in float64 and round once; onnxruntime computes exp, means and
rsqrt in float32, so float32 results agree to about 1e-5 relative (the check_node default).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.onnx_helpers import (
    assert_close,
    check_node,
    run_onnxruntime,
    run_tvmc_reference,
    single_node_model,
)
from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend import convert_model


def random(rng, shape, dtype=np.float32):
    return (rng.standard_normal(shape) * 2).astype(dtype)


SOFTMAX_OPS = ["Softmax", "LogSoftmax", "Hardmax"]


OPSET_AXIS = [
    (opset, axis)
    for opset in [9, 11, 13, 18]
    for axis in [None, 0, 1, -1, 2, -3]
    if opset >= 11 or axis is None or axis >= 0  # negative axes arrived with opset 11
]


@pytest.mark.parametrize("op", SOFTMAX_OPS)
@pytest.mark.parametrize("opset,axis", OPSET_AXIS)
@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5)])
def test_softmax_family(op, opset, axis, shape, rng):
    attrs = {} if axis is None else {"axis": axis}
    check_node(op, {"x": random(rng, shape)}, attrs, opset=opset)


@pytest.mark.parametrize("op", SOFTMAX_OPS)
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_2d_and_1d(op, opset, rng):
    check_node(op, {"x": random(rng, (3, 7))}, opset=opset)
    check_node(op, {"x": random(rng, (7,))}, {"axis": 0}, opset=opset)


@pytest.mark.parametrize(
    "opset,shape,axis,axes",
    [
        (11, (2, 3, 4, 5), 1, (1, 2, 3)),  # coerced: everything from axis on is one row
        (11, (2, 3, 4, 5), -1, (3,)),
        (11, (2, 3, 1, 1), 1, (1,)),  # size-1 trailing dims: the old and new forms coincide
        (11, (2, 1, 1), 1, (1,)),
        (13, (2, 3, 4, 5), 1, (1,)),
        (13, (2, 3, 4, 5), -2, (2,)),
    ],
)
def test_softmax_axes_attribute(opset, shape, axis, axes, rng):
    model = single_node_model("Softmax", {"x": random(rng, shape)}, {"axis": axis}, opset=opset)
    (node,) = convert_model(model).nodes
    assert node.attrs == {"axes": axes}


def test_softmax_large_values_do_not_overflow():
    x = np.array([[1000.0, 1001.0, -1000.0], [-3e38, 0.0, 3e38]], np.float32)
    check_node("Softmax", {"x": x}, opset=13)
    check_node("LogSoftmax", {"x": x[:1]}, opset=13)


@pytest.mark.parametrize("opset,axis", [(11, 3), (13, -4), (13, 3)])
def test_softmax_axis_out_of_range(opset, axis, rng):
    model = single_node_model("Softmax", {"x": random(rng, (2, 3, 4))}, {"axis": axis}, opset=opset)
    with pytest.raises(ModelError, match=f"Softmax node.*axis {axis} is out of range for rank 3"):
        convert_model(model)


@pytest.mark.parametrize("axis", [None, -1, -2, 1, 0])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_normalization(axis, with_bias, rng):
    shape = (2, 3, 4)
    attrs = {"epsilon": 1e-3} if axis is None else {"axis": axis}
    row = shape[(-1 if axis is None else axis) % 3 :]
    consts = {"scale": random(rng, row)}
    if with_bias:
        consts["bias"] = random(rng, row)
    check_node("LayerNormalization", {"x": random(rng, shape)}, attrs, constants=consts, opset=17)


def test_layer_normalization_broadcast_scale_and_runtime_params(rng):
    x, scale, bias = random(rng, (2, 3, 4)), random(rng, (4,)), random(rng, (1, 4))
    check_node("LayerNormalization", {"x": x, "s": scale, "b": bias}, {"axis": 1}, opset=17)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("outputs", [["y", "mean", "inv"], ["y", "mean"], ["y", "", "inv"]])
def test_layer_normalization_statistics(dtype, outputs, rng):
    """The optional Mean and InvStdDev outputs (kept dims, stash type float32)."""
    x, scale = random(rng, (2, 3, 4), dtype), random(rng, (3, 4), dtype)
    model = single_node_model("LayerNormalization", {"x": x, "s": scale}, {"axis": -2}, opset=17)
    node = model.graph.node[0]
    del node.output[:]
    node.output.extend(outputs)
    del model.graph.output[:]
    model.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in outputs if o)
    inputs = {"x": x, "s": scale}
    for a, e in zip(run_tvmc_reference(model, inputs), run_onnxruntime(model, inputs)):
        assert_close(a, e, rtol=1e-5, atol=1e-6)


def test_layer_normalization_bad_scale(rng):
    model = single_node_model(
        "LayerNormalization", {"x": random(rng, (2, 3, 4))}, constants={"s": random(rng, (3,))},
        opset=17,
    )  # fmt: skip
    with pytest.raises(ModelError, match=r"scale of shape \[3\] does not broadcast.*\[4\]"):
        convert_model(model)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 2, 2)])
@pytest.mark.parametrize("opset", [7, 17])
@pytest.mark.parametrize("epsilon", [None, 1e-2])
def test_instance_normalization(shape, opset, epsilon, rng):
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    consts = {"scale": random(rng, shape[1:2]), "bias": random(rng, shape[1:2])}
    check_node("InstanceNormalization", {"x": random(rng, shape)}, attrs, consts, opset=opset)


def test_instance_normalization_bad_scale(rng):
    consts = {"scale": random(rng, (4,)), "bias": random(rng, (3,))}
    model = single_node_model("InstanceNormalization", {"x": random(rng, (2, 3, 5))},
                              constants=consts)  # fmt: skip
    with pytest.raises(ModelError, match=r"scale \[4\] and bias \[3\] must both be \[3\]"):
        convert_model(model)


# ---- RMSNormalization, GroupNormalization, LpNormalization, MeanVarianceNormalization ------------
def test_group_normalization_opset_18_repeats_scale_per_channel(rng):
    """Opset 18's [num_groups] scale and bias become per-channel constants for our one op."""
    consts = {"s": random(rng, (2,)), "b": random(rng, (2,))}
    model = single_node_model("GroupNormalization", {"x": random(rng, (2, 6, 5))},
                              {"num_groups": 2}, consts, opset=18)  # fmt: skip
    graph = convert_model(model)
    (node,) = graph.nodes
    assert node.op == "GroupNormalization"
    np.testing.assert_array_equal(graph.params[node.inputs[1]], np.repeat(consts["s"], 3))
    check_node("GroupNormalization", {"x": random(rng, (2, 6, 5))}, {"num_groups": 2}, consts,
               opset=18)  # fmt: skip


@pytest.mark.parametrize(
    "op,attrs,consts,opset,error,match",
    [
        ("GroupNormalization", {"num_groups": 4}, {"s": (6,), "b": (6,)}, 21, ModelError,
         r"GroupNormalization node.*num_groups 4 must be positive and divide"),
        ("GroupNormalization", {}, {"s": (6,), "b": (6,)}, 21, ModelError,
         "GroupNormalization node.*Required attribute 'num_groups' is missing"),
        ("GroupNormalization", {"num_groups": 2}, {"s": (6,), "b": (6,)}, 18, ModelError,
         r"scale and bias must be \[num_groups\] = \[2\] before opset 21, got \[6\]"),
        ("GroupNormalization", {"num_groups": 2}, {"s": (2,), "b": (2,)}, 21, ModelError,
         r"scale \[2\] and bias \[2\] must both be \[6\]"),
        ("GroupNormalization", {"num_groups": 2}, {"s": (6,)}, 21, ModelError,
         "GroupNormalization node.*has input size 2 not in range"),
        ("RMSNormalization", {}, {}, 23, ModelError,
         "RMSNormalization node.*has input size 1 not in range"),
        ("LayerNormalization", {}, {}, 17, ModelError,
         "LayerNormalization node.*has input size 1 not in range"),
        ("RMSNormalization", {"stash_type": 10}, {"s": (5,)}, 23, UnsupportedModelError,
         "RMSNormalization node.*stash_type float16 is not supported"),
        ("RMSNormalization", {"axis": 3}, {"s": (5,)}, 23, ModelError,
         "RMSNormalization node.*axis 3 is out of range for rank 3"),
        ("RMSNormalization", {}, {"s": (6,)}, 23, ModelError,
         r"scale of shape \[6\] does not broadcast to the normalized shape \[5\]"),
        ("LpNormalization", {"p": 3}, {}, 17, ModelError,
         "LpNormalization node.*p must be 1 or 2, got 3"),
        ("MeanVarianceNormalization", {"axes": [1, 4]}, {}, 13, ModelError,
         "MeanVarianceNormalization node.*axis 4 is out of range"),
        ("MeanVarianceNormalization", {"axes": [1, -2]}, {}, 13, ModelError,
         "name a dimension twice"),
    ],
)  # fmt: skip
def test_norm_errors_name_the_node(op, attrs, consts, opset, error, match, rng):
    constants = {k: random(rng, shape) for k, shape in consts.items()}
    model = single_node_model(op, {"x": random(rng, (2, 6, 5))}, attrs, constants, opset=opset)
    with pytest.raises(error, match=match):
        convert_model(model)
