"""What the quantization ops share: integer ranges, how a scale or zero point is laid out against
the data (per tensor, per axis, blocked) and read for one element, and round-then-saturate, once
as kernel IR and once in numpy, the two kept step for step alike.

Rounding is `round_even` (llvm.roundeven: roundps/vrndscaleps with the ties-to-even mode on
x86, cvt.rni on NVPTX, np.rint in the interpreter), applied to a float that holds the exact
quotient or product rounded once; the result is an integer-valued float, so adding the zero
point and clamping happen on exact integers (see `round_saturate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tvmc.kernel import Expr, IntImm, cast, round_even, select
from tvmc.ops.common import normalize_axis
from tvmc.ops.elementwise.literals import literal, uniform_value
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef

QUANT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")  # what tvmc quantizes to or from
EXACT_FLOAT32 = 1 << 24  # every integer of at most this magnitude is a float32
EXACT_FLOAT64 = 1 << 53

TENSOR, AXIS, BLOCKED = "per-tensor", "per-axis", "blocked"


def int_range(dtype: str) -> tuple[int, int]:
    """The smallest and largest value of integer `dtype`."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def check_quant_dtype(dtype: str, what: str) -> str:
    """`dtype` when tvmc quantizes to or from it; ValueError otherwise."""
    if dtype not in QUANT_DTYPES:
        raise ValueError(f"{what} must be one of {list(QUANT_DTYPES)}, got {dtype}")
    return dtype


# ---- scale and zero point layouts ----------------------------------------------------------------
def param_layout(attrs: Attrs, x_shape: Sequence[int], shape: Sequence[int], what: str) -> str:
    """How a scale or zero point of `shape` applies to data of `x_shape`; ValueError if it
    fits none of the three ONNX granularities."""
    block = int(attrs["block_size"])
    if block < 0:
        raise ValueError(f"block_size must be >= 0, got {block}")
    if block == 0 and len(shape) <= 1 and math.prod(shape) == 1:
        return TENSOR
    axis = normalize_axis(int(attrs["axis"]), len(x_shape), "quantization")
    if block == 0:
        if tuple(shape) != (x_shape[axis],):
            raise ValueError(
                f"{what} of shape {list(shape)} is neither a scalar nor 1-D of the length of "
                f"axis {axis} of the data {list(x_shape)} (per-axis)"
            )
        return AXIS
    want = [-(-d // block) if i == axis else d for i, d in enumerate(x_shape)]
    if list(shape) != want:
        raise ValueError(
            f"blocked {what} must have shape {want} (data {list(x_shape)}, axis {axis}, "
            f"block_size {block}), got {list(shape)}"
        )
    return BLOCKED


def expand_param(p: np.ndarray, attrs: Attrs, x_shape: Sequence[int]) -> np.ndarray:
    """A scale or zero point as numpy broadcasts it against the data (the references)."""
    layout = param_layout(attrs, x_shape, p.shape, "parameter")
    if layout == TENSOR:
        return p.reshape(())
    axis = normalize_axis(int(attrs["axis"]), len(x_shape))
    if layout == AXIS:
        return p.reshape([-1 if d == axis else 1 for d in range(len(x_shape))])
    repeated = np.repeat(p, int(attrs["block_size"]), axis=axis)
    return np.take(repeated, np.arange(x_shape[axis]), axis=axis)


def param_read(ref: TensorRef, attrs: Attrs, x_shape: Sequence[int]) -> Accessor:
    """Read a scale or zero point at the data's indices: its one element, element idx[axis],
    or the element of idx[axis]'s block."""
    layout = param_layout(attrs, x_shape, ref.shape, ref.name)
    lit = uniform_value(ref)
    if lit is not None:  # a constant like most scales: a literal LLVM can fold
        return lambda idx: lit
    if layout == TENSOR:
        first = tuple(IntImm(0, "int32") for _ in ref.shape)
        return lambda idx: ref.read(first)
    axis = normalize_axis(int(attrs["axis"]), len(x_shape))
    if layout == AXIS:
        return lambda idx: ref.read((idx[axis],))
    block = int(attrs["block_size"])

    def read(idx: Indices) -> Expr:
        return ref.read(tuple(i // block if d == axis else i for d, i in enumerate(idx)))

    return read


# ---- rounding and saturation ---------------------------------------------------------------------
def saturation_dtype(dtype: str) -> str:
    """The float that holds every value of integer `dtype` and its sums with a zero point."""
    lo, hi = int_range(dtype)
    return "float32" if max(-lo, hi) <= EXACT_FLOAT32 else "float64"


def round_saturate(value: Expr, zero_point: Expr | None, dtype: str) -> Expr:
    """round_even(value) + zero_point, clamped to `dtype`'s range; NaN gives the minimum (as
    onnxruntime's x86 kernels do). `value` is a float.

    Exact: the rounded value is an integer-valued float, widened exactly to a float that holds
    `dtype`'s range. Its sum with the zero point is exact while it is at most 2**24 (float32) in
    magnitude; a larger sum may round but stays beyond the range, so it clamps to the same end.
    """
    lo, hi = int_range(dtype)
    work = saturation_dtype(dtype)
    r = cast(work, round_even(value))
    if zero_point is not None:
        r = r + cast(work, zero_point)
    low, high = literal(lo, work), literal(hi, work)
    r = select(r > low, r, low)  # a NaN fails the test
    r = select(r < high, r, high)
    return cast(dtype, r)


def round_saturate_reference(
    value: np.ndarray, zero_point: np.ndarray | None, dtype: str
) -> np.ndarray:
    """`round_saturate` in numpy."""
    lo, hi = int_range(dtype)
    r = np.rint(value).astype(np.float64)
    if zero_point is not None:
        r = r + zero_point.astype(np.float64)
    with np.errstate(invalid="ignore"):
        r = np.where(r > lo, r, lo)
        r = np.where(r < hi, r, hi)
    return r.astype(dtype)
