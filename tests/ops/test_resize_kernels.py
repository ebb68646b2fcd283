"""Resize's compute (coordinates, taps and weights computed in the expression) vs onnxruntime.

Nearest is exact (the coordinates repeat the reference's float32 operations); linear and cubic
interpolate in float32 where onnxruntime and the reference use other orders or float64, so they
use rtol 1e-5, atol 1e-6 (linear) and the reference tests' rtol 1e-4, atol 1e-5 (cubic).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.ops.kernel_checks import check
from tests.ops.template_checks import check_template, loop_kinds
from tests.ops.test_resize import resize_constants, scales4, sizes4

F32 = np.float32
COORDINATE_MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
SCALES = [(2.0, 3.0), (0.5, 0.6), (1.7, 0.8)]
SIZES = [(8, 40), (2, 3), (1, 1)]
CUBIC = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture
def image(rng) -> np.ndarray:
    return rng.standard_normal((2, 3, 4, 13)).astype(F32)


def resize(image, attrs, scales=None, sizes=None, roi=None, opset=13, **options) -> None:
    """Resize-11+ with scales or sizes as constant inputs (absent ones left empty)."""
    constants, order = resize_constants(scales, sizes, roi)
    check("Resize", {"x": image}, attrs, constants, input_order=order, opset=opset, **options)


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
@pytest.mark.parametrize("hw", SCALES[1:])
def test_nearest_scales(coordinate_mode, nearest_mode, hw, image):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coordinate_mode,
             "nearest_mode": nearest_mode}  # fmt: skip
    resize(image, attrs, scales=scales4(hw), rtol=0, atol=0)


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("hw", SIZES)
def test_nearest_sizes(coordinate_mode, hw, image):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coordinate_mode}
    resize(image, attrs, sizes=sizes4(hw), rtol=0, atol=0)


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("hw", SCALES)
def test_bilinear(coordinate_mode, hw, image):
    attrs = {"mode": "linear", "coordinate_transformation_mode": coordinate_mode}
    resize(image, attrs, scales=scales4(hw))


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("hw", SIZES[:2])
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


@pytest.mark.parametrize("coordinate_mode", COORDINATE_MODES)
@pytest.mark.parametrize("exclude_outside", [0, 1])
def test_bicubic(coordinate_mode, exclude_outside, image):
    attrs = {"mode": "cubic", "coordinate_transformation_mode": coordinate_mode,
             "exclude_outside": exclude_outside, "cubic_coeff_a": -0.5}  # fmt: skip
    resize(image, attrs, scales=scales4((2.0, 2.0)), **CUBIC)  # rows of 26: scalar loops


@pytest.mark.parametrize("exclude_outside", [0, 1])
def test_bicubic_vectorized(exclude_outside, image):
    attrs = {"mode": "cubic", "exclude_outside": exclude_outside}  # cubic_coeff_a: -0.75
    resize(image, attrs, scales=scales4((0.5, 3.0)), **CUBIC)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize(mode, image):
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": 9.0}  # fmt: skip
    roi = np.array([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4], F32)
    resize(image, attrs, sizes=sizes4((6, 7)), roi=roi, **CUBIC)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("policy", ["stretch", "not_smaller"])
def test_axes_and_aspect_ratio_opset_18(mode, policy, image):
    attrs = {"mode": mode, "axes": [3, 2], "keep_aspect_ratio_policy": policy}
    resize(image, attrs, sizes=np.array([35, 7], np.int64), opset=18)


def test_axes_with_scales_opset_19(image):
    attrs = {"mode": "linear", "axes": [2, 3],
             "coordinate_transformation_mode": "half_pixel_symmetric"}  # fmt: skip
    resize(image, attrs, scales=np.array([1.5, 0.7], F32), opset=19)


def test_integer_nearest(rng):
    pixels = rng.integers(0, 255, (1, 3, 4, 16)).astype(np.uint8)
    resize(pixels, {"mode": "nearest"}, scales=scales4((2.0, 1.5)))


def test_interpreted(image):
    resize(image, {"mode": "linear"}, scales=scales4((1.5, 2.0)), use_interpreter=True)
    resize(image, {"mode": "cubic"}, scales=scales4((0.5, 1.5)), use_interpreter=True, **CUBIC)


# ---- Resize-10 and Upsample: fixed coordinate rules ----------------------------------------------
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("hw", SCALES)
def test_resize_opset_10(mode, hw, image):
    check("Resize", {"x": image}, {"mode": mode}, {"scales": scales4(hw)}, opset=10)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample(mode, image):
    check("Upsample", {"x": image}, {"mode": mode, "scales": [1.0, 1.0, 2.0, 3.0]}, opset=7,
          expect="Resize")  # fmt: skip
    check("Upsample", {"x": image}, {"mode": mode}, {"scales": scales4((3.0, 1.5))}, opset=9,
          expect="Resize")  # fmt: skip


@pytest.mark.parametrize(("mode", "kinds"), [("linear", {"parallel"}), ("nearest", set())])
def test_a_bilinear_upsample_is_parallel_where_its_taps_make_the_work(mode, kinds):
    # 1x2x8x8 -> 64x64: 8,192 elements, under the copies' worth a fork/join pays for; bilinear
    # reads (gathers) four input elements per output element, nearest one
    from onnx import TensorProto, helper

    from tvmc.frontend import convert_model
    from tvmc.lower.lower import lower_kernels
    from tvmc.ops.lowering import LoweringTarget
    from tvmc.ops.schedule.injective import PARALLEL_MIN_ELEMENTS

    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 8, 8])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 64, 64])], [scales],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    state = lower_kernels(convert_model(model), LoweringTarget(num_threads=2))
    assert 8192 < PARALLEL_MIN_ELEMENTS <= 4 * 8192
    assert loop_kinds(state.kernels) & {"parallel"} == kinds


# ---- an integer upsample of the last axis as contiguous vectors (tvmc.ops.resize.template) -------
def upsampled(kernels) -> bool:
    """Whether the kernels include the contiguous upsample (not only the compute's gathers)."""
    return any(k.name.endswith("resize_upsample") for k in kernels)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize(
    "coordinate_mode", ["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"]
)
@pytest.mark.parametrize(("factor", "width"), [(2, 37), (3, 37), (8, 37), (16, 37), (16, 5)])
@pytest.mark.parametrize("epilogue", [False, True])
def test_an_integer_upsample_of_the_last_axis_reads_contiguous_vectors(
    mode, coordinate_mode, factor, width, epilogue, rng
):
    """Rows of 37 by fewer than a vector's lanes (16 here): a vector or two of q's, a last one
    moved back without an epilogue, edges element by element; by 16, each q's 16 outputs as a
    vector, rows of 5 too (the edge q's with their own taps). Against onnxruntime, with and
    without a fused epilogue that reads another tensor at the stored indices. align_corners's
    weights do not repeat: the compute's path (its nearest taps may, over a run of q's:
    `last_axis_period` checks every one)."""
    image = rng.standard_normal((1, 3, 5, width)).astype(F32)
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinate_mode}
    constants, order = resize_constants(scales=np.array([1, 1, 2, factor], F32))
    exact = {"rtol": 0, "atol": 0} if mode == "nearest" else {}
    kernels = check_template("Resize", {"x": image}, attrs, constants, opset=13,
                             epilogue=epilogue, input_order=order, **exact)  # fmt: skip
    if coordinate_mode != "align_corners":
        assert upsampled(kernels)
    elif mode == "linear" and width == 37:  # rows of 5 are few q's, each with its own taps
        assert not upsampled(kernels)


def test_an_integer_upsample_keeps_integers_and_only_the_last_axis(rng):
    pixels = rng.integers(0, 255, (2, 3, 40)).astype(np.uint8)
    constants, order = resize_constants(scales=np.array([1, 1, 4], F32))
    kernels = check_template("Resize", {"x": pixels}, {"mode": "nearest"}, constants, opset=13,
                             input_order=order, rtol=0, atol=0)  # fmt: skip
    assert upsampled(kernels)


def test_last_axis_period_of_a_bilinear_upsample_by_two():
    """half_pixel x2: output 2q reads q-1 and q (weights 1/4, 3/4), 2q+1 reads q and q+1 (3/4,
    1/4); the first and last q clamp their taps, so the repeating part is q in [1, n-1)."""
    from tvmc.ops.resize.template import last_axis_period

    attrs = {"sizes": [1, 16], "scales": [1.0, 2.0], "mode": "linear", "roi": None,
             "coordinate_transformation_mode": "half_pixel", "exclude_outside": 0,
             "nearest_mode": "round_prefer_floor", "cubic_coeff_a": -0.75}  # fmt: skip
    period = last_axis_period(attrs, (1, 8))
    assert period is not None
    assert (period.factor, period.lo, period.hi) == (2, 1, 7)
    assert period.offsets == ((-1, 0), (0, 1))
    assert period.weights == ((0.25, 0.75), (0.75, 0.25))
    assert last_axis_period({**attrs, "sizes": [1, 12], "scales": [1.0, 1.5]}, (1, 8)) is None
    assert last_axis_period({**attrs, "mode": "cubic"}, (1, 8)) is None
    # an axis too long to check at compile time keeps the compute (tables of 2^28 outputs took
    # 23 GB); the longest checked one is taken
    from tvmc.ops.resize.template import MAX_CHECKED

    longest = {**attrs, "sizes": [1, MAX_CHECKED]}
    assert last_axis_period(longest, (1, MAX_CHECKED // 2)) is not None
    longer = {**attrs, "sizes": [1, 2 * MAX_CHECKED]}
    assert last_axis_period(longer, (1, MAX_CHECKED)) is None
    # align_corners's weights change with q: the run is the middle q alone
    corners = last_axis_period({**attrs, "coordinate_transformation_mode": "align_corners"},
                               (1, 8))  # fmt: skip
    assert corners is not None and corners.hi - corners.lo == 1


@pytest.mark.parametrize("factor", [2, 16])
def test_an_integer_upsample_runs_in_the_kernel_interpreter(factor, rng):
    image = rng.standard_normal((1, 2, 3, 20)).astype(F32)
    constants, order = resize_constants(scales=np.array([1, 1, 2, factor], F32))
    kernels = check_template("Resize", {"x": image}, {"mode": "linear"}, constants, opset=13,
                             input_order=order, use_interpreter=True)  # fmt: skip
    assert upsampled(kernels)


def test_an_upsample_unrolls_at_most_max_chunks_vectors_a_q(rng):
    """A q's outputs are unrolled vector by vector: up to MAX_CHUNKS vectors (16 lanes here) the
    upsample kernel, beyond the compute (a factor of 4096 took 11 s to compile unrolled)."""
    from tvmc.ops.resize.template import MAX_CHUNKS

    image = rng.standard_normal((1, 1, 2, 3)).astype(F32)
    for factor, taken in [(MAX_CHUNKS * 16, True), (MAX_CHUNKS * 16 + 16, False)]:
        constants, order = resize_constants(scales=np.array([1, 1, 1, factor], F32))
        kernels = check_template("Resize", {"x": image}, {"mode": "linear"}, constants,
                                 opset=13, input_order=order)  # fmt: skip
        assert upsampled(kernels) == taken
