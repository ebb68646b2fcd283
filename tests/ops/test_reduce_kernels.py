"""Reduction and ArgMax/ArgMin templates, compiled natively (a few interpreted), vs onnxruntime.

Shapes hit both schedules of tvmc.ops.schedule.reduction and every part of them: the last axis is
83 = 64 (a block of four accumulator vectors) + 16 (one more vector) + 3 (lane-wise tail) when
it is reduced, and 64 + 16 + a 3-wide narrow vector when it is kept. Tolerance: float32 rtol
1e-5, atol 1e-5: both sides sum in float32 but in different orders (vector lanes, trees).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lowering_helpers import check_lowered
from tests.ops.template_checks import FORCE_PARALLEL, check_template, loop_kinds

REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]  # fmt: skip
TOL = {"rtol": 1e-5, "atol": 1e-5}
OPSET = 18  # axes are an input for every reduction


def data(op: str, shape: tuple[int, ...], rng: np.random.Generator, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-4, 5, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    if op == "ReduceLogSum":
        return np.abs(x) + dtype(0.5)
    if op == "ReduceProd":
        return (np.sign(x) * (0.75 + 0.5 * np.abs(x) / (1 + np.abs(x)))).astype(dtype)  # ~1
    return x


def check_reduce(op, x, axes, keepdims=1, noop=None, **options):
    attrs = {"keepdims": keepdims, **({} if noop is None else {"noop_with_empty_axes": noop})}
    constants = {} if axes is None else {"axes": np.array(axes, np.int64)}
    check_lowered(op, {"x": x}, attrs, constants, opset=OPSET, **{**TOL, **options})


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize(
    "axes,keepdims",
    [(None, 1), ([1], 1), ([-1], 0), ([0, 2], 0)],  # all, COLUMN, ROW, ROW with an outer axis
)
def test_reductions(op, axes, keepdims, rng):
    check_reduce(op, data(op, (2, 5, 83), rng), axes, keepdims)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceLogSumExp"])
@pytest.mark.parametrize("shape,axes", [((3, 4), [0]), ((3, 7, 5), [1]), ((1, 3, 1), [0, 1]),
                                        ((5,), [0]), ((4, 1, 20), [1])])  # fmt: skip
def test_small_and_unit_dims(op, shape, axes, rng):
    """Short axes (only tails), size-1 axes (skipped by the schedule), rank 1."""
    check_reduce(op, data(op, shape, rng), axes, keepdims=0)


@pytest.mark.parametrize("op", ["ReduceSumSquare", "ReduceL1", "ReduceSum"])
def test_empty_axes_with_noop_reduce_nothing(op, rng):
    """noop_with_empty_axes: axes=() still applies the element map (squares, magnitudes);
    ReduceSum of nothing is the input itself (the frontend makes it an Identity)."""
    expect = "Identity" if op == "ReduceSum" else op
    check_reduce(op, data(op, (2, 3, 20), rng), [], noop=1, expect=expect)


@pytest.mark.parametrize(
    "op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare"]
)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions(op, dtype, rng):
    x = rng.integers(-2, 3, (3, 37)).astype(dtype)
    check_reduce(op, x, [1], keepdims=0)
    check_reduce(op, x.T.copy(), [0], keepdims=0)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
def test_max_min_small_types(op, dtype, rng):
    """int8/uint8 use 64-lane vectors; bool accumulates as uint8 (opset 20)."""
    x = rng.integers(0, 2 if dtype is np.bool_ else 100, (3, 70)).astype(dtype)
    constants = {"axes": np.array([1], np.int64)}
    check_lowered(op, {"x": x}, {}, constants, opset=20 if dtype is np.bool_ else 18)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float16, 2e-3)])
def test_float64_and_float16(op, dtype, tol, rng):
    """float64 runs 8 lanes; float16 accumulates in float32 and rounds once."""
    check_reduce(op, data(op, (4, 45), rng, dtype), [1], keepdims=0, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceLogSumExp"])
def test_infinities(op):
    x = np.array([[np.inf, 1.0, -np.inf], [-np.inf, -np.inf, -np.inf]], np.float32)
    check_reduce(op, x, [1])


@pytest.mark.parametrize(
    "op,shape,axes",
    [
        ("ReduceMean", (2, 64, 40, 40), [2, 3]),  # ROW: parallel rows, a 40-wide inner axis
        ("ReduceSum", (1, 64, 48, 48), [1]),  # COLUMN with one outer index: parallel blocks
        ("ReduceMax", (3, 160, 300), [1]),  # COLUMN: parallel over the outer axis
        ("ReduceLogSumExp", (256, 300), [-1]),  # two passes count double
    ],
)
def test_large_shapes_run_in_parallel(op, shape, axes, rng):
    constants = {"axes": np.array(axes, np.int64)}
    kernels = check_template(op, {"x": data(op, shape, rng)}, {}, constants, epilogue=False,
                             rtol=1e-4, atol=1e-4)  # fmt: skip
    assert "parallel" in loop_kinds(kernels)


def test_one_cheap_pass_stays_serial(rng):
    """BERT's ReduceMean (98k elements, ~5 us) is cheaper than waking the worker threads."""
    x = data("ReduceMean", (1, 128, 768), rng)
    kernels = check_template("ReduceMean", {"x": x}, {}, {"axes": np.array([-1])}, epilogue=False)
    assert "parallel" not in loop_kinds(kernels)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceLogSumExp", "ReduceProd"])
@pytest.mark.parametrize("axes", [[1], [-1]])
def test_interpreted(op, axes, rng):
    check_reduce(op, data(op, (2, 3, 37), rng), axes, use_interpreter=True)


@pytest.mark.parametrize(
    "op,axes,keepdims",
    [("ReduceSum", [1], 1), ("ReduceMean", [0, 2], 0), ("ReduceMax", None, 0),
     ("ReduceL2", [2], 0), ("ReduceLogSumExp", [-1], 1)],
)  # fmt: skip
def test_epilogue_and_forced_parallel(op, axes, keepdims, rng):
    """The epilogue gets output-rank indices (rank 0 for a full reduction without keepdims)."""
    constants = {} if axes is None else {"axes": np.array(axes, np.int64)}
    x = data(op, (2, 5, 83), rng)
    check_template(op, {"x": x}, {"keepdims": keepdims}, constants, config=FORCE_PARALLEL, **TOL)


@pytest.mark.parametrize("unroll", [1, 2])
def test_unroll_knob(unroll, rng):
    x = data("ReduceSum", (3, 5, 83), rng)
    for axes in ([1], [2]):
        check_template("ReduceSum", {"x": x}, {}, {"axes": np.array(axes)}, epilogue=False,
                       config={"reduce_unroll": unroll}, **TOL)  # fmt: skip


@given(
    shape=st.lists(st.integers(1, 20), min_size=1, max_size=4),
    picks=st.lists(st.integers(0, 3), max_size=4),
    keepdims=st.integers(0, 1),
    op=st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceLogSumExp"]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=15, deadline=None)
def test_random_axes(shape, picks, keepdims, op, seed):
    axes = sorted({p % len(shape) for p in picks}) or None  # none: every axis
    # up to 20^4 float32 terms summed in another order than numpy's: 1e-5 is too tight (a
    # 14,580-term ReduceSum differed by 1.9e-5 relative)
    check_reduce(op, data(op, tuple(shape), np.random.default_rng(seed)), axes, keepdims,
                 rtol=1e-4, atol=1e-4)  # fmt: skip


# ---- ArgMax / ArgMin -----------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_reductions(op, axis, last, rng):
    x = rng.integers(0, 3, (3, 37, 21)).astype(np.float32)  # many ties: first versus last index
    attrs = {"axis": axis, "keepdims": axis % 2, "select_last_index": last}
    check_lowered(op, {"x": x}, attrs, opset=13)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_arg_reductions_dtypes(op, dtype, rng):
    x = rng.integers(-3, 3, (4, 40)).astype(dtype)
    check_lowered(op, {"x": x}, {"axis": 1, "select_last_index": 1}, opset=13)
    check_lowered(op, {"x": x}, {"axis": 0}, opset=13)


def test_argmax_large_and_epilogue(rng):
    x = rng.standard_normal((256, 1000)).astype(np.float32)
    kernels = check_template("ArgMax", {"x": x}, {"axis": -1}, opset=13, epilogue=False)
    assert "parallel" in loop_kinds(kernels)
    check_template("ArgMin", {"x": x[:6, :50]}, {"axis": 0, "keepdims": 0}, opset=13)


def test_arg_over_a_unit_axis(rng):
    check_lowered("ArgMax", {"x": rng.standard_normal((3, 1)).astype(np.float32)}, {"axis": 1})
    check_lowered("ArgMin", {"x": np.array([2.0], np.float32)}, {"axis": 0, "keepdims": 0})


def test_argmax_interpreted(rng):
    x = rng.integers(0, 3, (3, 20)).astype(np.float32)
    check_lowered("ArgMax", {"x": x}, {"axis": 1, "select_last_index": 1}, opset=13,
                  use_interpreter=True)  # fmt: skip
