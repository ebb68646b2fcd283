"""Literals and broadcast operands: how the elementwise computes read their inputs.

Constant operands whose elements are all equal become literals, which lets LLVM fold them
(`x * 0.5`, `Pow(x, 2)` as `x * x`). Shared with the tensor and norm families.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tvmc.dtypes import wide_dtype
from tvmc.kernel import Expr, const
from tvmc.ops.lowering import Accessor, TensorRef, broadcast_read


def literal(value: int | float | bool | np.generic, dtype: str) -> Expr:
    """`value` as a literal of `dtype`, rounded the way numpy stores it in that dtype; a narrow
    float (bfloat16...) computes in float32, so its literals keep float32's precision."""
    return const(np.asarray(value).astype(wide_dtype(dtype)).item(), dtype)


def uniform_value(ref: TensorRef) -> Expr | None:
    """A literal when `ref` is a constant whose elements are all equal (NaN never is), else None."""
    v = ref.value
    if v is None or v.size == 0 or not np.all(v == v.flat[0]):
        return None
    return literal(v.flat[0], ref.dtype)


def operand(ref: TensorRef, out_shape: Sequence[int]) -> Accessor:
    """Read `ref` broadcast to `out_shape`; a uniform constant becomes a literal."""
    lit = uniform_value(ref)
    if lit is not None:
        return lambda idx: lit
    return broadcast_read(ref, out_shape)


def zero(x: Expr) -> Expr:
    """0 in the dtype of `x`."""
    return const(0, x.dtype)
