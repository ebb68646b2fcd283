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

from tests.lowering_helpers import check_lowered, run_node
from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check
from tests.ops.template_checks import FORCE_PARALLEL, check_template, loop_kinds
from tvmc.frontend import convert_model
from tvmc.graph import TensorType
from tvmc.ops import evaluate_node
from tvmc.ops.lowering import LoweringTarget

SOFTMAX_OPS = ["Softmax", "LogSoftmax", "Hardmax"]
LONG = {"rtol": 1e-4, "atol": 1e-5}
CUDA = LoweringTarget(kind="cuda")


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


# ---- RMSNormalization (opset 23) -----------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
@pytest.mark.parametrize("broadcast_scale", [False, True])
def test_rms_normalization(axis, broadcast_scale, rng):
    shape = (2, 3, 40)
    row = shape[axis % 3 :]
    scale = random(rng, row[-1:] if broadcast_scale else row)
    check("RMSNormalization", {"x": random(rng, shape)}, {"axis": axis}, {"s": scale}, opset=23)


@pytest.mark.parametrize(
    "dtype,stash,tol",
    [(np.float16, 1, 2e-3), (np.float32, 11, 1e-5), (np.float64, 1, 1e-6), (np.float64, 11, 1e-9)],
)
def test_rms_normalization_dtypes_and_stash_type(dtype, stash, tol, rng):
    """Statistics in the stash type: float32 by default (onnxruntime computes a float64 input
    in float64 here, so the default agrees to float32 rounding only), float64 with 11."""
    x, scale = random(rng, (3, 50), dtype), random(rng, (50,), dtype)
    attrs = {"axis": -1, "epsilon": 0.1, "stash_type": stash}
    check("RMSNormalization", {"x": x}, attrs, {"s": scale}, opset=23, rtol=tol, atol=tol)


def test_rms_normalization_llama_row_epilogue_and_interpreted(rng):
    x, scale = random(rng, (1, 128, 768)), {"s": random(rng, (768,))}
    kernels = check_template("RMSNormalization", {"x": x}, {"axis": -1}, scale, opset=23,
                             epilogue=False, **LONG)  # fmt: skip
    assert "parallel" in loop_kinds(kernels)
    small = random(rng, (2, 5, 37))
    check_template("RMSNormalization", {"x": small}, {"axis": -1}, {"s": random(rng, (37,))},
                   opset=23, config=FORCE_PARALLEL, **LONG)  # fmt: skip
    check("RMSNormalization", {"x": small}, {"axis": 1}, {"s": random(rng, (5, 37))}, opset=23,
          use_interpreter=True, **LONG)  # fmt: skip


# ---- GroupNormalization (opset 18: scale per group, 21: per channel) -----------------------------
@pytest.mark.parametrize(
    "shape,groups",
    [((2, 6, 5), 3), ((2, 4, 3, 37), 2), ((1, 4, 7, 7), 4), ((2, 6, 3, 4), 1), ((3, 4), 2)],
)
@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(shape, groups, opset, rng):
    params = groups if opset < 21 else shape[1]
    consts = {"s": random(rng, (params,)), "b": random(rng, (params,))}
    check("GroupNormalization", {"x": random(rng, shape)}, {"num_groups": groups}, consts,
          opset=opset, **LONG)  # fmt: skip


@pytest.mark.parametrize(
    "dtype,stash,tol", [(np.float16, 1, 3e-3), (np.float64, 1, 1e-6), (np.float64, 11, 1e-9)]
)
def test_group_normalization_dtypes_and_runtime_params(dtype, stash, tol, rng):
    """Statistics in the stash type, float32 unless stash_type is 11 (double)."""
    x, s, b = random(rng, (2, 6, 4, 5), dtype), random(rng, (6,), dtype), random(rng, (6,), dtype)
    attrs = {"num_groups": 3, "epsilon": 1e-2, "stash_type": stash}
    check("GroupNormalization", {"x": x, "s": s, "b": b}, attrs, opset=21, rtol=tol, atol=tol)


def test_group_normalization_epilogue_parallel_and_interpreted(rng):
    consts = {"s": random(rng, (32,)), "b": random(rng, (32,))}
    x = random(rng, (1, 32, 40, 40))
    kernels = check_template("GroupNormalization", {"x": x}, {"num_groups": 8}, consts, opset=21,
                             epilogue=False, **LONG)  # fmt: skip
    assert "parallel" in loop_kinds(kernels)
    x = random(rng, (2, 6, 3, 19))
    small = {"s": random(rng, (6,)), "b": random(rng, (6,))}
    check_template("GroupNormalization", {"x": x}, {"num_groups": 2}, small, opset=21,
                   config=FORCE_PARALLEL, **LONG)  # fmt: skip
    check("GroupNormalization", {"x": x}, {"num_groups": 3}, small, opset=21,
          use_interpreter=True, **LONG)  # fmt: skip


# ---- LpNormalization -----------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 1, 0])
@pytest.mark.parametrize("opset", [17, 22])
def test_lp_normalization(p, axis, opset, rng):
    check("LpNormalization", {"x": random(rng, (3, 4, 37))}, {"p": p, "axis": axis}, opset=opset)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_zero_rows_and_dtypes(p, rng):
    """A zero row normalizes to zeros, as onnxruntime gives (no division by zero)."""
    x = random(rng, (4, 6))
    x[1] = 0.0
    check("LpNormalization", {"x": x}, {"p": p})  # the default axis, -1
    check("LpNormalization", {"x": x.astype(np.float16)}, {"p": p}, rtol=2e-3, atol=2e-3)
    check("LpNormalization", {"x": x.astype(np.float64)}, {"p": p, "axis": 0}, rtol=1e-9,
          atol=1e-9)  # fmt: skip


# ---- MeanVarianceNormalization -------------------------------------------------------------------
@pytest.mark.parametrize("axes", [None, [1], [0, 1, 2, 3], [2, 3], [-1], [0, 3]])
@pytest.mark.parametrize("opset", [9, 13])
def test_mean_variance_normalization(axes, opset, rng):
    attrs = {} if axes is None else {"axes": axes}
    check("MeanVarianceNormalization", {"x": random(rng, (2, 3, 4, 37))}, attrs, opset=opset,
          **LONG)  # fmt: skip


def test_mean_variance_normalization_constant_rows_and_float64(rng):
    """Only float32 runs in onnxruntime; float64 and constant rows (0: the 1e-9 epsilon) are
    checked against the reference."""
    x = random(rng, (2, 3, 5, 6), np.float64)
    x[:, 2] = 3.0  # channel 2 (a row of the default axes [0, 2, 3])
    (node,) = convert_model(single_node_model("MeanVarianceNormalization", {"x": x})).nodes
    (got,) = run_node(node, [x], [TensorType.of(x)])
    (want,) = evaluate_node(node, [x])
    assert np.all(want[:, 2] == 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


# ---- the new norms on CUDA, interpreted ---------------------------------------------------------
def test_norms_cuda_interpreted(rng):
    x = random(rng, (2, 6, 4, 9))
    cuda = {"target": CUDA, **LONG}
    check("RMSNormalization", {"x": x}, {"axis": 2}, {"s": random(rng, (4, 9))}, opset=23, **cuda)
    consts = {"s": random(rng, (6,)), "b": random(rng, (6,))}
    check("GroupNormalization", {"x": x}, {"num_groups": 3}, consts, opset=21, **cuda)
    check("LpNormalization", {"x": x}, {"p": 1, "axis": 1}, **cuda)
    check("MeanVarianceNormalization", {"x": x}, {}, opset=13, **cuda)
    long_rows = random(rng, (3, 300))
    check("RMSNormalization", {"x": long_rows}, {"axis": -1}, {"s": random(rng, (300,))},
          opset=23, **cuda)  # fmt: skip
    check("LpNormalization", {"x": long_rows}, {"p": 2}, **cuda)
