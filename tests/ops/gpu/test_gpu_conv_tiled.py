"""The tiled direct GPU conv (input patches and weights staged in shared memory) against
onnxruntime through the GPU-semantics interpreter, its plan's limits, and the conv space that
offers it beside the implicit GEMM."""

from __future__ import annotations

import pytest

from tests.ops.gpu.test_gpu_lowering import gpu, randn
from tests.ops.gpu.test_gpu_ptx import CONV, CUDA, T, assemble, kernels_of
from tvmc.kernel import kernel_str
from tvmc.ops import OPS
from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.conv.gpu_tiled_plan import tiled_plan
from tvmc.ops.schedule.gpu_launch import GPUConfigError

TILED = {"schedule": "tiled"}
CONV_1D = {"kernel_shape": [3], "pads": [1, 1], "strides": [1], "dilations": [1]}
CASES = [
    ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (1, 4, 6, 6), (8, 4, 3, 3), {}),
    # channel steps that do not divide (4 = 3 + 1), a partial channel tile
    ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (1, 4, 6, 6), (6, 4, 3, 3),
     {"tile_m": (8, 2), "tile_n": (16, 2), "tile_k": 3}),
    # strides, dilations, groups, two images, pixel tiles that straddle the edge
    ({"kernel_shape": [3, 2], "strides": [2, 1], "dilations": [1, 2], "group": 2},
     (2, 4, 7, 6), (6, 2, 3, 2), {"tile_m": (4, 2), "tile_n": (8, 4), "tile_k": 1}),
    ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 6}, (1, 6, 5, 5), (6, 1, 3, 3), {}),
    ({"kernel_shape": [1, 1]}, (1, 8, 4, 4), (4, 8, 1, 1), {"tile_m": (4, 4), "tile_n": (4, 1)}),
    # asymmetric pads, stride 2: the last patch runs past the input's end
    ({"kernel_shape": [5, 5], "pads": [2, 1, 2, 1], "strides": [2, 2]}, (1, 5, 11, 9),
     (7, 5, 5, 5), {"tile_m": (8, 4), "tile_n": (32, 4), "tile_k": 2, "unroll_k": True}),
]  # fmt: skip


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("attrs,x,w,config", CASES)
def test_tiled_conv_matches_onnxruntime(attrs, x, w, config, double, rng):
    constants = {"w": randn(rng, *w), "b": randn(rng, w[0])}
    config = {**TILED, **config, "double_buffer": double}
    if double and x == (1, 5, 11, 9):  # 16 threads would stage 52 values each
        with pytest.raises(GPUConfigError, match="stage 52 values"):
            kernels_of("Conv", [T(*x), T(*w)], {**CONV, **attrs}, config)
        return
    gpu("Conv", {"x": randn(rng, *x)}, attrs, constants, config=config)


@pytest.mark.parametrize("split,double", [(2, False), (4, False), (2, True)])
def test_tiled_conv_split_across_blocks(split, double, rng):
    # 8 channels in 4 steps of 2, cut into `split` slices summed (with the bias) by a second kernel
    constants = {"w": randn(rng, 6, 8, 3, 3), "b": randn(rng, 6)}
    config = {**TILED, "tile_m": (8, 2), "tile_n": (16, 2), "tile_k": 2, "split_k": split,
              "double_buffer": double}  # fmt: skip
    gpu("Conv", {"x": randn(rng, 1, 8, 5, 5)}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        constants, config=config)  # fmt: skip
    kernels = kernels_of("Conv", [T(1, 8, 5, 5), T(6, 8, 3, 3)], CONV, config)
    assert [k.name.rsplit("_", 1)[-1] for k in kernels] == ["tiled", "sum"]
    with pytest.raises(GPUConfigError, match="split_k 3"):
        kernels_of("Conv", [T(1, 8, 5, 5), T(6, 8, 3, 3)], CONV, {**config, "split_k": 3})


def test_tiled_conv_splits_late_layers_by_default():
    # 512 channels on a 7 x 7 map: one block of outputs, 64 channel steps to share out
    kernels = kernels_of("Conv", [T(1, 512, 7, 7), T(64, 512, 3, 3)], CONV, TILED)
    assert len(kernels) == 2


@pytest.mark.parametrize("double", [False, True])
def test_tiled_conv_with_runtime_weights(double, rng):
    gpu("Conv", {"x": randn(rng, 1, 4, 5, 5), "w": randn(rng, 3, 4, 3, 3)},
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        config={**TILED, "tile_k": 1, "double_buffer": double})  # fmt: skip


def _geometry(icg=64, ocg=64, size=14, kernel=3) -> ConvGeometry:
    return ConvGeometry(1, icg, ocg, 1, (size, size), (kernel, kernel), (size, size), (1, 1),
                        (1, 1), (kernel // 2, kernel // 2), (1, 1))  # fmt: skip


def test_plan_shapes_the_pixel_tile_from_the_row():
    plan = tiled_plan({"tile_m": (32, 4), "tile_n": (64, 4), "tile_k": 8}, _geometry(size=14))
    assert (plan.ohb, plan.owb, plan.pxt) == (4, 16, 4)  # rows of 14 round up to 16 columns
    assert plan.patch == (6, 18) and plan.threads == 8 * 4 * 4
    assert tiled_plan({"tile_k": 32}, _geometry(icg=3)).icb == 3  # clamped to the channels


def test_plan_rejects_what_no_gpu_launches():
    with pytest.raises(GPUConfigError, match="shared memory"):
        tiled_plan({"tile_m": (128, 8), "tile_n": (128, 8), "tile_k": 32}, _geometry(size=56))
    with pytest.raises(GPUConfigError, match="threads"):
        tiled_plan({"tile_m": (128, 1), "tile_n": (128, 1), "tile_k": 1}, _geometry(size=56))
    with pytest.raises(GPUConfigError, match="2-D"):
        kernels_of("Conv", [T(1, 4, 9), T(4, 4, 3)], CONV_1D, TILED)


def test_space_offers_the_tiled_form_and_names_the_default():
    types = [T(1, 32, 14, 14), T(64, 32, 3, 3)]
    space = OPS["Conv"].space(OPS["Conv"].normalize_attrs(CONV, "t"), types, CUDA)
    assert dict(zip([k.name for k in space.knobs], [k.candidates for k in space.knobs]))[
        "schedule"
    ] == ("gemm", "tiled")
    default = space.get(space.default_index).values
    assert default["schedule"] == "gemm" and not default["double_buffer"]
    same = [kernel_str(k) for k in kernels_of("Conv", types, CONV, default)]
    assert same == [kernel_str(k) for k in kernels_of("Conv", types, CONV)]
    depthwise = [T(1, 32, 14, 14), T(32, 1, 3, 3)]
    dw_attrs = OPS["Conv"].normalize_attrs({**CONV, "group": 32}, "t")
    dw = OPS["Conv"].space(dw_attrs, depthwise, CUDA)
    assert {k.name for k in dw.knobs} == {"block", "schedule", "tile_n"}
    assert dw.get(dw.default_index).values["schedule"] == "direct"
    one_d = OPS["Conv"].space(
        OPS["Conv"].normalize_attrs(CONV_1D, "t"), [T(1, 4, 9), T(4, 4, 3)], CUDA
    )
    assert "schedule" not in {k.name for k in one_d.knobs}


def test_tiled_ptx_assembles(tmp_path):
    config = {**TILED, "tile_m": (64, 4), "tile_n": (64, 4), "tile_k": 8}
    assemble(kernels_of("Conv", [T(1, 64, 14, 14), T(64, 64, 3, 3)], CONV, config), tmp_path)
    depthwise = kernels_of("Conv", [T(1, 32, 28, 28), T(32, 1, 3, 3)], {**CONV, "group": 32},
                           {**TILED, "tile_n": (128, 4)})  # fmt: skip
    assemble(depthwise, tmp_path)
