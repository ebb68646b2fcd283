"""Conv, ConvTranspose and BatchNormalization references against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.onnx_helpers import check_node, single_node_model
from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend import convert_model
from tvmc.ops import get_op

# float32 convolutions sum C*K products in a different order from onnxruntime's (im2col + BLAS
# blocking vs MLAS kernels): a few ulps per partial sum, so 1e-4 relative, 1e-5 absolute near zero.
CONV_TOL = {"rtol": 1e-4, "atol": 1e-5}


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ---- Conv ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "x_shape,w_shape,attrs",
    [
        ((1, 3, 8, 8), (4, 3, 3, 3), {}),
        ((2, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((1, 3, 9, 7), (5, 3, 3, 2), {"pads": [0, 1, 2, 0], "strides": [2, 1]}),  # asymmetric
        ((1, 4, 11, 10), (6, 4, 3, 3), {"dilations": [2, 3], "pads": [2, 2, 2, 2]}),
        ((2, 4, 9, 7), (6, 2, 3, 3), {"group": 2, "strides": [2, 1], "dilations": [2, 1]}),
        ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),  # depthwise
        ((1, 4, 10, 10), (8, 1, 3, 3), {"group": 4, "strides": [2, 2]}),  # depth multiplier 2
        ((1, 4, 6, 6), (5, 4, 1, 1), {"kernel_shape": [1, 1]}),
        ((1, 4, 9), (4, 4, 3), {"pads": [1, 2]}),  # 1D
        ((2, 6, 20), (6, 2, 5), {"group": 3, "strides": [3], "dilations": [2]}),
        (
            (1, 2, 5, 6, 7),
            (3, 2, 3, 3, 2),
            {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]},
        ),  # 3D
    ],
)
@pytest.mark.parametrize("bias", [False, True])
def test_conv(x_shape, w_shape, attrs, bias, rng):
    constants = {"w": randn(rng, *w_shape)}
    if bias:
        constants["b"] = randn(rng, w_shape[0])
    check_node("Conv", {"x": randn(rng, *x_shape)}, attrs, constants=constants, **CONV_TOL)


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize(
    "strides,dilations", [([1, 1], [1, 1]), ([2, 3], [1, 1]), ([2, 1], [1, 2])]
)
def test_conv_auto_pad(auto_pad, strides, dilations, rng):
    # a 4x3 kernel on 9x8: odd and even total padding, so SAME_UPPER and SAME_LOWER differ
    if auto_pad.startswith("SAME") and dilations != [1, 1]:
        pytest.skip("onnxruntime rejects dilations with SAME padding; see test_conv_same_dilated")
    attrs = {"auto_pad": auto_pad, "strides": strides, "dilations": dilations}
    x, w = randn(rng, 1, 2, 9, 8), randn(rng, 3, 2, 4, 3)
    check_node("Conv", {"x": x}, attrs, constants={"w": w}, **CONV_TOL)


@pytest.mark.parametrize(
    "auto_pad,pads", [("SAME_UPPER", [1, 2, 2, 2]), ("SAME_LOWER", [2, 2, 1, 2])]
)
def test_conv_same_dilated(auto_pad, pads, rng):
    """ONNX: total pad = (ceil(n/s) - 1) * s + d*(k-1) + 1 - n; SAME_UPPER puts the odd one last."""
    attrs = {"auto_pad": auto_pad, "strides": [2, 1], "dilations": [2, 2]}
    graph = convert("Conv", {"x": randn(rng, 1, 2, 8, 8)}, attrs, {"w": randn(rng, 3, 2, 3, 3)})
    (node,) = graph.nodes
    assert list(node.attrs["pads"]) == pads
    assert graph.types[node.outputs[0]].shape == (1, 3, 4, 8)


@pytest.mark.parametrize("opset", [7, 11, 13, 19, 22])
def test_conv_across_opsets(opset, rng):
    attrs = {"pads": [1, 0, 1, 2], "strides": [2, 2], "group": 2}
    constants = {"w": randn(rng, 4, 2, 3, 3), "b": randn(rng, 4)}
    check_node("Conv", {"x": randn(rng, 2, 4, 7, 8)}, attrs, constants, opset=opset, **CONV_TOL)


def test_conv_weight_at_run_time(rng):
    x, w = randn(rng, 1, 3, 6, 6), randn(rng, 2, 3, 3, 3)
    check_node("Conv", {"x": x, "w": w}, {"pads": [1, 1, 1, 1]}, **CONV_TOL)


def test_conv_imagenet_stem(rng):
    """The ResNet-50 stem at full size: the reference is im2col + matmul, not pixel loops."""
    attrs = {"pads": [3, 3, 3, 3], "strides": [2, 2]}
    constants = {"w": randn(rng, 64, 3, 7, 7), "b": randn(rng, 64)}
    check_node("Conv", {"x": randn(rng, 1, 3, 224, 224)}, attrs, constants, **CONV_TOL)


@settings(max_examples=60, deadline=None)
@given(
    spatial=st.integers(1, 3),
    group=st.sampled_from([1, 2, 3]),
    data=st.data(),
)
def test_conv_random(spatial, group, data):
    ints = lambda lo, hi: st.lists(st.integers(lo, hi), min_size=spatial, max_size=spatial)  # noqa: E731
    kernel, strides, dilations = data.draw(ints(1, 3)), data.draw(ints(1, 3)), data.draw(ints(1, 2))
    pads = data.draw(st.lists(st.integers(0, 2), min_size=2 * spatial, max_size=2 * spatial))
    size = [d * (k - 1) + 1 + data.draw(st.integers(0, 4)) for k, d in zip(kernel, dilations)]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = randn(rng, 1, 2 * group, *size)
    w = randn(rng, group * data.draw(st.integers(1, 2)), 2, *kernel)
    attrs = {"strides": strides, "dilations": dilations, "pads": pads, "group": group}
    check_node("Conv", {"x": x}, attrs, constants={"w": w}, **CONV_TOL)


def test_conv_float16_accumulates_in_float32(rng):
    attrs = {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (1,) * 4, "dilations": (1, 1)}
    attrs["group"] = 1
    x, w = randn(rng, 1, 16, 6, 6), randn(rng, 8, 16, 3, 3)
    ref = get_op("Conv").reference
    half = ref(attrs, x.astype(np.float16), w.astype(np.float16))
    assert half.dtype == np.float16
    exact = ref(
        attrs, x.astype(np.float16).astype(np.float32), w.astype(np.float16).astype(np.float32)
    )
    np.testing.assert_allclose(half.astype(np.float32), exact, rtol=2e-3, atol=2e-3)


# ---- ConvTranspose -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "x_shape,w_shape,attrs",
    [
        ((1, 2, 5, 4), (2, 3, 3, 3), {}),
        ((2, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 3]}),
        ((1, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),
        (
            (1, 4, 5, 4),
            (4, 3, 3, 3),
            {
                "strides": [2, 3],
                "output_padding": [1, 2],
                "group": 2,
                "dilations": [1, 2],
                "pads": [1, 0, 0, 1],
            },
        ),  # fmt: skip
        ((1, 4, 5, 5), (4, 1, 3, 3), {"strides": [2, 2], "group": 4}),  # depthwise
        ((1, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 3], "output_shape": [10, 12]}),
        ((1, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 3], "output_shape": [9, 11]}),
        (
            (1, 2, 5, 4),
            (2, 3, 3, 3),
            {"strides": [2, 3], "output_shape": [9, 11], "auto_pad": "SAME_UPPER"},
        ),  # fmt: skip
        ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),  # > full
        ((1, 3, 7), (3, 2, 4), {"strides": [3], "output_padding": [2]}),  # 1D
        ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 0, 0, 1, 1]}),
    ],
)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose(x_shape, w_shape, attrs, bias, rng):
    constants = {"w": randn(rng, *w_shape)}
    if bias:
        constants["b"] = randn(rng, w_shape[1] * attrs.get("group", 1))
    check_node("ConvTranspose", {"x": randn(rng, *x_shape)}, attrs, constants, **CONV_TOL)


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("opset", [7, 11, 22])
def test_conv_transpose_auto_pad(auto_pad, opset, rng):
    attrs = {"auto_pad": auto_pad, "strides": [2, 3]}
    x, w = randn(rng, 1, 2, 5, 4), randn(rng, 2, 3, 3, 3)
    check_node("ConvTranspose", {"x": x}, attrs, constants={"w": w}, opset=opset, **CONV_TOL)


# ---- BatchNormalization --------------------------------------------------------------------------
def bn_params(rng, channels, dtype=np.float32):
    scale, bias, mean = (randn(rng, channels, dtype=dtype) for _ in range(3))
    return {"scale": scale, "bias": bias, "mean": mean, "var": np.abs(scale) + dtype(0.5)}


@pytest.mark.parametrize(
    "opset,attrs",
    [
        (7, {"spatial": 1, "momentum": 0.8}),
        (9, {"epsilon": 1e-3}),
        (14, {"training_mode": 0}),
        (15, {"epsilon": 1e-2, "momentum": 0.5}),
    ],
)
@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (2, 3), (1, 3, 4, 2, 2)])
def test_batch_norm(opset, attrs, x_shape, rng):
    check_node("BatchNormalization", {"x": randn(rng, *x_shape)}, attrs,
               constants=bn_params(rng, 3), opset=opset, atol=1e-5)  # fmt: skip


def test_batch_norm_statistics_at_run_time(rng):
    params = bn_params(rng, 4)
    inputs = {"x": randn(rng, 2, 4, 3, 3), **params}
    check_node("BatchNormalization", inputs, atol=1e-5)


# ---- errors a user may see -----------------------------------------------------------------------
def convert(op_type, inputs, attrs=None, constants=None, num_outputs=1, opset=17):
    return convert_model(single_node_model(op_type, inputs, attrs, constants, num_outputs, opset))


def test_conv_channel_mismatch_says_what(rng):
    with pytest.raises(ModelError, match="input has 4 channels.*group 1 needs 3"):
        convert("Conv", {"x": randn(rng, 1, 4, 5, 5)}, constants={"w": randn(rng, 2, 3, 3, 3)})
    with pytest.raises(ModelError, match="bias must have shape \\[2\\]"):
        convert("Conv", {"x": randn(rng, 1, 3, 5, 5)},
                constants={"w": randn(rng, 2, 3, 3, 3), "b": randn(rng, 3)})  # fmt: skip


def test_conv_kernel_too_large_and_bad_attrs(rng):
    with pytest.raises(ModelError, match="does not fit"):
        convert("Conv", {"x": randn(rng, 1, 3, 2, 2)}, constants={"w": randn(rng, 2, 3, 3, 3)})
    with pytest.raises(ModelError, match="strides \\[1\\] needs 2 values"):
        convert("Conv", {"x": randn(rng, 1, 3, 5, 5)}, {"strides": [1]},
                constants={"w": randn(rng, 2, 3, 3, 3)})  # fmt: skip
    with pytest.raises(ModelError, match="kernel_shape \\[2, 2\\] differs"):
        convert("Conv", {"x": randn(rng, 1, 3, 5, 5)}, {"kernel_shape": [2, 2]},
                constants={"w": randn(rng, 2, 3, 3, 3)})  # fmt: skip


def test_batch_norm_training_mode_is_an_error(rng):
    with pytest.raises(UnsupportedModelError, match="training_mode=1"):
        convert("BatchNormalization", {"x": randn(rng, 2, 3, 4)}, {"training_mode": 1},
                constants=bn_params(rng, 3), opset=15)  # fmt: skip
    with pytest.raises(ModelError, match="scale must have shape \\[3\\]"):
        convert("BatchNormalization", {"x": randn(rng, 2, 3, 4)}, constants=bn_params(rng, 4))
