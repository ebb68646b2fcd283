"""MaxPoolIndices: MaxPool's second output, where each window's maximum is, as a flat index
into the input (row-major, or column-major over the spatial axes with `storage_order` 1).

A compute serving every target: each index is a chain of compares over the window's taps in
ONNX's order, the first greatest element winning (as onnxruntime and the ONNX reference pick);
padding is never chosen. The values output stays MaxPool's own template; the two read the same
window, which is cheap beside the model's convolutions that come with indices (SegNet-style
encoders feeding MaxUnpool).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, const, select
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.pool.definition import MAXPOOL_DTYPES, pool_rule
from tvmc.ops.registry import INJECTIVE, OpDef
from tvmc.ops.tensor.common import clamp
from tvmc.ops.window import WINDOW_ATTRS, window_output_shape

_values_rule = pool_rule("MaxPool", MAXPOOL_DTYPES)


def _rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    if attrs["storage_order"] not in (0, 1):
        raise ValueError(f"MaxPool storage_order must be 0 or 1, got {attrs['storage_order']}")
    (values,) = _values_rule(attrs, types)
    return [TensorType(values.shape, "int64")]


def _taps(attrs: Attrs, spatial: int):
    """Each tap's offsets from the window's start, in ONNX's order (last axis fastest)."""
    ranges = [range(0, k * d, d) for k, d in zip(attrs["kernel_shape"], attrs["dilations"])]
    return itertools.product(*ranges) if spatial else iter(())


def _flat(coords, shape, column_major: bool):
    """The flat position of spatial `coords` in `shape` (Python ints or expressions)."""
    order = range(len(shape)) if column_major else reversed(range(len(shape)))
    flat, stride = 0, 1
    for axis in order:
        flat = flat + coords[axis] * stride
        stride *= shape[axis]
    return flat


def max_pool_indices(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    """The reference: every window scanned in order, the first greatest element's index."""
    spatial = x.ndim - 2
    size = x.shape[2:]
    out = window_output_shape(size, attrs, bool(attrs["ceil_mode"]))
    planes = x.reshape(-1, *size)
    result = np.full((planes.shape[0], *out), -1, np.int64)
    column_major = bool(attrs["storage_order"])
    for plane, window in itertools.product(range(planes.shape[0]), np.ndindex(*out)):
        start = [o * s - p for o, s, p in zip(window, attrs["strides"], attrs["pads"])]
        best = None
        for tap in _taps(attrs, spatial):
            at = [b + t for b, t in zip(start, tap)]
            if all(0 <= a < n for a, n in zip(at, size)):
                value = planes[(plane, *at)]
                if best is None or value > best:
                    best = value
                    result[(plane, *window)] = plane * math.prod(size) + _flat(
                        at, size, column_major
                    )
    return result.reshape(*x.shape[:2], *out)


def max_pool_indices_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    (x,) = inputs
    size = x.shape[2:]
    spatial, channels = len(size), x.shape[1]
    column_major = bool(attrs["storage_order"])

    def read(idx: Indices) -> Expr:
        start = [idx[2 + a] * attrs["strides"][a] - attrs["pads"][a] for a in range(spatial)]
        plane = idx[0].astype("int64") * channels + idx[1].astype("int64")
        found, best, where = None, None, const(-1, "int64")
        for tap in _taps(attrs, spatial):
            at = [start[a] + tap[a] for a in range(spatial)]
            inside = None
            for a in range(spatial):
                ok = (at[a] >= const(0, at[a].dtype)) & (at[a] < const(size[a], at[a].dtype))
                inside = ok if inside is None else inside & ok
            value = x.read((idx[0], idx[1], *(clamp(at[a], 0, size[a] - 1)
                                               for a in range(spatial))))  # fmt: skip
            flat = plane * math.prod(size) + _flat(
                [c.astype("int64") for c in at], size, column_major
            )
            if best is None:
                take = inside
            else:
                take = inside & (~found | (value > best))
            best = value if best is None else select(take, value, best)
            where = select(take, flat, where)
            found = inside if found is None else found | inside
        return where

    return [read]


DEFINITION = OpDef(
    "MaxPoolIndices", _rule, max_pool_indices, computed(max_pool_indices_compute),
    attrs={**WINDOW_ATTRS, "ceil_mode": 0, "storage_order": 0}, kind=INJECTIVE,
    doc="MaxPool's Indices output: the flat input index of each window's first maximum.",
)  # fmt: skip
