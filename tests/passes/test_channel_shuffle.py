"""fold_channel_shuffle: a depthwise conv reads through the channel shuffle before it (ShuffleNet);
the conv's lowerings (CPU schedules, GPU interpreted) read the same channels the copy held."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.lowering_helpers import run_node
from tests.passes.checks import apply_and_compare
from tests.passes.test_fold_batch_norm import make_model
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.graph import Node, TensorType
from tvmc.ops.conv.definition import CHANNEL_SHUFFLE, conv, shuffled_channel
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes.channel_shuffle import fold_channel_shuffle

TOL = {"rtol": 1e-5, "atol": 1e-5}


def shuffle_unit(rng, channels=12, groups=3, size=7, dw_group=None, perm=(0, 2, 1, 3, 4),
                 extra=(), multiplier=1):  # fmt: skip
    """ShuffleNet's middle: relu -> Reshape [1, g, C/g, H, W] -> Transpose -> Reshape back ->
    3x3 conv of `dw_group` groups (default: depthwise); `extra` nodes may read the copies."""
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    group = dw_group or channels
    weights = {
        "split": np.array([1, groups, channels // groups, size, size], np.int64),
        "back": np.array([1, channels, size, size], np.int64),
        "w": rng.standard_normal((channels * multiplier, channels // group, 3, 3)).astype(
            np.float32
        ),
    }
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Reshape", ["r", "split"], ["s"]),
        helper.make_node("Transpose", ["s"], ["t"], perm=list(perm)),
        helper.make_node("Reshape", ["t", "back"], ["u"]),
        helper.make_node(
            "Conv", ["u", "w"], ["y"], group=group, kernel_shape=[3, 3], pads=[1, 1, 1, 1]
        ),  # fmt: skip
        *extra,
    ]
    outputs = ["y", *(o for n in extra for o in n.output)]
    return make_model(nodes, {"x": x}, outputs, weights), {"x": x}


def folded(graph) -> bool:
    return [n.op for n in graph.nodes] == ["Relu", "Conv"]


@pytest.mark.parametrize("groups,multiplier", [(3, 1), (4, 1), (2, 2)])
def test_the_depthwise_conv_reads_through_the_shuffle(groups, multiplier, rng):
    model, inputs = shuffle_unit(rng, groups=groups, multiplier=multiplier)
    graph = apply_and_compare(model, inputs, fold_channel_shuffle, TOL)
    assert folded(graph)
    conv_node = graph.nodes[1]
    assert conv_node.inputs[0] == "r" and conv_node.attrs[CHANNEL_SHUFFLE] == groups


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dw_group": 3},  # a grouped conv reads several channels a group
        {"perm": (0, 1, 2, 4, 3)},  # a transpose of the image, not of the channels
        {"extra": (helper.make_node("Neg", ["t"], ["n"]),)},  # the copy is read elsewhere
    ],
)
def test_what_is_not_a_shuffle_read_by_a_depthwise_conv_stays(kwargs, rng):
    model, inputs = shuffle_unit(rng, **kwargs)
    assert not folded(apply_and_compare(model, inputs, fold_channel_shuffle, TOL))


def test_shuffled_channel_is_the_shuffles_permutation():
    x = np.arange(12)
    copy = x.reshape(3, 4).T.reshape(12)  # Reshape [g=3, 4], Transpose, Reshape back
    assert [shuffled_channel(c, 3, 12) for c in range(12)] == list(copy)


@pytest.mark.parametrize(
    "config,target",
    [
        ({}, None),  # the depthwise schedule: each channel's planes built from its source
        ({"schedule": "pixels"}, None),  # other schedules read a shuffled copy
        ({"schedule": "channels"}, None),
        ({}, LoweringTarget(kind="cuda")),  # the GPU reads through the shuffle by index
    ],
)
def test_every_lowering_reads_the_channels_the_shuffle_would_have_moved(config, target, rng):
    channels, groups = 16, 4
    x = rng.standard_normal((2, channels, 9, 9)).astype(np.float32)
    w = rng.standard_normal((channels, 1, 3, 3)).astype(np.float32)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1],
             "dilations": [1, 1], "group": channels, "auto_pad": "NOTSET"}  # fmt: skip
    shuffled = x.reshape(2, groups, channels // groups, 9, 9).swapaxes(1, 2).reshape(x.shape)
    expected = conv(attrs, shuffled, w)
    node = Node("Conv", ["x", "w"], ["y"], {**attrs, CHANNEL_SHUFFLE: groups})
    np.testing.assert_allclose(conv(node.attrs, x, w), expected, rtol=1e-6)  # the reference
    (got,) = run_node(node, [x, w], [TensorType.of(expected)], {1: w}, config=config,
                      target=target)  # fmt: skip
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_a_model_cannot_set_the_attribute_only_the_pass_sets(rng):
    model, _ = shuffle_unit(rng)
    conv_node = next(n for n in model.graph.node if n.op_type == "Conv")
    conv_node.attribute.append(helper.make_attribute(CHANNEL_SHUFFLE, 3))
    with pytest.raises(ModelError, match=CHANNEL_SHUFFLE):
        convert_model(model)
