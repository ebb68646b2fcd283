"""Vision ops (tvmc/ops/vision/) compiled natively, some interpreted as CUDA, against onnxruntime.

GridSample repeats the reference's float operations in the same order; onnxruntime sums the taps
in another order, so linear and cubic agree to a few float32 ulps (rtol 1e-5, atol 1e-5).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import run_graph_lowered
from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes

F32 = np.float32
CUDA = LoweringTarget(kind="cuda")
CLOSE = {"rtol": 1e-5, "atol": 1e-5}


def onnx_reference_check(op, inputs, attrs, constants, opset, rtol, atol) -> None:
    """One node lowered and run natively against ONNX's reference evaluator, for what
    onnxruntime lacks or gets wrong."""
    from onnx.reference import ReferenceEvaluator

    model = single_node_model(op, inputs, attrs, constants, opset=opset)
    expected = ReferenceEvaluator(model).run(None, inputs)
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    assert op in {n.op for n in graph.nodes}
    actual = run_graph_lowered(graph, inputs)
    for name, want in zip(graph.outputs, expected):
        np.testing.assert_allclose(actual[name], want, rtol=rtol, atol=atol)


# ---- GridSample ------------------------------------------------------------------------------
def sample_grid(rng, shape: tuple[int, ...]) -> np.ndarray:
    """Positions inside and well outside [-1, 1] (every padding rule matters), some exactly on
    pixel centres and edges (ties of nearest, borders of reflection)."""
    grid = rng.uniform(-2.5, 2.5, shape).astype(F32)
    flat = grid.reshape(-1)
    flat[::3] = rng.choice(np.linspace(-1.5, 1.5, 13), flat[::3].shape).astype(F32)
    return grid


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d(mode, padding_mode, align_corners, rng):
    x = rng.standard_normal((2, 3, 5, 6)).astype(F32)
    grid = sample_grid(rng, (2, 4, 7, 2))
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    check("GridSample", {"x": x, "grid": grid}, attrs, opset=20, **CLOSE)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_3d(mode, padding_mode, align_corners, rng):
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(F32)
    grid = sample_grid(rng, (1, 2, 3, 4, 3))
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    check("GridSample", {"x": x, "grid": grid}, attrs, opset=20, **CLOSE)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_opset_16_names(mode, rng):
    x = rng.standard_normal((1, 2, 4, 4)).astype(F32)
    grid = sample_grid(rng, (1, 3, 3, 2))
    check("GridSample", {"x": x, "grid": grid}, {"mode": mode}, opset=16, **CLOSE)
    check("GridSample", {"x": x, "grid": grid}, {}, opset=16, **CLOSE)  # bilinear by default


def test_grid_sample_single_pixel_and_float64(rng):
    """A 1-pixel axis: align_corners' reflection range is empty (every position is pixel 0)."""
    x = rng.standard_normal((1, 1, 1, 3))
    grid = sample_grid(rng, (1, 2, 5, 2)).astype(np.float64)
    for align_corners in (0, 1):
        attrs = {"padding_mode": "reflection", "align_corners": align_corners}
        check("GridSample", {"x": x, "grid": grid}, attrs, opset=20, **CLOSE)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_grid_sample_interpreted_and_cuda(mode, rng):
    x = rng.standard_normal((1, 2, 5, 4)).astype(F32)
    grid = sample_grid(rng, (1, 3, 6, 2))
    attrs = {"mode": mode, "padding_mode": "reflection"}
    check("GridSample", {"x": x, "grid": grid}, attrs, opset=20, use_interpreter=True, **CLOSE)
    check("GridSample", {"x": x, "grid": grid}, attrs, opset=20, target=CUDA, **CLOSE)


def test_grid_sample_bad_grid_names_the_node(rng):
    x = rng.standard_normal((1, 2, 5, 4)).astype(F32)
    model = single_node_model("GridSample", {"x": x, "grid": np.zeros((1, 3, 3, 3), F32)}, {},
                              opset=20)  # fmt: skip
    with pytest.raises(ModelError, match="GridSample.*grid \\[1, 3, 3, 3\\]"):
        convert_model(model)
    cubic = single_node_model("GridSample", {"x": x[None], "grid": np.zeros((1, 2, 2, 2, 3), F32)},
                              {"mode": "cubic"}, opset=20)  # fmt: skip
    with pytest.raises(ModelError, match="cubic mode takes 4-D"):
        convert_model(cubic)


# ---- AffineGrid ------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 1, 3), (2, 1, 3, 4, 2), (1, 2, 1, 2, 1)])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid(size, align_corners, rng):
    k = len(size) - 2
    theta = rng.standard_normal((size[0], k, k + 1)).astype(F32)
    sizes = {"size": np.array(size, np.int64)}
    attrs = {"align_corners": align_corners}
    check("AffineGrid", {"theta": theta}, attrs, sizes, opset=20, **CLOSE)


def test_affine_grid_cuda_and_float64(rng):
    theta = rng.standard_normal((2, 2, 3))
    size = {"size": np.array([2, 3, 5, 7], np.int64)}
    check("AffineGrid", {"theta": theta}, {}, size, opset=20, **CLOSE)
    check("AffineGrid", {"theta": theta.astype(F32)}, {}, size, opset=20, target=CUDA, **CLOSE)


# ---- RoiAlign --------------------------------------------------------------------------------
def regions(rng, count: int, height: int, width: int) -> np.ndarray:
    """(x1, y1, x2, y2) boxes: inside, crossing the border, tiny, and far outside the image."""
    corner = rng.uniform(-3, [width, height], (count, 2))
    size = rng.uniform(0.2, [width, height], (count, 2))
    boxes = np.concatenate([corner, corner + size], axis=1)
    boxes[-1] = [width + 5, height + 5, width + 9, height + 6]
    return boxes.astype(F32)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align(mode, ctm, sampling_ratio, rng):
    x = rng.standard_normal((2, 3, 10, 12)).astype(F32)
    rois = regions(rng, 6, 20, 24)  # spatial_scale 0.5: image coordinates
    batch = rng.integers(0, 2, 6).astype(np.int64)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "output_height": 3,
             "output_width": 4, "sampling_ratio": sampling_ratio, "spatial_scale": 0.5}  # fmt: skip
    check("RoiAlign", {"x": x, "rois": rois, "batch": batch}, attrs, opset=16, **CLOSE)


def test_roi_align_opset_10_and_constant_regions(rng):
    x = rng.standard_normal((1, 2, 6, 5)).astype(F32)
    constants = {"rois": regions(rng, 3, 6, 5), "batch": np.zeros(3, np.int64)}
    attrs = {"output_height": 2, "output_width": 2}
    check("RoiAlign", {"x": x}, attrs, constants, opset=10, **CLOSE)
    check("RoiAlign", {"x": x}, {**attrs, "mode": "max"}, constants, opset=16, **CLOSE)


def test_roi_align_float64_and_cuda(rng):
    x = rng.standard_normal((2, 2, 7, 6))
    inputs = {"x": x, "rois": regions(rng, 4, 7, 6).astype(np.float64),
              "batch": np.array([1, 0, 1, 0], np.int64)}  # fmt: skip
    attrs = {"output_height": 2, "output_width": 3}
    check("RoiAlign", inputs, attrs, opset=16, **CLOSE)
    inputs = {k: v.astype(F32) if v.dtype == np.float64 else v for k, v in inputs.items()}
    check("RoiAlign", inputs, attrs, opset=16, target=CUDA, **CLOSE)


# ---- Col2Im ----------------------------------------------------------------------------------
def col2im_case(rng, image, block, dilations, pads, strides, channels=2, dtype=F32):
    k = len(image)
    counts = [(image[d] + pads[d] + pads[d + k] - dilations[d] * (block[d] - 1) - 1)
              // strides[d] + 1 for d in range(k)]  # fmt: skip
    x = rng.standard_normal((2, channels * int(np.prod(block)), int(np.prod(counts))))
    constants = {"image_shape": np.array(image, np.int64), "block_shape": np.array(block, np.int64)}
    attrs = {"dilations": dilations, "pads": pads, "strides": strides}
    return {"x": x.astype(dtype)}, attrs, constants


@pytest.mark.parametrize(
    "image, block, dilations, pads, strides",
    [
        ((5, 6), (2, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
        ((7, 6), (3, 2), (2, 1), (1, 0, 2, 1), (2, 3)),  # overlaps, gaps, uneven pads
        ((4, 5, 3), (2, 2, 2), (1, 1, 1), (0, 1, 0, 1, 0, 2), (1, 2, 2)),
        ((9,), (4,), (1,), (3, 1), (3,)),
    ],
)
def test_col2im(image, block, dilations, pads, strides, rng):
    inputs, attrs, constants = col2im_case(rng, image, block, dilations, pads, strides)
    check("Col2Im", inputs, attrs, constants, opset=18, **CLOSE)


def test_col2im_defaults_integers_and_cuda(rng):
    inputs, _, constants = col2im_case(rng, (4, 4), (2, 2), (1, 1), (0,) * 4, (1, 1))
    check("Col2Im", inputs, {}, constants, opset=18, **CLOSE)
    ints = {"x": rng.integers(-9, 9, inputs["x"].shape).astype(np.int64)}  # not in onnxruntime
    onnx_reference_check("Col2Im", ints, {}, constants, opset=18, rtol=0, atol=0)
    inputs, attrs, constants = col2im_case(rng, (6, 5), (3, 2), (1, 2), (1, 1, 0, 1), (2, 1))
    check("Col2Im", inputs, attrs, constants, opset=18, target=CUDA, **CLOSE)


@pytest.mark.parametrize(
    "case",
    [((4, 5, 3), (2, 2, 1), (1, 2, 1), (0, 1, 0, 1, 0, 2), (1, 2, 2)),
     ((9,), (4,), (2,), (3, 1), (3,))],
)  # fmt: skip
def test_col2im_dilated_not_2d_against_the_onnx_reference(case, rng):
    """onnxruntime 1.32 misplaces dilated blocks outside 2-D (off by up to 7.5 here): ONNX's
    reference is the oracle for those."""
    inputs, attrs, constants = col2im_case(rng, *case)
    onnx_reference_check("Col2Im", inputs, attrs, constants, opset=18, **CLOSE)


# ---- MaxUnpool (a ScatterElements over the flattened output) -------------------------------------
def unpool_case(rng, shape, out_spatial, duplicates=False):
    """X and flat indices into an (N, C, out_spatial...) output, as MaxPool's Indices."""
    total = shape[0] * shape[1] * int(np.prod(out_spatial))
    x = rng.standard_normal(shape).astype(F32)
    count = int(np.prod(shape))
    flat = rng.integers(0, 3, count) if duplicates else rng.permutation(total)[:count]
    return x, flat.reshape(shape).astype(np.int64)


@pytest.mark.parametrize(
    "shape, attrs, out_spatial",
    [
        ((2, 3, 3, 4), {"kernel_shape": [2, 2], "strides": [2, 2]}, (6, 8)),
        ((1, 2, 3, 3), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 0, 1]}, (6, 3)),
        ((1, 2, 5), {"kernel_shape": [3]}, (7,)),
        ((1, 1, 2, 2, 3), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 1]}, (4, 4, 4)),
    ],
)
def test_max_unpool(shape, attrs, out_spatial, rng):
    x, indices = unpool_case(rng, shape, out_spatial)
    check("MaxUnpool", {"x": x, "i": indices}, attrs, expect="ScatterElements", opset=11,
          rtol=0, atol=0)  # fmt: skip


def test_max_unpool_output_shape_and_repeated_indices(rng):
    """output_shape (MaxPool's input had an odd size) frames the indices, as in onnxruntime;
    repeated indices: the last write wins, as there."""
    x, indices = unpool_case(rng, (1, 2, 2, 2), (5, 5), duplicates=True)
    shape = {"shape": np.array([1, 2, 5, 5], np.int64)}
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    check("MaxUnpool", {"x": x, "i": indices}, attrs, shape, expect="ScatterElements", opset=11,
          rtol=0, atol=0)  # fmt: skip


# ---- DeformConv (DeformableColumns, then a grouped MatMul) --------------------------------------
def deform_case(rng, x_shape, w_shape, attrs, offset_group=1, mask=True, bias=True):
    n, _, h, w = x_shape
    (kh, kw), s = w_shape[2:], attrs.get("strides", [1, 1])
    d, p = attrs.get("dilations", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
    oh = (h + p[0] + p[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (w + p[1] + p[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    inputs = {
        "x": rng.standard_normal(x_shape).astype(F32),
        "w": rng.standard_normal(w_shape).astype(F32),
        "offset": rng.uniform(-2.5, 2.5, (n, offset_group * kh * kw * 2, oh, ow)).astype(F32),
    }
    order = ["x", "w", "offset", "b" if bias else "", "mask" if mask else ""]
    if bias:
        inputs["b"] = rng.standard_normal(w_shape[0]).astype(F32)
    if mask:
        inputs["mask"] = rng.uniform(0, 1, (n, offset_group * kh * kw, oh, ow)).astype(F32)
    return inputs, order


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, offset_group",
    [
        ((2, 4, 6, 7), (5, 4, 3, 3), {}, 1),
        ((1, 4, 8, 6), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "pads": [1, 0, 2, 1]}, 2),
        ((1, 6, 7, 7), (4, 6, 2, 3), {"dilations": [2, 1], "pads": [1, 1, 1, 1]}, 3),
    ],
)
def test_deform_conv(x_shape, w_shape, attrs, offset_group, rng):
    inputs, order = deform_case(rng, x_shape, w_shape, attrs, offset_group)
    attrs = {**attrs, "offset_group": offset_group}
    check("DeformConv", inputs, attrs, opset=19, input_order=order, expect="DeformableColumns",
          **CLOSE)  # fmt: skip


def test_deform_conv_constant_weights_no_mask_no_bias_and_cuda(rng):
    inputs, order = deform_case(rng, (1, 3, 5, 5), (2, 3, 3, 3), {}, mask=False, bias=False)
    weights = {"w": inputs.pop("w")}
    check("DeformConv", inputs, {}, weights, opset=19, input_order=order,
          expect="DeformableColumns", **CLOSE)  # fmt: skip
    check("DeformConv", inputs, {}, weights, opset=19, input_order=order,
          expect="DeformableColumns", target=CUDA, **CLOSE)  # fmt: skip


def test_float16_sampling_computes_in_float32(rng):
    """float16 GridSample and RoiAlign interpolate in float32 and round once."""
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float16)
    grid = sample_grid(rng, (1, 3, 4, 2)).astype(np.float16)
    half = {"rtol": 1e-3, "atol": 1e-3}
    for mode in ("nearest", "linear", "cubic"):
        check("GridSample", {"x": x, "grid": grid}, {"mode": mode}, opset=20, **half)
    inputs = {"x": x, "rois": regions(rng, 3, 5, 6).astype(np.float16),
              "batch": np.zeros(3, np.int64)}  # fmt: skip
    check("RoiAlign", inputs, {"output_height": 2, "output_width": 2}, opset=16, **half)
