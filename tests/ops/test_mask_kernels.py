"""Masks (tvmc/ops/tensor/mask.py: EyeLike, OneHot; Trilu is in test_tensor_kernels.py) and
CenterCropPad, which the frontend turns into one Pad, compiled natively, one case per op
interpreted as CUDA, against onnxruntime. Exact: every element is a copy or a literal.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check, run_direct
from tvmc.errors import ModelError, NonConstantInputError
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget

F32, I64 = np.float32, np.int64
EXACT = {"rtol": 0.0, "atol": 0.0}
CUDA = LoweringTarget(kind="cuda")


# ---- EyeLike -------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [-7, -1, 0, 2, 40])
@pytest.mark.parametrize("shape", [(4, 4), (3, 37), (37, 2)])
def test_eye_like(k, shape):
    check("EyeLike", {"x": np.zeros(shape, F32)}, {"k": k}, opset=9, **EXACT)


TYPES = [(np.int32, None), (F32, TensorProto.INT64), (np.int64, TensorProto.DOUBLE),
         (np.float16, TensorProto.FLOAT)]  # fmt: skip


@pytest.mark.parametrize("dtype,to", TYPES)
def test_eye_like_dtypes(dtype, to):
    attrs = {"k": 1} if to is None else {"k": 1, "dtype": to}
    check("EyeLike", {"x": np.ones((3, 5), dtype)}, attrs, opset=22, **EXACT)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16"])
def test_eye_like_types_onnxruntime_lacks_direct(dtype):
    run_direct("EyeLike", {"k": -1, "dtype": dtype}, np.zeros((4, 3), F32))


def test_eye_like_cuda():
    check("EyeLike", {"x": np.zeros((5, 33), F32)}, {"k": -2}, opset=9, target=CUDA)


def test_eye_like_needs_2d():
    model = single_node_model("EyeLike", {"x": np.zeros((2, 3, 4), F32)}, opset=9)
    with pytest.raises(ModelError, match="EyeLike node.*2-D"):
        convert_model(model)


# ---- OneHot --------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -3])
@pytest.mark.parametrize("runtime_values", [False, True])
def test_one_hot(axis, runtime_values, rng):
    indices = rng.integers(-12, 12, (3, 5)).astype(I64)  # some outside [-depth, depth): all off
    values = np.array([-1.5, 4.0], F32)
    inputs, constants = {"i": indices}, {"depth": np.array(10, I64)}
    if runtime_values:
        inputs["v"] = values
    else:
        constants["v"] = values
    order = ["i", "depth", "v"]
    check("OneHot", inputs, {"axis": axis}, constants, opset=11, input_order=order, **EXACT)


@pytest.mark.parametrize(
    "indices,depth,values",
    [
        (np.array([[0, 2], [1, -1]], np.int32), np.array([3], np.int32), np.array([0, 1], F32)),
        (np.array([1.7, -1.2, 5.0], F32), np.array(3, I64), np.array([2, 7], I64)),  # truncated
        (np.array([4, 0, -5], I64), np.array(4.0, F32), np.array([-2, 3], np.int32)),
        (np.array([1, -2], I64), np.array([2], I64), np.array([0.5, 1], np.float16)),
    ],
)
@pytest.mark.parametrize("opset", [9, 11])
def test_one_hot_dtypes(indices, depth, values, opset):
    constants = {"depth": depth, "v": values}
    check("OneHot", {"i": indices}, {}, constants, opset=opset, input_order=["i", "depth", "v"])


def test_one_hot_bool_values_and_uint8_indices_direct():
    """Types onnxruntime has no kernel for, against the reference."""
    indices = np.array([[3, 0], [9, 1]], np.uint8)
    run_direct("OneHot", {"depth": 4, "axis": 1}, indices, np.array([False, True]))


def test_one_hot_cuda(rng):
    indices = rng.integers(-4, 4, (2, 3)).astype(I64)
    constants = {"depth": np.array(4, I64), "v": np.array([0.0, 1.0], F32)}
    order = ["i", "depth", "v"]
    check("OneHot", {"i": indices}, {"axis": 1}, constants, opset=11, input_order=order,
          target=CUDA)  # fmt: skip


def test_one_hot_runtime_depth_is_refused():
    inputs = {"i": np.zeros(3, I64), "depth": np.array(4, I64)}
    model = single_node_model("OneHot", inputs, {}, {"v": np.array([0, 1], F32)}, opset=11)
    with pytest.raises(NonConstantInputError, match="OneHot node.*depth"):
        convert_model(model)


# ---- CenterCropPad (one Pad) ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "target,axes",
    [([2, 7, 40], None), ([5, 2, 36], None), ([1, 4], [0, 2]), ([9], [-2]), ([3, 4, 37], None)],
)
def test_center_crop_pad(target, axes, rng):
    x = rng.standard_normal((3, 4, 37)).astype(F32)
    attrs = {} if axes is None else {"axes": axes}
    constants = {"shape": np.array(target, I64)}
    check("CenterCropPad", {"x": x}, attrs, constants, opset=18, expect="Pad", **EXACT)


def test_center_crop_pad_integers_cuda(rng):
    x = rng.integers(-9, 9, (5, 6)).astype(np.int32)
    constants = {"shape": np.array([2, 9], I64)}
    check("CenterCropPad", {"x": x}, {}, constants, opset=18, expect="Pad", target=CUDA)
