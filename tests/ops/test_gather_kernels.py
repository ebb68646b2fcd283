"""Gathers (tvmc/ops/tensor/gather.py: GatherElements, GatherND, ReverseSequence; Compress, which
the frontend turns into Gather) compiled natively, one case per op interpreted as CUDA, against
onnxruntime. Pure data movement: exact. Indices outside the data are clamped, never read out of
bounds (no ONNX meaning: onnxruntime rejects them), and the errors a model can cause name the node.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import run_node
from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check
from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend import convert_model
from tvmc.graph import Node, TensorType
from tvmc.ops.lowering import LoweringTarget

F32, I32, I64 = np.float32, np.int32, np.int64
EXACT = {"rtol": 0.0, "atol": 0.0}
CUDA = LoweringTarget(kind="cuda")


def i64(*values) -> np.ndarray:
    return np.array(values, dtype=I64)


# ---- GatherElements ------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("opset", [11, 13])
def test_gather_elements(axis, opset, rng):
    data = rng.standard_normal((3, 4, 37)).astype(F32)
    shape = [3, 4, 37]
    shape[axis] = 5  # the gathered axis may be longer than the data's; the others shorter
    shape[(axis + 1) % 3] -= 1
    dim = data.shape[axis]
    indices = rng.integers(-dim, dim, shape).astype(I64)
    check("GatherElements", {"x": data, "i": indices}, {"axis": axis}, opset=opset, **EXACT)


@pytest.mark.parametrize("dtype", [I64, np.int8, np.bool_, np.float16])
def test_gather_elements_dtypes_and_constant_int32_indices(dtype, rng):
    data = rng.integers(-5, 5, (6, 3)).astype(dtype)
    indices = np.array([[5, -6, 2], [0, 1, -1]], I32)
    check("GatherElements", {"x": data}, {"axis": 0}, constants={"i": indices}, **EXACT)


def test_gather_elements_cuda(rng):
    data = rng.standard_normal((4, 33)).astype(F32)
    indices = rng.integers(-33, 33, (4, 40)).astype(I64)
    check("GatherElements", {"x": data, "i": indices}, {"axis": 1}, target=CUDA, **EXACT)


def test_gather_elements_out_of_range_is_clamped(rng):
    data = rng.standard_normal((2, 5)).astype(F32)
    node = Node("GatherElements", ["d", "i"], ["y"], {"axis": 1})
    (y,) = run_node(node, [data, i64([9, -9], [4, -5])], [TensorType((2, 2), "float32")])
    np.testing.assert_array_equal(y, [[data[0, 4], data[0, 0]], [data[1, 4], data[1, 0]]])


def test_gather_elements_wider_indices_are_an_error(rng):
    data = rng.standard_normal((3, 4)).astype(F32)
    indices = np.zeros((4, 2), I64)
    model = single_node_model("GatherElements", {"x": data, "i": indices}, {"axis": 1})
    with pytest.raises(ModelError, match="GatherElements node.*exceed data"):
        convert_model(model)


# ---- GatherND ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data_shape,indices_shape,batch_dims",
    [
        ((5, 37), (3, 1), 0),  # rows
        ((5, 37), (2, 3, 2), 0),  # elements
        ((4, 5, 6), (2, 2), 0),  # a (4, 5) tuple picks a row of 6
        ((2, 5, 37), (2, 3, 1), 1),
        ((2, 3, 4, 5), (2, 3, 2), 2),
        ((2, 3, 4), (2, 1, 3, 1), 1),  # extra index dims between batch and tuple
    ],
)
@pytest.mark.parametrize("opset", [12, 13])
def test_gather_nd(data_shape, indices_shape, batch_dims, opset, rng):
    data = rng.standard_normal(data_shape).astype(F32)
    k = indices_shape[-1]
    dims = np.array(data_shape[batch_dims : batch_dims + k])
    indices = (rng.integers(0, 1 << 20, indices_shape) % dims - (rng.random(indices_shape) < 0.3)
               * dims).astype(I64)  # fmt: skip
    attrs = {"batch_dims": batch_dims}
    check("GatherND", {"x": data, "i": indices}, attrs, opset=opset, **EXACT)


def test_gather_nd_opset_11_and_constant_indices(rng):
    data = rng.integers(-9, 9, (4, 3, 2)).astype(I32)
    check("GatherND", {"x": data}, constants={"i": i64([[1, 2], [-1, 0]])}, opset=11)


def test_gather_nd_cuda(rng):
    data = rng.standard_normal((2, 5, 6)).astype(F32)
    indices = np.array([[[4], [-1]], [[0], [2]]], I64)
    check("GatherND", {"x": data, "i": indices}, {"batch_dims": 1}, target=CUDA, **EXACT)


def test_gather_nd_bad_batch_dims_names_the_node(rng):
    data = rng.standard_normal((2, 3)).astype(F32)
    model = single_node_model("GatherND", {"x": data, "i": np.zeros((2, 1), I64)},
                              {"batch_dims": 2}, opset=13)  # fmt: skip
    with pytest.raises(ModelError, match="GatherND node.*batch_dims 2"):
        convert_model(model)


# ---- ReverseSequence -----------------------------------------------------------------------------
@pytest.mark.parametrize("time_axis,batch_axis", [(0, 1), (1, 0)])
def test_reverse_sequence(time_axis, batch_axis, rng):
    x = rng.standard_normal((4, 5, 37) if time_axis == 0 else (5, 4, 37)).astype(F32)
    lens = i64(4, 1, 0, 3, 2)
    attrs = {"time_axis": time_axis, "batch_axis": batch_axis}
    check("ReverseSequence", {"x": x, "lens": lens}, attrs, opset=10, **EXACT)


def test_reverse_sequence_integers_constant_lengths_cuda(rng):
    x = rng.integers(-9, 9, (3, 6)).astype(I64)
    attrs = {"time_axis": 1, "batch_axis": 0}
    check("ReverseSequence", {"x": x}, attrs, constants={"lens": i64(6, 2, 1)}, opset=10)
    check("ReverseSequence", {"x": x}, attrs, {"lens": i64(6, 2, 1)}, opset=10, target=CUDA)


# ---- Compress (a Gather of the kept positions) ---------------------------------------------------
@pytest.mark.parametrize(
    "axis,condition",
    [(0, [0, 1, 1]), (1, [1, 0, 1, 1, 0]), (-1, [True] * 36 + [False]), (None, [0, 1, 0, 1, 1])],
)
def test_compress(axis, condition, rng):
    x = rng.standard_normal((3, 5, 37)).astype(F32)
    attrs = {} if axis is None else {"axis": axis}
    constants = {"c": np.array(condition, bool)}
    check("Compress", {"x": x}, attrs, constants, opset=11, expect="Gather", **EXACT)


def test_compress_longer_condition_and_cuda(rng):
    x = rng.integers(0, 9, (4, 3)).astype(I32)
    constants = {"c": np.array([1, 0, 1, 1, 1], bool)}  # entries past the axis are unused
    check("Compress", {"x": x}, {"axis": 0}, constants, opset=9, expect="Gather")
    check("Compress", {"x": x}, {"axis": 0}, constants, opset=11, expect="Gather", target=CUDA)


def test_compress_runtime_condition_is_refused(rng):
    x = rng.standard_normal((3, 4)).astype(F32)
    model = single_node_model("Compress", {"x": x, "c": np.ones(3, bool)}, {"axis": 0}, opset=11)
    with pytest.raises(UnsupportedModelError, match="Compress node.*condition.*constant"):
        convert_model(model)
