"""Trilu: the upper or lower triangle of the last two dims, the rest zero. Rule, reference and
compute; `k` (the diagonal offset, an input in ONNX) is a resolved attribute."""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, select
from tvmc.ops.elementwise.literals import zero
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.registry import INJECTIVE, OpDef


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


DEFINITIONS = [
    OpDef("Trilu", _trilu_rule, trilu, computed(trilu_compute), {"upper": 1, "k": 0}, INJECTIVE),
]
