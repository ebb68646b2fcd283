"""Scans (tvmc/ops/tensor/scan.py: CumSum, CumProd) compiled natively, a few interpreted as CUDA,
against onnxruntime: every axis (the last one scans lines one by one, another one runs each step
as a vector across the contiguous last axis, with a tail), exclusive and reverse, dtypes, opsets.

Tolerances: both sum in the same sequential order, so float32 agrees to rounding (rtol 1e-5);
float16 rounds every step, which onnxruntime may not (rtol 2e-3 over short lines).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check
from tvmc.errors import NonConstantInputError
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget

F32, I64 = np.float32, np.int64
CUDA = LoweringTarget(kind="cuda")
OPSETS = {"CumSum": 14, "CumProd": 26}
MODES = [(0, 0), (1, 0), (0, 1), (1, 1)]  # (exclusive, reverse)


def values(op: str, rng, shape, dtype=F32) -> np.ndarray:
    """Products stay near 1 (no overflow to inf or 0); sums take any sign."""
    if op == "CumProd":
        return rng.uniform(0.8, 1.25, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("exclusive,reverse", MODES)
def test_scan(op, axis, exclusive, reverse, rng):
    x = values(op, rng, (3, 5, 37))
    attrs = {"exclusive": exclusive, "reverse": reverse}
    constants = {"axis": np.array(axis, I64)}
    check(op, {"x": x}, attrs, constants, opset=OPSETS[op])


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
def test_scan_dtypes(op, dtype, rng):
    x = rng.integers(-3, 4, (4, 19)).astype(dtype)
    for axis in (0, 1):
        constants = {"axis": np.array([axis], np.int32)}  # a 1-element int32 axis
        check(op, {"x": x}, {"exclusive": 1}, constants, opset=OPSETS[op])


def test_cumsum_float16(rng):
    x = rng.uniform(0, 1, (3, 6, 40)).astype(np.float16)
    check("CumSum", {"x": x}, {"reverse": 1}, {"axis": np.array(1, I64)}, rtol=2e-3, atol=1e-3)


def test_cumsum_opset_11_one_dimensional(rng):
    x = rng.standard_normal(70).astype(F32)
    check("CumSum", {"x": x}, {"exclusive": 1}, {"axis": np.array(0, I64)}, opset=11)


@pytest.mark.parametrize("axis", [0, 2])
def test_cumsum_large_enough_for_threads(axis, rng):
    """Over PARALLEL_MIN_ELEMENTS elements: the lines run in a parallel loop."""
    x = rng.standard_normal((16, 40, 64)).astype(F32)
    check("CumSum", {"x": x}, {}, {"axis": np.array(axis, I64)}, opset=14, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scan_cuda(op, axis, rng):
    x = values(op, rng, (5, 33))
    attrs = {"exclusive": axis, "reverse": 1 - axis}
    constants = {"axis": np.array(axis, I64)}
    check(op, {"x": x}, attrs, constants, opset=OPSETS[op], target=CUDA)


def test_scan_runtime_axis_is_refused(rng):
    inputs = {"x": rng.standard_normal((2, 3)).astype(F32), "axis": np.array(1, I64)}
    model = single_node_model("CumSum", inputs, opset=14)
    with pytest.raises(NonConstantInputError, match="CumSum node.*axis.*constant"):
        convert_model(model)
