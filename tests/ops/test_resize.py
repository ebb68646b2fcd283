"""Resize and Upsample against onnxruntime: every mode, coordinate rule and opset form."""

from __future__ import annotations

import numpy as np
import pytest

from tests.onnx_helpers import check_node, run_onnxruntime, run_tvmc_reference, single_node_model
from tvmc.errors import UnsupportedModelError
from tvmc.frontend import convert_model

F32 = np.float32
COORDINATE_MODES = [
    "half_pixel",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
SCALES = [(2.0, 3.0), (0.5, 0.6), (1.7, 0.8), (1.0, 2.5)]
SIZES = [(8, 15), (2, 3), (7, 4), (1, 1)]


def scales4(hw) -> np.ndarray:
    return np.array([1, 1, *hw], F32)


def sizes4(hw) -> np.ndarray:
    return np.array([2, 3, *hw], np.int64)


@pytest.fixture
def image(rng) -> np.ndarray:
    return rng.standard_normal((2, 3, 4, 5)).astype(F32)


def resize_constants(scales=None, sizes=None, roi=None) -> tuple[dict, list[str]]:
    """Resize-11+ constant inputs (scales or sizes, optional roi) and the node's input order."""
    constants = {"roi": roi} if roi is not None else {}
    order = ["x", "roi" if roi is not None else ""]
    if scales is not None:
        constants["scales"] = scales
        order.append("scales")
    else:
        constants["sizes"] = sizes
        order += ["", "sizes"]
    return constants, order


def resize(image, attrs, scales=None, sizes=None, roi=None, opset=13, **tolerance) -> None:
    """Resize-11+ with scales or sizes as constant inputs (absent ones left empty)."""
    constants, order = resize_constants(scales, sizes, roi)
    check_node(
        "Resize", {"x": image}, attrs, constants, input_order=order, opset=opset, **tolerance
    )


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
@pytest.mark.parametrize("hw", SCALES)
def test_nearest_scales(coordinate_mode, nearest_mode, hw, image):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coordinate_mode,
             "nearest_mode": nearest_mode}  # fmt: skip
    resize(image, attrs, scales=scales4(hw))


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("hw", SIZES)
def test_nearest_sizes(coordinate_mode, hw, image):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coordinate_mode}
    resize(image, attrs, sizes=sizes4(hw))


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES[:4])
@pytest.mark.parametrize("hw", SCALES)
def test_bilinear(coordinate_mode, hw, image):
    attrs = {"mode": "linear", "coordinate_transformation_mode": coordinate_mode}
    resize(image, attrs, scales=scales4(hw))


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES[:4])
@pytest.mark.parametrize("hw", SIZES)
def test_bilinear_sizes(coordinate_mode, hw, image):
    attrs = {"mode": "linear", "coordinate_transformation_mode": coordinate_mode}
    resize(image, attrs, sizes=sizes4(hw))


@pytest.mark.parametrize("coordinate_mode", ["half_pixel", "align_corners", "asymmetric"])
def test_trilinear(coordinate_mode, rng):
    volume = rng.standard_normal((1, 2, 3, 4, 5)).astype(F32)
    attrs = {"mode": "linear", "coordinate_transformation_mode": coordinate_mode}
    resize(volume, attrs, scales=np.array([1, 1, 2, 0.5, 1.5], F32))


def test_linear_2d(rng):
    plane = rng.standard_normal((4, 6)).astype(F32)
    resize(plane, {"mode": "linear"}, sizes=np.array([7, 3], np.int64))


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES[:4])
@pytest.mark.parametrize("exclude_outside", [0, 1])
@pytest.mark.parametrize("hw", SCALES[:3])
def test_bicubic(coordinate_mode, exclude_outside, hw, image):
    attrs = {"mode": "cubic", "coordinate_transformation_mode": coordinate_mode,
             "exclude_outside": exclude_outside, "cubic_coeff_a": -0.5}  # fmt: skip
    resize(image, attrs, scales=scales4(hw), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize(mode, image):
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": 9.0}  # fmt: skip
    roi = np.array([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4], F32)
    resize(image, attrs, sizes=sizes4((6, 7)), roi=roi, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_axes_and_aspect_ratio_opset_18(mode, policy, image):
    attrs = {"mode": mode, "axes": [3, 2], "keep_aspect_ratio_policy": policy}
    resize(image, attrs, sizes=np.array([9, 7], np.int64), opset=18)


def test_axes_with_scales_opset_19(image):
    attrs = {"mode": "linear", "axes": [2, 3],
             "coordinate_transformation_mode": "half_pixel_symmetric"}  # fmt: skip
    resize(image, attrs, scales=np.array([1.5, 0.7], F32), opset=19)


def test_integer_nearest(rng):
    pixels = rng.integers(0, 255, (1, 3, 4, 4)).astype(np.uint8)
    resize(pixels, {"mode": "nearest"}, scales=scales4((2.0, 1.5)))


# ---- Resize-10 and Upsample: fixed coordinate rules ----------------------------------------------
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("hw", SCALES)
def test_resize_opset_10(mode, hw, image):
    check_node("Resize", {"x": image}, {"mode": mode}, {"scales": scales4(hw)}, opset=10)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("hw", [(2.0, 3.0), (1.5, 2.5)])
def test_upsample_opset_7(mode, hw, image):
    check_node("Upsample", {"x": image}, {"mode": mode, "scales": [1.0, 1.0, *hw]}, opset=7)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("hw", [(2.0, 2.0), (3.0, 1.5)])
def test_upsample_opset_9(mode, hw, image):
    check_node("Upsample", {"x": image}, {"mode": mode}, {"scales": scales4(hw)}, opset=9)


def test_antialiased_downsampling_is_unsupported(image):
    model = single_node_model(
        "Resize", {"x": image}, {"mode": "linear", "antialias": 1},
        {"scales": scales4((0.5, 0.5))}, opset=18, input_order=["x", "", "scales"],
    )  # fmt: skip
    with pytest.raises(UnsupportedModelError, match="antialiased linear downsampling"):
        convert_model(model)


# ---- where onnxruntime departs from the ONNX spec: compare with onnx's reference evaluator -------
def check_against_onnx_reference(image, attrs, constants, order, opset) -> None:
    from onnx.reference import ReferenceEvaluator

    model = single_node_model("Resize", {"x": image}, attrs, constants, opset=opset,
                              input_order=order)  # fmt: skip
    (expected,) = ReferenceEvaluator(model).run(None, {"x": image})
    (actual,) = run_tvmc_reference(model, {"x": image})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_negative_axes_with_aspect_ratio(policy, image):
    """onnxruntime and onnx's evaluator mishandle negative axes here: compare with axes [3, 2]."""
    sizes = {"sizes": np.array([9, 7], np.int64)}
    models = [
        single_node_model("Resize", {"x": image}, {"mode": "linear", "axes": axes,
                          "keep_aspect_ratio_policy": policy}, sizes, opset=18,
                          input_order=["x", "", "", "sizes"])
        for axes in ([3, -2], [3, 2])
    ]  # fmt: skip
    (actual,) = run_tvmc_reference(models[0], {"x": image})
    (expected,) = run_onnxruntime(models[1], {"x": image})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_tf_crop_and_resize_on_an_unscaled_axis(image):
    """onnxruntime ignores the roi of axes whose size does not change."""
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}
    roi = np.array([0, 0, 0.1, 0.3, 1, 1, 0.9, 1.4], F32)
    constants = {"roi": roi, "sizes": sizes4((6, 5))}
    check_against_onnx_reference(image, attrs, constants, ["x", "roi", "", "sizes"], opset=13)


def test_tf_half_pixel_for_nearest():
    """Dropped by onnxruntime and later specs; Resize-11/13 define x_orig = (x + 0.5) / scale."""
    row = np.arange(4, dtype=F32).reshape(1, 4)
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nearest"}
    model = single_node_model("Resize", {"x": row}, attrs, {"scales": np.array([1, 2], F32)},
                              opset=13, input_order=["x", "", "scales"])  # fmt: skip
    (actual,) = run_tvmc_reference(model, {"x": row})
    assert actual.tolist() == [[0, 1, 1, 2, 2, 3, 3, 3]]
