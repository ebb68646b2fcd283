"""Injective tensor computes (re-indexing ops), compiled natively (a few interpreted), vs ORT.

Pure data movement: results must match exactly (the tolerance only matters for no op here).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lowering_helpers import run_node
from tests.ops.kernel_checks import check, run_direct
from tvmc.graph import Node, TensorType
from tvmc.ops.tensor.shape import reshape_groups

F32 = np.float32
I64 = np.int64
EXACT = {"rtol": 0.0, "atol": 0.0}


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=I64)


@pytest.fixture
def x(rng) -> np.ndarray:
    return rng.standard_normal((2, 3, 4, 5)).astype(F32)


@pytest.fixture
def wide(rng) -> np.ndarray:
    """A last axis long enough for the vectorized loop and its tail."""
    return rng.standard_normal((2, 3, 4, 37)).astype(F32)


# ---- Concat / Split ------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 3, -1])
def test_concat(axis, rng):
    shapes = [[2, 3, 4, 35] for _ in range(3)]
    for i, s in enumerate(shapes):
        s[axis] += i
    a, b, c = (rng.standard_normal(s).astype(F32) for s in shapes)
    check("Concat", {"a": a, "b": b}, {"axis": axis}, constants={"c": c}, **EXACT)


@pytest.mark.parametrize("dtype", [I64, np.bool_])
def test_concat_other_dtypes(dtype, rng):
    a, b = (rng.integers(-3, 3, (3, n)).astype(dtype) for n in (2, 40))
    check("Concat", {"a": a, "b": b}, {"axis": 1})


def test_concat_interpreted(rng):
    a, b = (rng.standard_normal((2, n)).astype(F32) for n in (3, 36))
    check("Concat", {"a": a, "b": b}, {"axis": -1}, use_interpreter=True)


@pytest.mark.parametrize(
    "opset,attrs,split,outputs",
    [
        (11, {"axis": 1}, None, 3),  # equal parts, one per output
        (11, {"axis": -1, "split": [1, 36]}, None, 2),
        (13, {"axis": 3}, [2, 30, 5], 3),  # sizes as an input
        (13, {"axis": 0}, None, 2),
        (18, {"axis": 3, "num_outputs": 2}, None, 2),  # uneven: 19 + 18
        (18, {"axis": 1, "num_outputs": 2}, None, 2),  # uneven: 2 + 1
    ],
)
def test_split(opset, attrs, split, outputs, wide):
    constants = {"split": i64(*split)} if split is not None else {}
    check("Split", {"x": wide}, attrs, constants, num_outputs=outputs, opset=opset, **EXACT)


def test_split_with_an_empty_part(x):
    check("Split", {"x": x}, {"axis": 3}, {"split": i64(2, 0, 3)}, num_outputs=3, opset=13)


# ---- Slice ---------------------------------------------------------------------------------------
BIG = np.iinfo(np.int64).max


@pytest.mark.parametrize(
    "starts,ends,axes,steps",
    [
        ([0, 1], [2, 3], None, None),
        ([1], [-1], [3], None),
        ([-100, 2], [100, BIG], [1, 2], [1, 1]),
        ([-1], [-BIG], [3], [-1]),  # reversed axis
        ([30, 3], [0, -100], [3, 2], [-2, -1]),
        ([0, 1], [37, 4], [-1, 1], [2, 3]),
    ],
)
def test_slice(starts, ends, axes, steps, wide):
    constants = {"starts": i64(*starts), "ends": i64(*ends)}
    order = ["x", "starts", "ends"]
    if axes is not None:
        constants["axes"] = i64(*axes)
        order.append("axes")
    if steps is not None:
        constants["steps"] = i64(*steps)
        order += [] if axes is not None else [""]
        order.append("steps")
    check("Slice", {"x": wide}, constants=constants, input_order=order, **EXACT)


@settings(max_examples=15, deadline=None)
@given(
    bounds=st.lists(
        st.tuples(st.integers(-8, 8), st.integers(-8, 8), st.sampled_from([-3, -2, -1, 1, 2, 3])),
        min_size=4,
        max_size=4,
    )
)
def test_slice_random_bounds(bounds):
    data = np.arange(2 * 3 * 4 * 5, dtype=F32).reshape(2, 3, 4, 5)
    starts, ends, steps = zip(*bounds)
    constants = {"s": i64(*starts), "e": i64(*ends), "a": i64(0, 1, 2, 3), "st": i64(*steps)}
    check("Slice", {"x": data}, constants=constants, **EXACT)


# ---- Reshape family ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape", [[6, 148], [0, -1], [-1], [2, 0, 4, 37], [1, 2, 1, 444], [24, 37], [4, 3, 2, 37]]
)
def test_reshape(shape, wide):
    check("Reshape", {"x": wide}, constants={"shape": i64(*shape)}, **EXACT)


@pytest.mark.parametrize(
    "in_shape,out_shape,groups",
    [
        ((2, 3, 4), (6, 4), [([0, 1], [0]), ([2], [1])]),
        ((2, 3, 4), (2, 12), [([0], [0]), ([1, 2], [1])]),
        ((1, 3, 1, 5), (3, 5), [([0], []), ([1], [0]), ([2], []), ([3], [1])]),
        ((6,), (2, 1, 3, 1), [([0], [0, 1, 2]), ([], [3])]),
        ((4, 6), (3, 8), [([0, 1], [0, 1])]),
    ],
)
def test_reshape_groups(in_shape, out_shape, groups):
    assert reshape_groups(in_shape, out_shape) == groups


@pytest.mark.parametrize("dtype", [I64, np.bool_, np.uint8])
def test_reshape_other_dtypes(dtype, rng):
    data = rng.integers(0, 3, (3, 4, 5)).astype(dtype)
    check("Reshape", {"x": data}, constants={"shape": i64(5, 12)})


@pytest.mark.parametrize("axis", [0, 1, 3, -1])
def test_flatten(axis, wide):
    check("Flatten", {"x": wide}, {"axis": axis}, opset=13, expect="Reshape", **EXACT)


def test_squeeze_unsqueeze(rng):
    data = rng.standard_normal((1, 3, 1, 35)).astype(F32)
    check("Squeeze", {"x": data}, constants={"a": i64(0, 2)}, opset=13, expect="Reshape")
    check("Unsqueeze", {"x": data}, constants={"a": i64(1, -1)}, opset=13, expect="Reshape")


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode, rng):
    data = rng.standard_normal((2, 8, 3, 4)).astype(F32)
    attrs = {"blocksize": 2, "mode": mode}
    check("DepthToSpace", {"x": data}, attrs, opset=13, expect="Transpose", **EXACT)


def test_space_to_depth(rng):
    data = rng.standard_normal((2, 3, 6, 4)).astype(F32)
    check("SpaceToDepth", {"x": data}, {"blocksize": 2}, opset=13, expect="Transpose", **EXACT)


@pytest.mark.parametrize("perm", [None, [0, 2, 3, 1], [3, 1, 0, 2], [0, 1, 3, 2]])
def test_transpose(perm, wide):
    check("Transpose", {"x": wide}, {} if perm is None else {"perm": perm}, **EXACT)


def test_reshape_transpose_interpreted(wide):
    check("Reshape", {"x": wide}, constants={"s": i64(6, -1)}, use_interpreter=True)
    check("Transpose", {"x": wide}, {"perm": [0, 3, 1, 2]}, use_interpreter=True)


# ---- Gather / Expand / Tile ----------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("indices", [[0, -1, 1], [[1, 0], [-2, 1]], 1, [0, 1]])
@pytest.mark.parametrize("runtime_indices", [False, True])
def test_gather(axis, indices, runtime_indices, wide):
    idx = np.array(indices, dtype=I64)
    if runtime_indices:
        check("Gather", {"x": wide, "i": idx}, {"axis": axis}, **EXACT)
    else:
        check("Gather", {"x": wide}, {"axis": axis}, constants={"i": idx}, **EXACT)


@pytest.mark.parametrize("indices", [[3, 1], [2, 2, 2], [-1, -2, -3]])
def test_gather_constant_sequences(indices, wide):
    """Constant indices in arithmetic progression become index arithmetic, not loads."""
    check("Gather", {"x": wide}, {"axis": 3}, constants={"i": i64(*indices)}, **EXACT)


def test_gather_int32_indices_of_constant_data(rng):
    table = rng.standard_normal((10, 40)).astype(F32)
    ids = np.array([[3, 9, -10]], dtype=np.int32)
    check("Gather", {"ids": ids}, constants={"table": table}, input_order=["table", "ids"])


@pytest.mark.parametrize("dtype", [I64, np.bool_])
def test_gather_other_dtypes(dtype, rng):
    data = rng.integers(0, 5, (6, 3)).astype(dtype)
    check("Gather", {"x": data, "i": i64(5, 0, -6, 2)}, {"axis": 0})


def test_gather_out_of_range_is_clamped(rng):
    """Indices past the end read the edge rather than memory outside the tensor (no ONNX
    meaning: onnxruntime rejects them; the reference raises)."""
    data = rng.standard_normal((5, 33)).astype(F32)
    node = Node("Gather", ["d", "i"], ["y"], {"axis": 0})
    out_type = TensorType((3, 33), "float32")
    (y,) = run_node(node, [data, i64(100, -100, 2)], [out_type])
    np.testing.assert_array_equal(y, data[[4, 0, 2]])


def test_rank_0_outputs(rng):
    row = rng.standard_normal((7,)).astype(F32)
    check("Gather", {"x": row, "i": np.array(-2, I64)}, **EXACT)
    check("Gather", {"x": row}, constants={"i": np.array(3, I64)}, **EXACT)
    check("Reshape", {"x": row[:1].reshape(1, 1)}, constants={"s": i64()}, **EXACT)
    check("Unsqueeze", {"x": row[0]}, constants={"a": i64(0, 1)}, opset=13, expect="Reshape")


def test_gather_interpreted(wide):
    check("Gather", {"x": wide, "i": i64(2, -1)}, {"axis": 2}, use_interpreter=True)


@pytest.mark.parametrize(
    "in_shape,shape", [((3, 1), (2, 1, 36)), ((1, 4), (3, 1)), ((2, 3), (3,)), ((5,), ())]
)
def test_expand(in_shape, shape, rng):
    data = rng.standard_normal(in_shape).astype(F32)
    check("Expand", {"x": data}, constants={"shape": np.array(shape, dtype=I64)}, **EXACT)


@pytest.mark.parametrize("repeats", [[1, 1, 1, 1], [2, 1, 3, 1], [1, 2, 1, 2]])
def test_tile(repeats, wide):
    check("Tile", {"x": wide}, constants={"r": i64(*repeats)}, **EXACT)


def test_tile_interpreted(x):
    check("Tile", {"x": x}, constants={"r": i64(1, 2, 1, 8)}, use_interpreter=True)


# ---- Pad -----------------------------------------------------------------------------------------
PADS = [[0, 1, 2, 0, 1, 0, 2, 3], [1, 0, 0, 1, 0, 2, 1, 0]]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", PADS)
def test_pad(mode, pads, x):
    constants = {"pads": i64(*pads)}
    if mode == "constant":
        constants["value"] = np.array(-2.0, F32)
    check("Pad", {"x": x}, {"mode": mode}, constants, opset=13, **EXACT)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_negative_crops(mode, wide):
    pads = i64(0, -1, 1, 0, 0, 1, -1, -1)
    check("Pad", {"x": wide}, {"mode": mode}, constants={"pads": pads}, opset=13, **EXACT)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_axes_opset_19(mode, wide):
    constants = {"pads": i64(1, 2, 3, 1), "value": np.array(0.5, F32), "axes": i64(-1, 1)}
    check("Pad", {"x": wide}, {"mode": mode}, constants, opset=19, **EXACT)


def test_pad_opset_7_attributes(x):
    check("Pad", {"x": x}, {"pads": PADS[0], "mode": "constant", "value": 1.5}, opset=7)


def test_pad_integer_data(rng):
    data = rng.integers(-9, 9, (3, 40)).astype(np.int32)
    constants = {"pads": i64(1, 1, 0, 2), "value": np.array(7, np.int32)}
    check("Pad", {"x": data}, constants=constants, opset=13)


def test_pad_interpreted(x):
    for mode in ["reflect", "wrap"]:
        pads = i64(0, 0, 2, 3, 0, 0, 1, 4)
        check("Pad", {"x": x}, {"mode": mode}, {"pads": pads}, opset=19, use_interpreter=True)


def test_pad_everything_cropped_direct(rng):
    """Crop an axis to nothing, then pad it: every element is the fill, and no read strays."""
    data = rng.standard_normal((3, 2)).astype(F32)
    run_direct("Pad", {"pads": (0, 1, 0, -2), "mode": "constant", "constant_value": 4.0}, data)


def test_pad_wrap_with_crop_direct(x):
    """Wrap over a cropped axis (onnxruntime only pads): against the reference."""
    attrs = {"pads": (0, 0, 1, -1, 0, 0, -1, 2), "mode": "wrap", "constant_value": 0}
    run_direct("Pad", attrs, x)


# ---- Trilu ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-7, -1, 0, 2, 9])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 6, 37)])
def test_trilu(upper, k, shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    check("Trilu", {"x": x}, {"upper": upper}, {"k": np.array(k, np.int64)}, opset=14)


def test_trilu_without_k_and_for_integers(rng):
    x = rng.integers(-50, 50, (3, 5, 5)).astype(np.int64)
    check("Trilu", {"x": x}, {"upper": 0}, opset=14)
    check("Trilu", {"x": x.astype(np.int32)}, opset=14, use_interpreter=True)
