"""Softmax-like and normalization templates, compiled natively (a few interpreted), vs ORT.

Axes cover both schedules: the last axis normalized (ROW: 16-lane accumulators, lane-wise
tails) and an inner axis normalized (COLUMN: vectors across the kept last axis, a narrow tail).
Tolerance: float32 rtol 1e-5, atol 1e-6 for rows up to a few hundred elements (our exp is a
polynomial within 1e-7 relative, sums run in another order); the long rows of the parallel
cases use rtol 1e-4, atol 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import check_lowered
from tests.ops.template_checks import FORCE_PARALLEL, check_template, loop_kinds

SOFTMAX_OPS = ["Softmax", "LogSoftmax", "Hardmax"]
LONG = {"rtol": 1e-4, "atol": 1e-5}


def random(rng, shape, dtype=np.float32):
    return (rng.standard_normal(shape) * 2).astype(dtype)


@pytest.mark.parametrize("op", SOFTMAX_OPS)
@pytest.mark.parametrize(
    "opset,axis",
    [(11, 1), (11, -1), (11, 0), (13, 1), (13, -1), (13, 0)],  # opset 11: axis.. as one row
)
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 37, 21)])
def test_softmax_family(op, opset, axis, shape, rng):
    check_lowered(op, {"x": random(rng, shape)}, {"axis": axis}, opset=opset)


@pytest.mark.parametrize("op", SOFTMAX_OPS)
def test_softmax_2d_and_1d(op, rng):
    check_lowered(op, {"x": random(rng, (3, 83))}, opset=13)
    check_lowered(op, {"x": random(rng, (7,))}, {"axis": 0}, opset=13)


def test_hardmax_picks_the_first_of_ties(rng):
    x = rng.integers(0, 3, (4, 5, 19)).astype(np.float32)
    for axis in (1, -1):
        check_lowered("Hardmax", {"x": x}, {"axis": axis}, opset=13)
    check_lowered("Hardmax", {"x": x}, {"axis": 1}, opset=11)  # ties across two axes


def test_softmax_large_values_and_masks():
    x = np.array([[1000.0, 1001.0, -1000.0], [-3e38, 0.0, 3e38]], np.float32)
    check_lowered("Softmax", {"x": x}, opset=13)
    check_lowered("LogSoftmax", {"x": x[:1]}, opset=13)
    masked = np.tile(np.array([0.5, -np.inf, 2.0, -np.inf], np.float32), (3, 9))
    check_lowered("Softmax", {"x": masked}, opset=13)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-9)])
def test_softmax_float16_and_float64(op, dtype, tol, rng):
    """float16 accumulates in float32 (and recomputes exp instead of keeping it)."""
    check_lowered(op, {"x": random(rng, (4, 50), dtype)}, opset=13, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "op,shape,axis",
    [("Softmax", (2, 12, 64, 128), -1), ("Softmax", (4, 64, 300), 1),
     ("LogSoftmax", (64, 1000), -1)],
)  # fmt: skip
def test_large_softmax_runs_in_parallel(op, shape, axis, rng):
    kernels = check_template(op, {"x": random(rng, shape)}, {"axis": axis}, opset=13,
                             epilogue=False, **LONG)  # fmt: skip
    assert "parallel" in loop_kinds(kernels)


@pytest.mark.parametrize("op", SOFTMAX_OPS)
@pytest.mark.parametrize("axis", [1, -1])
def test_softmax_epilogue(op, axis, rng):
    x = random(rng, (2, 5, 83))
    check_template(op, {"x": x}, {"axis": axis}, opset=13, config=FORCE_PARALLEL)


@pytest.mark.parametrize("op", SOFTMAX_OPS)
def test_softmax_interpreted(op, rng):
    check_lowered(op, {"x": random(rng, (2, 3, 20))}, {"axis": 1}, opset=13, use_interpreter=True)


# ---- LayerNormalization --------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_normalization(axis, with_bias, rng):
    shape = (2, 3, 40)
    row = shape[axis % 3 :]
    consts = {"scale": random(rng, row)}
    if with_bias:
        consts["bias"] = random(rng, row)
    check_lowered("LayerNormalization", {"x": random(rng, shape)}, {"axis": axis},
                  constants=consts, opset=17)  # fmt: skip


def test_layer_normalization_broadcast_scale_and_runtime_params(rng):
    x, scale, bias = random(rng, (2, 3, 4)), random(rng, (4,)), random(rng, (1, 4))
    check_lowered("LayerNormalization", {"x": x, "s": scale, "b": bias}, {"axis": 1}, opset=17)


def test_layer_normalization_float64_and_epsilon(rng):
    x, scale = random(rng, (3, 50), np.float64), random(rng, (50,), np.float64)
    check_lowered("LayerNormalization", {"x": x}, {"axis": -1, "epsilon": 0.1}, {"s": scale},
                  opset=17, rtol=1e-9, atol=1e-9)  # fmt: skip


def test_bert_layer_normalization_in_parallel(rng):
    consts = {"scale": random(rng, (768,)), "bias": random(rng, (768,))}
    x = random(rng, (1, 128, 768))
    kernels = check_template("LayerNormalization", {"x": x}, {"axis": -1}, consts, opset=17,
                             epilogue=False, **LONG)  # fmt: skip
    assert "parallel" in loop_kinds(kernels)


def test_layer_normalization_epilogue_and_interpreted(rng):
    x, consts = random(rng, (2, 5, 37)), {"s": random(rng, (37,)), "b": random(rng, (37,))}
    check_template("LayerNormalization", {"x": x}, {"axis": -1}, consts, opset=17,
                   config=FORCE_PARALLEL, **LONG)  # fmt: skip
    check_lowered("LayerNormalization", {"x": x}, {"axis": 1}, consts, opset=17,
                  use_interpreter=True, **LONG)  # fmt: skip


# ---- InstanceNormalization -----------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 37), (1, 2, 3, 2, 2), (1, 4, 7, 7)])
@pytest.mark.parametrize("epsilon", [None, 1e-2])
def test_instance_normalization(shape, epsilon, rng):
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    consts = {"scale": random(rng, shape[1:2]), "bias": random(rng, shape[1:2])}
    check_lowered("InstanceNormalization", {"x": random(rng, shape)}, attrs, consts, opset=13)


def test_instance_normalization_large_epilogue_and_interpreted(rng):
    consts = {"scale": random(rng, (32,)), "bias": random(rng, (32,))}
    kernels = check_template("InstanceNormalization", {"x": random(rng, (1, 32, 40, 40))}, {},
                             consts, opset=13, epilogue=False, **LONG)  # fmt: skip
    assert "parallel" in loop_kinds(kernels)
    small = {"scale": random(rng, (3,)), "bias": random(rng, (3,))}
    x = random(rng, (2, 3, 5, 19))
    check_template("InstanceNormalization", {"x": x}, {}, small, opset=13, **LONG)
    check_lowered("InstanceNormalization", {"x": x}, {}, small, opset=13, use_interpreter=True,
                  **LONG)  # fmt: skip


def test_unit_axes(rng):
    """Normalizing only size-1 axes: no reduction loop at all, each element is its own row."""
    check_lowered("Softmax", {"x": random(rng, (2, 1))}, {"axis": 1}, opset=13)
    check_lowered("Hardmax", {"x": random(rng, (1, 1))}, {"axis": 1}, opset=13)
    check_lowered("LayerNormalization", {"x": random(rng, (2, 1))}, {"axis": 1},
                  {"s": random(rng, (1,))}, opset=17)  # fmt: skip
    consts = {"s": random(rng, (2,)), "b": random(rng, (2,))}
    check_lowered("InstanceNormalization", {"x": random(rng, (1, 2, 1))}, {}, consts, opset=13)
