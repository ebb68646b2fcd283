"""TensorScatter (opset 24): a KV cache update, `update` written into `past_cache` along `axis`
from each batch sample's write index, linearly or wrapping round (`circular`).

Written as a gather, a compute serving every target: each output element is the update
element that lands on it or the cache element it keeps. Within one sample the update is at
most the cache's length, so no two update elements land on one position. A linear write that
runs past the cache's end (undefined in ONNX) drops the overflow; the reference raises.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, const, select
from tvmc.ops.common import normalize_axis
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.registry import INJECTIVE, OpDef
from tvmc.ops.tensor.common import clamp

MODES = ("linear", "circular")


def _rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    past, update = types[0], types[1]
    if attrs["mode"] not in MODES:
        raise ValueError(f"TensorScatter mode {attrs['mode']!r} is not one of {list(MODES)}")
    if past.ndim < 2:
        raise ValueError(f"TensorScatter needs a cache of rank >= 2, got {list(past.shape)}")
    axis = normalize_axis(attrs["axis"], past.ndim, "TensorScatter")
    if axis == 0:
        raise ValueError("TensorScatter's axis cannot be the batch axis 0")
    if update.dtype != past.dtype:
        raise ValueError(f"TensorScatter update ({update.dtype}) differs from the cache "
                         f"({past.dtype})")  # fmt: skip
    beside = [d for a, d in enumerate(past.shape) if a != axis]
    if update.ndim != past.ndim or [d for a, d in enumerate(update.shape) if a != axis] != beside:
        raise ValueError(f"TensorScatter update {list(update.shape)} must match the cache "
                         f"{list(past.shape)} but on axis {axis}")  # fmt: skip
    if update.shape[axis] > past.shape[axis]:
        raise ValueError(f"TensorScatter update of {update.shape[axis]} positions is longer than "
                         f"the cache ({past.shape[axis]})")  # fmt: skip
    if len(types) == 3 and (types[2].dtype != "int64" or types[2].shape != past.shape[:1]):
        raise ValueError(f"TensorScatter write_indices must be int64 of shape [{past.shape[0]}], "
                         f"got {types[2].dtype}{list(types[2].shape)}")  # fmt: skip
    return [past]


def tensor_scatter(attrs: Attrs, past: np.ndarray, update: np.ndarray, write_indices=None):
    """ONNX's pseudocode: each sample's update rows copied in from its write index."""
    axis = normalize_axis(attrs["axis"], past.ndim)
    size, length = past.shape[axis], update.shape[axis]
    starts = np.zeros(past.shape[0], np.int64) if write_indices is None else write_indices
    out = past.copy()
    for b, start in enumerate(starts):
        positions = int(start) + np.arange(length)
        if attrs["mode"] == "circular":
            positions %= size
        elif positions.size and (positions.min() < 0 or positions.max() >= size):
            raise IndexError(f"TensorScatter writes positions {positions.tolist()} of {size}")
        rows = np.moveaxis(out[b], axis - 1, 0)  # a view: writes land in `out`
        rows[positions] = np.moveaxis(update[b], axis - 1, 0)
    return out


def tensor_scatter_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """out[idx] = update at (idx's position - the sample's write index) when that is inside the
    update, else past_cache[idx]."""
    past, update = inputs[0], inputs[1]
    starts = inputs[2] if len(inputs) == 3 else None
    axis = normalize_axis(attrs["axis"], past.type.ndim)
    size, length = past.shape[axis], update.shape[axis]
    circular = attrs["mode"] == "circular"

    def offset(idx: Indices) -> Expr:
        """The position within the update that lands on idx (int64, maybe outside it)."""
        position = idx[axis].astype("int64")
        if starts is None:
            return position
        start = starts.read((idx[0],))
        if circular:  # both in [0, size): the distance forward from start, wrapped round
            start = start % const(size, "int64")
            start = select(start < const(0, "int64"), start + const(size, "int64"), start)
            back = position - start
            return select(back < const(0, "int64"), back + const(size, "int64"), back)
        return position - start

    def read(idx: Indices) -> Expr:
        s = offset(idx)
        inside = (s >= const(0, "int64")) & (s < const(length, "int64"))
        row = clamp(s, 0, length - 1).astype("int32")  # in bounds either way
        written = update.read((*idx[:axis], row, *idx[axis + 1 :]))
        return select(inside, written, past.read(idx))

    return [read]


DEFINITIONS = [
    OpDef("TensorScatter", _rule, tensor_scatter, computed(tensor_scatter_compute),
          {"axis": -2, "mode": "linear"}, INJECTIVE, num_inputs=(2, 3),
          doc="past_cache with update written along axis from each sample's write index "
              "(linear or circular)."),
]  # fmt: skip
