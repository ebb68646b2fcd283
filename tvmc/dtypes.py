"""Element types: their names (numpy's and ml_dtypes'), which are narrow, and numpy views of them.

Shared by every layer (like errors and config). numpy knows the narrow types once ml_dtypes is
imported, which took 0.8-1.3 s on our 2-core machine (docs/performance.md, Start-up), so it is
imported only where narrow types are met: `numpy_dtype(name)` imports it for a narrow name (use
it wherever a dtype name becomes a numpy dtype outside the compiler); the compiler's op families
import it with `tvmc.ops`, and the runtime when a package holds a narrow buffer
(`register_narrow_types`).

Narrow types have no arithmetic of their own on CPUs: they are stored in their own bytes and
computed in a wide type. Narrow floats (bfloat16, float8, float4) are stored as their bits in 16
or 8 bits and computed in float32; narrow integers (int4, uint4, int2, uint2) are stored one per
byte (the value in the low bits, as ml_dtypes holds them) and computed in int32.
"""

from __future__ import annotations

import numpy as np

NATIVE_FLOATS = ("float16", "float32", "float64")
NATIVE_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
NARROW_FLOATS = (
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
)
NARROW_INTS = ("int4", "uint4", "int2", "uint2")
FLOATS = NATIVE_FLOATS + NARROW_FLOATS
INTS = NATIVE_INTS + NARROW_INTS
# The historical order first: CLI choices and docs list them in this order.
DTYPES = (*NATIVE_FLOATS, *NATIVE_INTS, "bool", *NARROW_FLOATS, *NARROW_INTS)


def is_narrow(dtype: str) -> bool:
    """True for the types stored narrow and computed wide (bfloat16, float8/4, int4/2)."""
    return dtype in NARROW_FLOATS or dtype in NARROW_INTS


def wide_dtype(dtype: str) -> str:
    """The type a narrow type computes in (float32 or int32); other types are their own."""
    if dtype in NARROW_FLOATS:
        return "float32"
    return "int32" if dtype in NARROW_INTS else dtype


def storage_dtype(dtype: str) -> str:
    """The unsigned integer type of a narrow type's stored bits (uint16 or uint8)."""
    return "uint16" if dtype == "bfloat16" else "uint8"


def register_narrow_types() -> None:
    """Makes numpy know bfloat16, float8_*, float4_e2m1fn, int4, ... (imports ml_dtypes)."""
    import ml_dtypes  # noqa: F401  (its import registers the types; once per process)


def numpy_dtype(dtype: str | np.dtype) -> np.dtype:
    """The numpy dtype of a tvmc dtype name; narrow names import ml_dtypes first."""
    if isinstance(dtype, str) and is_narrow(dtype):
        register_narrow_types()
    return np.dtype(dtype)


def as_dtype(array: np.ndarray, dtype: str) -> np.ndarray:
    """`array` itself, or its bytes viewed as `dtype` when it is the raw-void form that .npz
    files give back for ml_dtypes arrays (numpy saves them as V1/V2); other arrays unchanged."""
    want = numpy_dtype(dtype)
    if array.dtype.kind == "V" and array.dtype.names is None and array.dtype != want:
        if array.dtype.itemsize == want.itemsize:
            return array.view(want)
    return array
