"""What the tensor ops share: index dtypes, pad modes, index clamping."""

from __future__ import annotations

from tvmc.kernel import Expr, IntImm, const, maximum, minimum

MANY = (1, 1 << 16)  # the input count of the variadic ops (Concat)
INDEX_DTYPES = ("int32", "int64")
PAD_MODES = ("constant", "reflect", "edge", "wrap")
ZERO = IntImm(0, "int32")


def clamp(i: Expr, lo: int, hi: int) -> Expr:
    """`i` limited to [lo, hi] (bounds known at compile time)."""
    return minimum(maximum(i, const(lo, i.dtype)), const(hi, i.dtype))
