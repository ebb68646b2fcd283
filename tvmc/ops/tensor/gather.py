"""Gather: rule, reference and compute. Indices come from data, so the compute clamps them
into the input (out-of-range indices are undefined in ONNX).
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, const, select
from tvmc.ops.common import normalize_axis
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.registry import INJECTIVE, OpDef
from tvmc.ops.tensor.common import INDEX_DTYPES, clamp


# ---- Gather ----------------------------------------------------------------------------------
def _gather_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    data, indices = types
    if indices.dtype not in INDEX_DTYPES:
        raise ValueError(f"Gather indices must be int32 or int64, got {indices.dtype}")
    if data.ndim == 0:
        raise ValueError("Gather needs data of rank >= 1")
    axis = normalize_axis(attrs["axis"], data.ndim, "Gather")
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1 :]
    return [TensorType(shape, data.dtype)]


def gather(attrs, data, indices):
    """Negative indices count from the end; out-of-range ones raise IndexError."""
    axis = normalize_axis(attrs["axis"], data.ndim)
    dim = data.shape[axis]
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        raise IndexError(f"Gather index out of range [{-dim}, {dim - 1}] on axis {axis}")
    return np.take(data, np.where(indices < 0, indices + dim, indices), axis=axis)


def _constant_index(values: np.ndarray, dim: int) -> tuple[int, int] | None:
    """(first, step) when constant 1-D indices (after wrapping) form an arithmetic sequence."""
    v = np.where(values < 0, values + dim, values).astype(np.int64).reshape(-1)
    if v.size == 0 or v.min() < 0 or v.max() >= dim:
        return None
    step = int(v[1] - v[0]) if v.size > 1 else 0
    if np.array_equal(v, v[0] + step * np.arange(v.size)):
        return int(v[0]), step
    return None


def gather_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """out[..., j..., ...] = data[..., indices[j...] (wrapped if negative, clamped), ...]."""
    data, indices = inputs
    axis = normalize_axis(attrs["axis"], data.type.ndim)
    dim, q = data.shape[axis], indices.type.ndim
    sequence = None
    if indices.value is not None and q <= 1:
        sequence = _constant_index(indices.value, dim)

    def position(idx: Indices) -> Expr:
        if sequence is not None:  # no load: a constant or an affine function of the index
            first, step = sequence
            return const(first) if q == 0 or step == 0 else idx[axis] * step + first
        i = indices.read(idx[axis : axis + q])
        i = select(i < const(0, i.dtype), i + const(dim, i.dtype), i)
        return clamp(i, 0, dim - 1).astype("int32")  # after clamping it fits the int32 index

    def read(idx: Indices) -> Expr:
        return data.read((*idx[:axis], position(idx), *idx[axis + q :]))

    return [read]


DEFINITIONS = [
    OpDef("Gather", _gather_rule, gather, computed(gather_compute),
          attrs={"axis": 0}, kind=INJECTIVE, num_inputs=(2, 2)),
]  # fmt: skip
