"""Cast: conversion between element types, with ONNX's float8 saturation and e8m0 rounding.

A plain conversion is numpy's `astype` (through ml_dtypes for the narrow types): floats to
integers truncate toward zero, to bool means != 0, to a narrow float rounds to nearest even. Two
attributes (opset 19+, 24+) refine conversions to float8: `saturate` (default 1) clamps a value
beyond the largest finite one (inf included) to it before rounding, as ONNX's reference does;
with 0, the format's own overflow rule applies (inf where it has one, else NaN). float8_e8m0fnu
follows ONNX's rule instead of ml_dtypes': the exponent of |x| rounded by `round_mode` (up,
down, nearest), clamped at 2**127 when saturating.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tvmc.dtypes import NARROW_FLOATS, NATIVE_FLOATS
from tvmc.graph import TensorType
from tvmc.kernel import Expr, select
from tvmc.kernel.floatbits import onnx_e8m0
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.elementwise.unary import unary
from tvmc.ops.lowering import Attrs
from tvmc.ops.registry import REQUIRED

SATURATING = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
ROUND_MODES = ("up", "down", "nearest")


def _rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    if attrs["round_mode"] not in ROUND_MODES:
        raise ValueError(f"Cast round_mode {attrs['round_mode']!r} is not one of {ROUND_MODES}")
    return [TensorType(types[0].shape, attrs["to"])]


def _clamped(x: np.ndarray, to: str) -> np.ndarray:
    """`x` clamped to ±(the largest finite value of `to`), as onnx.numpy_helper.saturate_cast
    clamps: in x's own float type, narrow floats in float32, integers in float64."""
    big = float(ml_dtypes.finfo(to).max)
    if x.dtype.name not in NATIVE_FLOATS:
        x = x.astype(np.float32 if x.dtype.name in NARROW_FLOATS else np.float64)
    return np.clip(x, -big, big)


def e8m0_reference(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8_e8m0fnu by ONNX's rule (onnx.numpy_helper.to_float8e8m0), from float32 bits."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.int64)
    fraction = bits & 0x7FFFFF
    if round_mode == "up":
        up = fraction > 0
    elif round_mode == "nearest":
        up = (fraction >= 1 << 22) & (((fraction & 0x3FFFFF) > 0) | (exponent > 0))
    else:
        up = np.zeros(bits.shape, bool)
    if saturate:
        up &= exponent != 254
    code = np.where(exponent == 255, 255, np.minimum(exponent + up, 255))
    return code.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def _reference(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    to = attrs["to"]
    if to == "float8_e8m0fnu":
        return e8m0_reference(x.astype(np.float32), bool(attrs["saturate"]), attrs["round_mode"])
    if to in SATURATING and attrs["saturate"]:
        x = _clamped(x, to)
    return x.astype(to)


def _ir(attrs: Attrs, x: Expr) -> Expr:
    to = attrs["to"]
    if to == "float8_e8m0fnu":
        return onnx_e8m0(x.astype("float32"), bool(attrs["saturate"]), attrs["round_mode"])
    if to in SATURATING and attrs["saturate"]:
        if x.dtype not in NATIVE_FLOATS:  # as _clamped: narrow floats in float32 (exact)
            x = x.astype("float32" if x.dtype in NARROW_FLOATS else "float64")
        big = float(ml_dtypes.finfo(to).max)
        hi, lo = literal(big, x.dtype), literal(-big, x.dtype)
        x = select(x > hi, hi, select(x < lo, lo, x))  # NaN passes, as in np.clip
    return x.astype(to)


DEFINITIONS = [
    unary("Cast", _reference, _ir, attrs={"to": REQUIRED, "saturate": 1, "round_mode": "up"},
          infer=_rule,
          doc="Conversion: float to int truncates toward zero; to bool means != 0; to a narrow "
              "float rounds to nearest even, float8 saturating unless saturate=0; float8_e8m0fnu "
              "rounds by round_mode."),
]  # fmt: skip
