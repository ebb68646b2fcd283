"""Vision ops (tvmc/ops/vision/) compiled natively, some interpreted as CUDA, against onnxruntime.

GridSample repeats the reference's float operations in the same order; onnxruntime sums the taps
in another order, so linear and cubic agree to a few float32 ulps (rtol 1e-5, atol 1e-5).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget

F32 = np.float32
CUDA = LoweringTarget(kind="cuda")
CLOSE = {"rtol": 1e-5, "atol": 1e-5}


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
