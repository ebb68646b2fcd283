"""Kernels and inputs for testing the narrow types' conversions (interpreter and codegen).

`cast_kernel` converts a vector of one type into another; the samples cover what a conversion
can get wrong: every bit pattern of a narrow type, and float32 values at and around each value
and each rounding tie of a narrow float, its subnormals, overflow, inf and NaN.
"""

from __future__ import annotations

import numpy as np

from tvmc.dtypes import NARROW_FLOATS, NARROW_INTS, storage_dtype
from tvmc.kernel import Buffer, Kernel, loop

NARROW = (*NARROW_FLOATS, *NARROW_INTS)
WIDE = ("float32", "float16", "float64", "int8", "int32", "int64", "uint8", "uint64", "bool")


def cast_kernel(src: str, dst: str, n: int, lanes: int = 16) -> Kernel:
    """`y[i] = x[i].astype(dst)` over `n` elements (a multiple of `lanes`), vectorized."""
    x, y = Buffer("x", (n,), src), Buffer("y", (n,), dst)

    def block(o):
        return loop("i", lanes, lambda i: y.store(o * lanes + i, x[o * lanes + i].astype(dst)),
                    kind="vectorized")  # fmt: skip

    return Kernel(f"cast_{src}_to_{dst}", (x, y), loop("o", n // lanes, block))


def bits_of(array: np.ndarray) -> np.ndarray:
    """The raw bits of `array`, as unsigned integers of its width (for bit-exact comparison)."""
    return array.view(f"uint{8 * array.dtype.itemsize}")


def every_pattern(dtype: str, repeat_to: int = 1) -> np.ndarray:
    """Every bit pattern of a narrow type (int4 and float4: 16, else 256 or 65536), tiled to a
    multiple of `repeat_to` elements."""
    count = 1 << {"bfloat16": 16, "float4_e2m1fn": 4, "int4": 4, "uint4": 4}.get(dtype, 8)
    count = 4 if dtype in ("int2", "uint2") else count
    patterns = np.arange(count, dtype=storage_dtype(dtype)).view(dtype)
    return np.tile(patterns, -(-repeat_to // count) if count < repeat_to else 1)


def edge_samples(dtype: str, step: int = 1) -> np.ndarray:
    """float32 inputs for converting to `dtype`: each of its values (every `step`-th), the ties
    between neighbours and the float32s just beside them, beyond the largest value, tiny
    float32 subnormals, zeros, infs and NaNs of both signs."""
    values = np.unique(every_pattern(dtype).astype(np.float32))
    values = values[np.isfinite(values)][::step]
    ties = ((values[:-1].astype(np.float64) + values[1:]) / 2).astype(np.float32)  # exact
    big = np.float32(np.max(values))
    beside = np.concatenate([np.nextafter(ties, np.float32(np.inf)),
                             np.nextafter(ties, np.float32(-np.inf))])  # fmt: skip
    with np.errstate(over="ignore"):
        special = np.array([0.0, np.inf, np.nan, 1e-45, 1e-40, 1.5 * 2.0**-127, 3e38,
                            big * 1.0625, big * 2, big + big / 64], np.float32)  # fmt: skip
    nans = np.array([0x7F800001, 0x7FFFFFFF, 0x7FA00000], np.uint32).view(np.float32)
    half = np.concatenate([values, ties, beside, special, nans])
    return np.concatenate([half, -half]).astype(np.float32)


def padded(array: np.ndarray, multiple: int) -> np.ndarray:
    """`array` repeated from its start up to a multiple of `multiple` elements."""
    return np.resize(array, -(-array.size // multiple) * multiple)
