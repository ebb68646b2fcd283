"""MatMul (numpy semantics, batched) and Gemm (a dense layer kept whole): shape rules, numpy
references, FLOPs. Their lowerings: tvmc.ops.linalg.cpu and tvmc.ops.linalg.gpu.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import broadcast_shape, broadcasts_to, same_dtype
from tvmc.ops.lowering import Attrs

# ONNX MatMul/Gemm accept floats and 32/64-bit integers; int8 products have their own ops
# (MatMulInteger), and a bool matmul is meaningless.
_MATMUL_DTYPES = ("float16", "float32", "float64", "bfloat16", "int32", "int64", "uint32", "uint64")


def _check_dtype(op: str, types: list[TensorType]) -> str:
    dtype = same_dtype(types, op)
    if dtype not in _MATMUL_DTYPES:
        raise ValueError(f"{op} does not support dtype {dtype}; supported: {list(_MATMUL_DTYPES)}")
    return dtype


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The result shape of numpy/ONNX matmul: 1-D operands promoted, batch dims broadcast."""
    if not a or not b:
        raise ValueError(f"MatMul operands must have rank >= 1, got shapes {list(a)} and {list(b)}")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"MatMul inner dimensions differ: {list(a)} x {list(b)} "
            f"(K={a2[-1]} on the left, {b2[-2]} on the right)"
        )
    batch = broadcast_shape(a2[:-2], b2[:-2])
    rows = () if len(a) == 1 else (a2[-2],)  # the promoted dims are removed again
    cols = () if len(b) == 1 else (b2[-1],)
    return (*batch, *rows, *cols)


def matmul_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    dtype = _check_dtype("MatMul", types)
    return [TensorType(matmul_shape(types[0].shape, types[1].shape), dtype)]


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == np.float16:  # accumulate half precision in float32, as real kernels do
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    return np.matmul(a, b)


def matmul(attrs, a, b):
    """Numpy matmul: [..., M, K] x [..., K, N]; a 1-D operand is a row (left) or column (right)."""
    return _matmul(a, b)


def gemm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    dtype = _check_dtype("Gemm", types)
    a, b = types[0].shape, types[1].shape
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"Gemm needs 2-D A and B, got shapes {list(a)} and {list(b)}")
    m, k = a[::-1] if attrs["transA"] else a
    kb, n = b[::-1] if attrs["transB"] else b
    if k != kb:
        trans_a, trans_b = int(attrs["transA"]), int(attrs["transB"])
        raise ValueError(
            f"Gemm inner dimensions differ: A {list(a)} (transA={trans_a}) gives K={k}, "
            f"B {list(b)} (transB={trans_b}) gives K={kb}"
        )
    if len(types) == 3:
        c = types[2].shape
        if not broadcasts_to(c, (m, n)):
            raise ValueError(f"Gemm bias C of shape {list(c)} does not broadcast to [{m},{n}]")
    return [TensorType((m, n), dtype)]


def gemm(attrs, a, b, c=None):
    """alpha * op(A) @ op(B) + beta * C, op transposing when transA/transB; C optional."""
    out = _matmul(a.T if attrs["transA"] else a, b.T if attrs["transB"] else b)
    if attrs["alpha"] != 1.0:
        out = out * out.dtype.type(attrs["alpha"])
    if c is not None and attrs["beta"] != 0.0:
        out = out + (c if attrs["beta"] == 1.0 else c * c.dtype.type(attrs["beta"]))
    return out


def matmul_flops(attrs: Attrs, inputs: list[TensorType], outputs: list[TensorType]) -> int:
    """Two per multiply-add: K of them per output."""
    return 2 * outputs[0].size * inputs[0].shape[-1]


def gemm_flops(attrs: Attrs, inputs: list[TensorType], outputs: list[TensorType]) -> int:
    """Two per multiply-add: K of them per output (K is A's rows when transA)."""
    a = inputs[0].shape
    return 2 * outputs[0].size * (a[0] if attrs["transA"] else a[-1])


def matmul_summary(attrs: Attrs, inputs: list[TensorType]) -> str:
    """The product's M x K x N, batch dims first: "12x128x64x128"."""
    a, b = inputs[0].shape, inputs[1].shape
    if attrs.get("transA"):
        a = (*a[:-2], a[-1], a[-2])
    if attrs.get("transB"):
        b = (*b[:-2], b[-1], b[-2])
    m = a[-2] if len(a) > 1 else 1
    k, n = a[-1], b[-1] if len(b) > 1 else 1
    batch = matmul_shape(a, b)[:-2] if len(a) > 1 and len(b) > 1 else ()
    return "x".join(map(str, (*batch, m, k, n)))
