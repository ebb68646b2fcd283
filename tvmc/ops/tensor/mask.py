"""Masks: each output element is chosen by comparing its position with a number. Trilu (the
upper or lower triangle of the last two dims), EyeLike (ones on a diagonal) and OneHot (the
`on` value where the position along `axis` equals the index). Rules, references and computes;
the diagonal offsets `k` and OneHot's `depth` (inputs in ONNX) are resolved attributes.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import DTYPES, TensorType
from tvmc.kernel import Expr, const, select
from tvmc.ops.elementwise.literals import literal, zero
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.registry import INJECTIVE, REQUIRED, OpDef


# ---- Trilu -----------------------------------------------------------------------------------
def _trilu_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x = types[0]
    if x.ndim < 2:
        raise ValueError(f"Trilu needs an input of rank >= 2, got shape {list(x.shape)}")
    return [x]


def trilu(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    """Elements on or above (upper) / below (lower) diagonal `k` of the last two dims."""
    k = int(attrs["k"])
    return np.triu(x, k) if attrs["upper"] else np.tril(x, k)


def trilu_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """x where column - row is >= k (upper) or <= k (lower), else 0."""
    (x,) = inputs
    k, upper = int(attrs["k"]), bool(attrs["upper"])

    def read(idx: Indices) -> Expr:
        offset = idx[-1] - idx[-2]
        kept = offset >= k if upper else offset <= k
        value = x.read(idx)
        return select(kept, value, zero(value))

    return [read]


# ---- EyeLike ---------------------------------------------------------------------------------
def _eye_like_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    if x.ndim != 2:
        raise ValueError(f"EyeLike needs a 2-D input, got shape {list(x.shape)}")
    if attrs["dtype"] not in DTYPES:
        raise ValueError(f"EyeLike dtype {attrs['dtype']!r} is not one of {list(DTYPES)}")
    return [TensorType(x.shape, attrs["dtype"])]


def eye_like(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    """Ones where column - row == k, zeros elsewhere, in the shape of x (its values unread)."""
    return np.eye(*x.shape, k=int(attrs["k"]), dtype=attrs["dtype"])


def eye_like_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """1 where column - row == k, else 0: only the position matters."""
    k, dtype = int(attrs["k"]), out_types[0].dtype
    one, nought = literal(1, dtype), literal(0, dtype)
    return [lambda idx: select((idx[1] - idx[0]).eq(k), one, nought)]


# ---- OneHot ----------------------------------------------------------------------------------
def _one_hot_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    indices, values = types
    depth, axis = int(attrs["depth"]), int(attrs["axis"])
    if indices.dtype == "bool":
        raise ValueError("OneHot indices must be numeric, got bool")
    if values.shape != (2,):
        raise ValueError(f"OneHot values must be [off, on] (shape [2]), got {list(values.shape)}")
    if depth < 1:
        raise ValueError(f"OneHot depth must be positive, got {depth}")
    if not -indices.ndim - 1 <= axis <= indices.ndim:
        raise ValueError(f"OneHot axis {axis} is out of range for output rank {indices.ndim + 1}")
    axis %= indices.ndim + 1
    shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]
    return [TensorType(shape, values.dtype)]


def one_hot(attrs: Attrs, indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`on` where the position along `axis` is the index (negative: from depth), else `off`."""
    depth, axis = int(attrs["depth"]), int(attrs["axis"]) % (indices.ndim + 1)
    hot = indices.astype(np.int64)  # float indices truncate, as onnxruntime's cast does
    hot = np.where(hot < 0, hot + depth, hot)
    match = np.expand_dims(hot, axis) == np.arange(depth).reshape((-1,) + (1,) * (hot.ndim - axis))
    return np.where(match, values[1], values[0])


def one_hot_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """values[1] where the output position along `axis` equals the (wrapped) index, else values[0].

    An index outside [-depth, depth) matches no position: the whole row is `off`.
    """
    indices, values = inputs
    depth, axis = int(attrs["depth"]), int(attrs["axis"]) % (indices.type.ndim + 1)

    def read(idx: Indices) -> Expr:
        i = indices.read((*idx[:axis], *idx[axis + 1 :])).astype("int64")
        i = select(i < const(0, "int64"), i + const(depth, "int64"), i)
        on, off = values.read((const(1),)), values.read((const(0),))
        return select(i.eq(idx[axis].astype("int64")), on, off)

    return [read]


DEFINITIONS = [
    OpDef("Trilu", _trilu_rule, trilu, computed(trilu_compute), {"upper": 1, "k": 0}, INJECTIVE),
    OpDef("EyeLike", _eye_like_rule, eye_like, computed(eye_like_compute),
          {"k": 0, "dtype": REQUIRED}, INJECTIVE),
    OpDef("OneHot", _one_hot_rule, one_hot, computed(one_hot_compute),
          {"depth": REQUIRED, "axis": -1}, INJECTIVE, num_inputs=(2, 2)),
]  # fmt: skip
