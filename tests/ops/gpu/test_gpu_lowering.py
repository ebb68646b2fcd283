"""Every op family lowered for target kind "cuda", run by the kernel IR interpreter (GPU thread
semantics: lockstep between barriers, shared and local scratch), against onnxruntime.

Tolerances: data movement and max/min are exact up to float32 rounding (rtol 1e-5, atol 1e-6);
sums and products re-associated across threads use rtol 1e-4, atol 1e-5 (rows of at most a few
hundred terms; tree order differs from numpy's pairwise sum). `check_lowered` also runs
`check_gpu_config` on each node's kernels: only GPU loops (plus serial/unrolled in a thread),
at most 1024 threads and 48 KiB of shared memory per block.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import check_lowered
from tvmc.ops.lowering import LoweringTarget

CUDA = LoweringTarget(kind="cuda")
EXACT = {"rtol": 1e-5, "atol": 1e-6}
SUMS = {"rtol": 1e-4, "atol": 1e-5}


def randn(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def gpu(op, inputs, attrs=None, constants=None, tol=SUMS, config=None, **kw) -> None:
    check_lowered(op, inputs, attrs, constants, target=CUDA, config=config, **tol, **kw)


# ---- injective / elementwise ---------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Exp", "Neg"])
def test_unary(op, rng):
    gpu(op, {"x": randn(rng, 3, 70)}, tol=EXACT)


def test_broadcast_and_injective(rng):
    gpu("Add", {"a": randn(rng, 2, 3, 5), "b": randn(rng, 3, 1)}, tol=EXACT)
    gpu("Transpose", {"x": randn(rng, 2, 3, 5)}, {"perm": [2, 0, 1]}, tol=EXACT)
    gpu("Concat", {"a": randn(rng, 2, 3), "b": randn(rng, 2, 4)}, {"axis": 1}, tol=EXACT)
    pads = np.array([0, 1, 0, 2], np.int64)
    gpu("Pad", {"x": randn(rng, 3, 4)}, constants={"pads": pads}, tol=EXACT)
    idx = np.array([2, 0, 1], np.int64)
    gpu("Gather", {"x": randn(rng, 4, 5)}, {"axis": 0}, constants={"i": idx}, tol=EXACT)


def test_resize(rng):
    scales = np.array([1, 1, 2, 2], np.float32)
    constants = {"roi": np.zeros(0, np.float32), "scales": scales}
    gpu(
        "Resize",
        {"x": randn(rng, 1, 2, 3, 4)},
        {"mode": "linear"},
        constants,
        tol=EXACT,
        opset=13,
        input_order=["x", "roi", "scales"],
    )


def test_scalar_output(rng):
    gpu("ReduceSum", {"x": randn(rng, 5, 7)}, {"keepdims": 0}, opset=11)


# ---- reductions ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "op",
    [
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceL2",
        "ReduceLogSumExp",
        "ReduceProd",
    ],
)
@pytest.mark.parametrize("axes", [[2], [1], [0, 2]])
def test_reduce(op, axes, rng):
    x = randn(rng, 2, 3, 40) * (0.3 if op == "ReduceProd" else 1.0)
    gpu(op, {"x": x}, {"axes": axes, "keepdims": 1}, opset=11)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("axis", [1, 2])
def test_arg_reductions_with_ties(op, last, axis, rng):
    x = rng.integers(-2, 3, (2, 5, 45)).astype(np.float32)  # many equal extremes
    gpu(op, {"x": x}, {"axis": axis, "keepdims": 0, "select_last_index": last}, tol=EXACT)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reductions_other_dtypes(op, dtype, rng):
    """float64/int64 partials combine through the shared-memory tree, int32 by shuffles."""
    x = rng.integers(-3, 4, (3, 70)).astype(dtype)
    gpu(op, {"x": x}, {"axis": 1, "keepdims": 1}, tol=EXACT, config={"reduce_threads": 64})
    gpu(op, {"x": x}, {"axis": 1, "keepdims": 1, "select_last_index": 1}, tol=EXACT)


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_reduce_sum_other_dtypes(dtype, rng):
    x = rng.integers(-50, 50, (4, 300)).astype(dtype)
    gpu("ReduceSum", {"x": x}, {"axes": [1], "keepdims": 0}, opset=11, tol=EXACT)


@pytest.mark.parametrize("threads", [1, 32, 64])
def test_reduce_threads_knob(threads, rng):
    gpu(
        "ReduceSum",
        {"x": randn(rng, 3, 50)},
        {"axes": [1], "keepdims": 0},
        opset=11,
        config={"reduce_threads": threads},
    )


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("shape,axis", [((3, 70), -1), ((2, 4, 5), 1), ((2, 3), 0)])
def test_softmax_family(op, shape, axis, rng):
    gpu(op, {"x": randn(rng, *shape)}, {"axis": axis}, opset=13)


def test_norms(rng):
    x = randn(rng, 2, 3, 40)
    gpu(
        "LayerNormalization",
        {"x": x},
        {"axis": -1},
        constants={"s": randn(rng, 40), "b": randn(rng, 40)},
        opset=17,
    )
    gpu(
        "InstanceNormalization",
        {"x": randn(rng, 2, 3, 6, 7)},
        constants={"s": randn(rng, 3), "b": randn(rng, 3)},
    )


# ---- pools ---------------------------------------------------------------------------------------
POOLS = [
    ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}, (1, 2, 7, 8)),
    ({"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}, (1, 2, 7, 8)),
    (
        {
            "kernel_shape": [2, 2],
            "pads": [1, 1, 1, 1],
            "strides": [2, 2],
            "ceil_mode": 1,
            "count_include_pad": 1,
        },
        (1, 2, 7, 8),
    ),
    ({"kernel_shape": [4], "pads": [2, 1]}, (1, 2, 9)),
    ({"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}, (1, 2, 4, 5, 4)),
]


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs,shape", POOLS)
def test_pools(op, attrs, shape, rng):
    if op == "MaxPool":
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    gpu(op, {"x": randn(rng, *shape)}, attrs, opset=19 if op == "AveragePool" else 12, tol=EXACT)


def test_dilated_max_pool_global_pools_and_lrn(rng):
    x = randn(rng, 1, 3, 7, 8)
    gpu("MaxPool", {"x": x}, {"kernel_shape": [2, 2], "dilations": [2, 2]}, opset=12, tol=EXACT)
    gpu("GlobalAveragePool", {"x": x})
    gpu("GlobalMaxPool", {"x": x}, tol=EXACT)
    gpu("LRN", {"x": randn(rng, 1, 5, 3, 4)}, {"size": 3}, tol=EXACT)


# ---- matmul / gemm -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "a,b",
    [
        ((5, 7), (7, 9)),
        ((2, 3, 5, 7), (7, 9)),
        ((2, 3, 5, 7), (3, 7, 9)),
        ((7,), (3, 7, 9)),
        ((4, 7), (7,)),
        ((1, 40), (40, 70)),
    ],
)
def test_matmul(a, b, rng):
    gpu("MatMul", {"a": randn(rng, *a), "b": randn(rng, *b)})


def test_batched_matmul_split_k(rng):
    gpu(
        "MatMul",
        {"a": randn(rng, 2, 5, 64), "b": randn(rng, 2, 64, 9)},
        config={"tile_k": 8, "split_k": 4},
    )


GEMM_CONFIGS = [
    {},
    {"tile_m": (16, 2), "tile_n": (16, 4), "tile_k": 8, "unroll_k": True},
    {"tile_m": (4, 4), "tile_n": (32, 1), "tile_k": 32, "unroll_k": False},
    {"tile_k": 8, "split_k": 3},  # k = 19 or 20: three steps of 8, one each
]


@pytest.mark.parametrize("config", GEMM_CONFIGS)
def test_gemm_transposes_and_configs(config, rng):
    attrs = {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}
    gpu(
        "Gemm",
        {"a": randn(rng, 19, 21), "b": randn(rng, 23, 19), "c": randn(rng, 23)},
        attrs,
        config=config,
    )
    gpu(
        "Gemm",
        {"a": randn(rng, 3, 20)},
        {"transB": 1},
        constants={"b": randn(rng, 10, 20), "c": randn(rng, 10)},
        config=config,
    )


# ---- conv ----------------------------------------------------------------------------------------
CONVS = [
    ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (1, 4, 6, 6), (8, 4, 3, 3)),
    (
        {"kernel_shape": [3, 2], "strides": [2, 1], "dilations": [1, 2], "group": 2},
        (2, 4, 7, 6),
        (6, 2, 3, 2),
    ),
    ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 6}, (1, 6, 5, 5), (6, 1, 3, 3)),
    ({"kernel_shape": [1, 1]}, (1, 8, 4, 4), (4, 8, 1, 1)),
    ({"kernel_shape": [3], "pads": [1, 0]}, (1, 3, 9), (4, 3, 3)),
    ({"kernel_shape": [2, 2, 2], "pads": [1, 0, 0, 0, 1, 1]}, (1, 2, 4, 4, 4), (3, 2, 2, 2, 2)),
]


@pytest.mark.parametrize("attrs,x,w", CONVS)
@pytest.mark.parametrize(
    "config",
    [
        {},
        {"schedule": "direct", "block": 64},
        {"schedule": "gemm", "tile_m": (4, 2), "tile_n": (32, 2), "tile_k": 8},
    ],
)
def test_conv(attrs, x, w, config, rng):
    constants = {"w": randn(rng, *w), "b": randn(rng, w[0])}
    gpu("Conv", {"x": randn(rng, *x)}, attrs, constants, config=config)


@pytest.mark.parametrize("split", [3, 9])
def test_conv_split_k(split, rng):
    constants = {"w": randn(rng, 4, 8, 3, 3), "b": randn(rng, 4)}
    gpu(
        "Conv",
        {"x": randn(rng, 1, 8, 5, 5)},
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        constants,
        config={"tile_k": 8, "split_k": split, "tile_n": (16, 2)},
    )


def test_conv_with_runtime_weights(rng):
    gpu(
        "Conv", {"x": randn(rng, 1, 4, 5, 5), "w": randn(rng, 3, 4, 3, 3)}, {"kernel_shape": [3, 3]}
    )


@pytest.mark.parametrize(
    "attrs,w",
    [
        ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]}, (4, 3, 3, 3)),
        ({"kernel_shape": [2, 2], "strides": [2, 2], "group": 2}, (4, 1, 2, 2)),
        (
            {
                "kernel_shape": [3, 3],
                "dilations": [2, 1],
                "output_padding": [1, 0],
                "strides": [2, 1],
            },
            (4, 2, 3, 3),
        ),
    ],
)
def test_conv_transpose(attrs, w, rng):
    gpu("ConvTranspose", {"x": randn(rng, 1, 4, 3, 3)}, attrs, {"w": randn(rng, *w)})
