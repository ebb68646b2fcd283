"""MatMul and Gemm templates, compiled natively, against onnxruntime (or the numpy reference).

Shapes hit every tail of the tiling: M not a multiple of MR, N not a multiple of 16 or of the
panel width, 1-D operands, folded and broadcast batch dims, runtime (packed at run time) and
constant B. float32 tolerance: rtol 1e-4, atol 1e-5 (the kernels sum in a different order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from tests.lowering_helpers import check_lowered, run_node
from tests.onnx_helpers import single_node_model
from tests.ops.test_conv_kernels import lower_and_run
from tvmc.codegen import CPUTarget
from tvmc.frontend import convert_model
from tvmc.graph import Node, TensorType
from tvmc.ops import OPS
from tvmc.ops.linalg.cpu import pack_rows
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes

TOL = {"rtol": 1e-4, "atol": 1e-5}


def randn(rng: np.random.Generator, *shape: int, dtype: Any = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def run_template(
    op: str,
    arrays: Mapping[str, np.ndarray],
    constant: set[str],
    attrs: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    epilogue: bool = False,
    target: CPUTarget | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(template output, numpy reference, residual) for one node with knobs `config`, lowered
    and compiled for `target` (default: this host)."""
    inputs = {k: v for k, v in arrays.items() if k not in constant}
    constants = {k: v for k, v in arrays.items() if k in constant}
    model = single_node_model(op, inputs, attrs, constants, input_order=list(arrays))
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (node,) = graph.nodes
    values = list(arrays.values())
    got, residual = lower_and_run(
        node,
        values,
        [k in constant for k in arrays],
        graph.types[node.outputs[0]],
        config,
        epilogue,
        target,
    )
    return got, OPS[op].reference(node.attrs, *values), residual


@pytest.mark.parametrize(
    "a_shape,b_shape,b_constant",
    [
        ((5, 37), (37, 50), True),  # N = 50: a partial panel and a 2-wide vector tail
        ((13, 20), (20, 48), True),  # N = 48: three full vectors, no full 64-wide panel
        ((1, 64), (64, 33), False),  # GEMV, runtime B
        ((37,), (37, 20), True),  # 1-D A
        ((4, 37), (37,), True),  # 1-D B
        ((37,), (37,), False),  # dot product
        ((2, 3, 5, 37), (37, 20), True),  # batch folded into M
        ((2, 3, 5, 7), (3, 7, 9), False),  # batched B, broadcast over A's leading dim
        ((2, 1, 6, 7), (3, 7, 17), True),  # broadcast both ways, B batched constant
        ((3, 7), (2, 7, 18), False),  # 2-D A against a batch of B
        ((2, 3, 5, 7), (3, 7, 32), False),  # runtime B read in place (N = 2 vectors)
        ((6, 20), (1, 20, 48), False),  # in place, a size-1 batch dim, three-vector panels
    ],
)
def test_matmul_shapes(a_shape, b_shape, b_constant, rng):
    a, b = randn(rng, *a_shape), randn(rng, *b_shape)
    constants = {"b": b} if b_constant else {}
    inputs = {"a": a} if b_constant else {"a": a, "b": b}
    check_lowered("MatMul", inputs, constants=constants, input_order=["a", "b"], **TOL)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_matmul_integers(dtype, rng):
    a = rng.integers(-9, 9, (2, 7, 11)).astype(dtype)
    b = rng.integers(-9, 9, (11, 21)).astype(dtype)
    check_lowered("MatMul", {"a": a, "b": b})
    check_lowered("MatMul", {"a": a[0]}, constants={"b": b})


def test_matmul_float64(rng):
    a, b = randn(rng, 9, 19, dtype=np.float64), randn(rng, 19, 30, dtype=np.float64)
    check_lowered("MatMul", {"a": a, "b": b}, rtol=1e-12, atol=1e-12)


def test_matmul_float16_accumulates_in_float32(rng):
    a, b = randn(rng, 6, 40, dtype=np.float16), randn(rng, 40, 20, dtype=np.float16)
    got, want, _ = run_template("MatMul", {"a": a, "b": b}, {"b"}, {})
    np.testing.assert_allclose(
        got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3
    )


@pytest.mark.parametrize(
    "config",
    [
        {"tile_m": 1, "tile_n": 1},
        {"tile_m": 4, "tile_n": 2, "order": "rows_outer"},
        {"tile_m": 7, "tile_n": 3},
        {"tile_m": 8, "tile_n": 4},
    ],
)
def test_matmul_tiles(config, rng):
    # M = 23 and N = 70 leave partial row blocks and panels for every tile size
    arrays = {"a": randn(rng, 23, 29), "b": randn(rng, 29, 70)}
    got, want, _ = run_template("MatMul", arrays, {"b"}, {}, config)
    np.testing.assert_allclose(got, want, **TOL)


@pytest.mark.skipif(CPUTarget.host().vector_bits < 256, reason="AVX2 code does not run here")
@pytest.mark.parametrize("b_constant", [True, False])
def test_matmul_avx2_default_tile(b_constant, rng):
    """AVX2 code (8 lanes, the 6x2 default of 16 registers) computes the product; M = 23 and
    N = 70 leave a partial row block and panel."""
    arrays = {"a": randn(rng, 23, 29), "b": randn(rng, 29, 70)}
    avx2 = CPUTarget.parse("llvm -mcpu=znver3")
    got, want, _ = run_template("MatMul", arrays, {"b"} if b_constant else set(), {}, target=avx2)
    np.testing.assert_allclose(got, want, **TOL)
    got, want, residual = run_template("MatMul", arrays, {"b"}, {}, epilogue=True, target=avx2)
    assert residual is not None
    np.testing.assert_allclose(got, np.maximum(want + 0.5, 0) + residual, **TOL)


@pytest.mark.parametrize(
    "attrs,c_shape",
    [
        ({}, None),
        ({"transA": 1}, (33,)),
        ({"transB": 1, "alpha": 0.5}, (1, 33)),
        ({"transA": 1, "transB": 1, "alpha": 2.0, "beta": 0.25}, (7, 1)),
        ({"beta": -1.5}, (7, 33)),
        ({"beta": 0.0}, (7, 33)),
        ({"alpha": 3.0}, (1,)),
    ],
)
@pytest.mark.parametrize("b_constant", [True, False])
def test_gemm(attrs, c_shape, b_constant, rng):
    a = randn(rng, *((9, 7) if attrs.get("transA") else (7, 9)))
    b = randn(rng, *((33, 9) if attrs.get("transB") else (9, 33)))
    inputs, constants = {"a": a}, {}
    (constants if b_constant else inputs)["b"] = b
    if c_shape is not None:
        constants["c"] = randn(rng, *c_shape)
    order = ["a", "b", *(["c"] if c_shape is not None else [])]
    check_lowered("Gemm", inputs, attrs, constants=constants, input_order=order, **TOL)


def test_gemm_dense_gemv(rng):
    # a classifier layer: M = 1, B transposed and constant, a bias row
    a, b, c = randn(rng, 1, 300), randn(rng, 130, 300), randn(rng, 130)
    check_lowered(
        "Gemm",
        {"a": a},
        {"transB": 1},
        constants={"b": b, "c": c},
        input_order=["a", "b", "c"],
        **TOL,
    )


@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
def test_epilogue(op, rng):
    arrays = {"a": randn(rng, 11, 24), "b": randn(rng, 24, 40)}
    attrs = {"alpha": 0.5} if op == "Gemm" else {}
    if op == "Gemm":
        arrays["c"] = randn(rng, 40)
    got, want, residual = run_template(op, arrays, {"b", "c"}, attrs, epilogue=True)
    np.testing.assert_allclose(got, np.maximum(want + np.float32(0.5), 0) + residual, **TOL)


# ---- Det -------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (5, 4, 4), (2, 3, 7, 7)])
def test_det(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    check_lowered("Det", {"x": x}, opset=22, rtol=1e-4, atol=1e-5, expect="Det")


def test_det_singular_pivoting_and_cuda(rng):
    """A zero leading entry needs a row exchange; a singular matrix gives 0."""
    swap = np.array([[0.0, 2.0, 1.0], [3.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]])
    batch = np.stack([swap, singular, rng.standard_normal((3, 3))]).astype(np.float32)
    check_lowered("Det", {"x": batch}, opset=22, rtol=1e-5, atol=1e-6, expect="Det")
    x = rng.standard_normal((4, 5, 5)).astype(np.float32)
    cuda = LoweringTarget(kind="cuda")
    check_lowered("Det", {"x": x}, opset=22, rtol=1e-4, atol=1e-5, target=cuda, expect="Det")


def test_det_float64_against_numpy(rng):
    """onnxruntime has no float64 Det: numpy's LU is the oracle."""
    x = rng.standard_normal((3, 6, 6))
    (got,) = run_node(Node("Det", ["x"], ["y"], {}), [x], [TensorType((3,), "float64")])
    np.testing.assert_allclose(got, np.linalg.det(x), rtol=1e-12)


def test_pack_rows_puts_a_tiles_rows_side_by_side():
    """[..., M, K] -> [..., M/MR, K, MR]: element (m, k) at block m // MR, column m % MR of row
    k; rows past M are zeros (a GEMM with pack_a reads them and never stores their results)."""
    a = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3) + 1
    packed = pack_rows(a, 2)
    assert packed.shape == (2, 3, 3, 2)
    for g, m, k in np.ndindex(a.shape):
        assert packed[g, m // 2, k, m % 2] == a[g, m, k]
    np.testing.assert_array_equal(packed[:, 2, :, 1], 0)
