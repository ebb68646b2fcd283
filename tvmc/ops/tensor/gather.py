"""Gathers: Gather, GatherElements, GatherND and ReverseSequence, each a rule, a reference and a
compute. Their positions come from data (indices, sequence lengths), so every compute wraps
negative ones and clamps them into the input (`data_index`; out of range is undefined in ONNX):
no kernel reads out of bounds. The references raise IndexError instead.
"""

from __future__ import annotations

import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, const, select
from tvmc.ops.common import normalize_axis
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.registry import INJECTIVE, OpDef
from tvmc.ops.tensor.common import check_index_dtype, clamp, data_index, wrapped


# ---- Gather ----------------------------------------------------------------------------------
def _gather_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    data, indices = types
    check_index_dtype("Gather", "indices", indices)
    if data.ndim == 0:
        raise ValueError("Gather needs data of rank >= 1")
    axis = normalize_axis(attrs["axis"], data.ndim, "Gather")
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1 :]
    return [TensorType(shape, data.dtype)]


def gather(attrs, data, indices):
    """Negative indices count from the end; out-of-range ones raise IndexError."""
    axis = normalize_axis(attrs["axis"], data.ndim)
    return np.take(data, wrapped("Gather", indices, data.shape[axis]), axis=axis)


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
        return data_index(indices.read(idx[axis : axis + q]), dim)

    def read(idx: Indices) -> Expr:
        return data.read((*idx[:axis], position(idx), *idx[axis + q :]))

    return [read]


# ---- GatherElements --------------------------------------------------------------------------
def _gather_elements_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    data, indices = types
    check_index_dtype("GatherElements", "indices", indices)
    if data.ndim == 0 or indices.ndim != data.ndim:
        raise ValueError(
            f"GatherElements needs indices of the rank of data (>= 1), got shapes "
            f"{list(indices.shape)} and {list(data.shape)}"
        )
    axis = normalize_axis(attrs["axis"], data.ndim, "GatherElements")
    if any(i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != axis):
        raise ValueError(
            f"GatherElements indices {list(indices.shape)} exceed data {list(data.shape)} "
            f"outside axis {axis}"
        )
    return [TensorType(indices.shape, data.dtype)]


def gather_elements(attrs, data, indices):
    """out[i] = data[i with the axis coordinate replaced by indices[i]]."""
    axis = normalize_axis(attrs["axis"], data.ndim)
    positions = wrapped("GatherElements", indices, data.shape[axis])
    region = [slice(0, n) for n in indices.shape]
    region[axis] = slice(None)  # data beyond the indices' extent on the other axes is unread
    return np.take_along_axis(data[tuple(region)], positions, axis=axis)


def gather_elements_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """data at the output index with the axis coordinate read from indices."""
    data, indices = inputs
    axis = normalize_axis(attrs["axis"], data.type.ndim)
    dim = data.shape[axis]

    def read(idx: Indices) -> Expr:
        return data.read((*idx[:axis], data_index(indices.read(idx), dim), *idx[axis + 1 :]))

    return [read]


# ---- GatherND --------------------------------------------------------------------------------
def _gather_nd_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    data, indices = types
    if indices.dtype != "int64":
        raise ValueError(f"GatherND indices must be int64, got {indices.dtype}")
    b = int(attrs["batch_dims"])
    if data.ndim == 0 or indices.ndim == 0:
        raise ValueError("GatherND needs data and indices of rank >= 1")
    if not 0 <= b < min(data.ndim, indices.ndim):
        raise ValueError(f"GatherND batch_dims {b} must be below both ranks")
    if data.shape[:b] != indices.shape[:b]:
        raise ValueError(
            f"GatherND batch dims differ: data {list(data.shape)}, indices {list(indices.shape)}"
        )
    k = indices.shape[-1]
    if b + k > data.ndim:
        raise ValueError(f"GatherND index tuples of {k} address data of rank {data.ndim - b}")
    return [TensorType(indices.shape[:-1] + data.shape[b + k :], data.dtype)]


def gather_nd(attrs, data, indices):
    """Each index tuple (last axis of indices) picks a slice of data, per batch."""
    b, k = int(attrs["batch_dims"]), indices.shape[-1]
    batches, count = math.prod(data.shape[:b]), math.prod(indices.shape[b:-1])
    tuples = indices.reshape(batches, count, k)
    blocks = data.reshape(batches, *data.shape[b:])
    out = np.empty((batches, count, *data.shape[b + k :]), data.dtype)
    for n in range(batches):
        where = tuple(wrapped("GatherND", tuples[n, :, j], data.shape[b + j]) for j in range(k))
        out[n] = blocks[n][where] if k else blocks[n]  # no tuple entries: the whole block
    return out.reshape(indices.shape[:-1] + data.shape[b + k :])


def gather_nd_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """data[batch..., indices[batch..., j..., :] (each wrapped and clamped), slice...]."""
    data, indices = inputs
    b, q, k = int(attrs["batch_dims"]), indices.type.ndim, indices.shape[-1]

    def read(idx: Indices) -> Expr:
        tuple_at = idx[: q - 1]
        picked = [
            data_index(indices.read((*tuple_at, const(j))), data.shape[b + j]) for j in range(k)
        ]
        return data.read((*idx[:b], *picked, *idx[q - 1 :]))

    return [read]


# ---- ReverseSequence -------------------------------------------------------------------------
def _reverse_sequence_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, lens = types
    check_index_dtype("ReverseSequence", "sequence_lens", lens)
    t, b = int(attrs["time_axis"]), int(attrs["batch_axis"])
    if x.ndim < 2 or {t, b} != {0, 1}:
        raise ValueError(
            f"ReverseSequence needs rank >= 2 and time_axis, batch_axis 0 and 1 (either way), "
            f"got rank {x.ndim}, time_axis {t}, batch_axis {b}"
        )
    if lens.shape != (x.shape[b],):
        raise ValueError(
            f"ReverseSequence sequence_lens must have shape [{x.shape[b]}] (the batch), "
            f"got {list(lens.shape)}"
        )
    return [x]


def reverse_sequence(attrs, x, lens):
    """Per batch entry, the first sequence_lens[b] steps along the time axis reversed."""
    t, b = int(attrs["time_axis"]), int(attrs["batch_axis"])
    if lens.size and (lens.min() < 0 or lens.max() > x.shape[t]):
        raise IndexError(f"ReverseSequence lengths must lie in [0, {x.shape[t]}]")
    out = x.copy()
    for n, length in enumerate(lens.tolist()):
        at = [slice(None)] * x.ndim
        at[b], at[t] = n, slice(0, length)
        out[tuple(at)] = np.flip(x[tuple(at)], axis=0)  # time is the first axis left
    return out


def reverse_sequence_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """Time step t of batch entry n reads step len[n] - 1 - t while t < len[n], else t."""
    x, lens = inputs
    t, b = int(attrs["time_axis"]), int(attrs["batch_axis"])
    steps = x.shape[t]

    def read(idx: Indices) -> Expr:
        length = clamp(lens.read((idx[b],)), 0, steps).astype("int32")
        step = idx[t]
        src = list(idx)
        src[t] = select(step < length, length - 1 - step, step)
        return x.read(tuple(src))

    return [read]


DEFINITIONS = [
    OpDef("Gather", _gather_rule, gather, computed(gather_compute),
          attrs={"axis": 0}, kind=INJECTIVE, num_inputs=(2, 2)),
    OpDef("GatherElements", _gather_elements_rule, gather_elements,
          computed(gather_elements_compute), attrs={"axis": 0}, kind=INJECTIVE,
          num_inputs=(2, 2)),
    OpDef("GatherND", _gather_nd_rule, gather_nd, computed(gather_nd_compute),
          attrs={"batch_dims": 0}, kind=INJECTIVE, num_inputs=(2, 2)),
    OpDef("ReverseSequence", _reverse_sequence_rule, reverse_sequence,
          computed(reverse_sequence_compute), attrs={"time_axis": 0, "batch_axis": 1},
          kind=INJECTIVE, num_inputs=(2, 2)),
]  # fmt: skip
