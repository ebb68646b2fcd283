"""QuantizeLinear and DequantizeLinear: rules, numpy references and computes (one per op, serving
every target through the injective schedule).

    QuantizeLinear:   y = saturate(round_even(x / scale) + zero_point)
    DequantizeLinear: y = (x - zero_point) * scale

Scales and zero points are per tensor, per axis or blocked (`common.param_layout`). Each op
does its arithmetic the way onnxruntime's CPU kernels do, so integer outputs match bit for bit:
the division in float32 (also for float16 scales and data), or in the `precision` attribute's
type; the dequantized difference as an exact integer, converted to float32 once, times the
scale in float32, then converted to the output type.
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, cast
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.quantization.common import (
    TENSOR,
    check_quant_dtype,
    expand_param,
    param_layout,
    param_read,
    round_saturate,
    round_saturate_reference,
)
from tvmc.ops.registry import BROADCAST, REQUIRED, OpDef

_DATA_DTYPES = (*FLOAT_DTYPES, "int32")  # what QuantizeLinear reads


def _check_params(attrs: Attrs, types: list[TensorType]) -> None:
    """Scale (input 1) and optional zero point (input 2) fit the data and each other."""
    x, scale = types[0], types[1]
    if scale.dtype not in FLOAT_DTYPES:
        raise ValueError(f"the scale must be a float tensor, got {scale.dtype}")
    layout = param_layout(attrs, x.shape, scale.shape, "the scale")
    if len(types) < 3 or (layout == TENSOR and types[2].size == 1 and types[2].ndim <= 1):
        return  # a per-tensor scale and zero point may be a scalar and a 1-element vector
    if types[2].shape != scale.shape:
        raise ValueError(
            f"the zero point's shape {list(types[2].shape)} differs from the scale's "
            f"{list(scale.shape)}"
        )


# ---- QuantizeLinear ------------------------------------------------------------------------------
def division_dtype(attrs: Attrs, types: list[TensorType]) -> str:
    """The float x / scale is computed in: `precision` when given, else float32 (float64 when
    the data or scale is float64), as onnxruntime computes float16 in float32."""
    if attrs["precision"]:
        return attrs["precision"]
    return "float64" if "float64" in (types[0].dtype, types[1].dtype) else "float32"


def _quantize_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, dtype = types[0], check_quant_dtype(attrs["to"], "the output type")
    if x.dtype not in _DATA_DTYPES:
        raise ValueError(f"QuantizeLinear reads {list(_DATA_DTYPES)}, got {x.dtype}")
    if attrs["precision"] and attrs["precision"] not in FLOAT_DTYPES:
        raise ValueError(f"precision must be one of {list(FLOAT_DTYPES)}, got {attrs['precision']}")
    _check_params(attrs, types)
    if len(types) == 3 and types[2].dtype != dtype:
        raise ValueError(f"the zero point is {types[2].dtype} but the output type is {dtype}")
    return [TensorType(x.shape, dtype)]


def quantize_linear(attrs: Attrs, x: np.ndarray, scale: np.ndarray, zero_point=None) -> np.ndarray:
    """saturate(round_even(x / scale) + zero_point) in the output type `to`."""
    work = division_dtype(attrs, [TensorType.of(x), TensorType.of(scale)])
    s = expand_param(scale, attrs, x.shape).astype(work)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = x.astype(work) / s
    z = None if zero_point is None else expand_param(zero_point, attrs, x.shape)
    return round_saturate_reference(value, z, attrs["to"])


def quantize_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """One element: the quotient in the division type, rounded and saturated."""
    x, scale = inputs[0], inputs[1]
    shape, dtype = out_types[0].shape, out_types[0].dtype
    work = division_dtype(attrs, [x.type, scale.type])
    read_scale = param_read(scale, attrs, shape)
    read_zero = param_read(inputs[2], attrs, shape) if len(inputs) == 3 else None

    def read(idx: Indices) -> Expr:
        value = cast(work, x.read(idx)) / cast(work, read_scale(idx))
        return round_saturate(value, read_zero(idx) if read_zero else None, dtype)

    return [read]


# ---- DequantizeLinear ----------------------------------------------------------------------------
def _dequantize_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, out = types[0], attrs["to"]
    check_quant_dtype(x.dtype, "DequantizeLinear's input")
    if out not in FLOAT_DTYPES:
        raise ValueError(f"the output type must be one of {list(FLOAT_DTYPES)}, got {out}")
    _check_params(attrs, types)
    if len(types) == 3 and types[2].dtype != x.dtype:
        raise ValueError(f"the zero point is {types[2].dtype} but the input is {x.dtype}")
    return [TensorType(x.shape, out)]


def _product_dtype(scale_dtype: str) -> str:
    return "float64" if scale_dtype == "float64" else "float32"


def dequantize_linear(
    attrs: Attrs, x: np.ndarray, scale: np.ndarray, zero_point=None
) -> np.ndarray:
    """(x - zero_point) * scale in the output type `to`."""
    diff = x.astype(np.int64)
    if zero_point is not None:
        diff = diff - expand_param(zero_point, attrs, x.shape).astype(np.int64)
    work = _product_dtype(scale.dtype.name)
    s = expand_param(scale, attrs, x.shape).astype(work)
    return (diff.astype(work) * s).astype(attrs["to"])


def dequantize_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """One element: the exact difference (int32; float64 for int32 data, which may overflow
    int32), converted once to the product type, times the scale."""
    x, scale = inputs[0], inputs[1]
    shape, out = out_types[0].shape, out_types[0].dtype
    work = _product_dtype(scale.dtype)
    wide = "float64" if x.dtype == "int32" else "int32"
    read_scale = param_read(scale, attrs, shape)
    read_zero = param_read(inputs[2], attrs, shape) if len(inputs) == 3 else None

    def read(idx: Indices) -> Expr:
        diff = cast(wide, x.read(idx))
        if read_zero is not None:
            diff = diff - cast(wide, read_zero(idx))
        return cast(out, cast(work, diff) * cast(work, read_scale(idx)))

    return [read]


_ATTRS = {"axis": 1, "block_size": 0, "to": REQUIRED}

DEFINITIONS = [
    OpDef("QuantizeLinear", _quantize_rule, quantize_linear, computed(quantize_compute),
          {**_ATTRS, "precision": ""}, BROADCAST, (2, 3),
          doc="saturate(round_even(x / scale) + zero_point): per tensor, per axis or blocked; "
              "`to` the integer output type, `precision` the division's float type ('' for "
              "float32)."),
    OpDef("DequantizeLinear", _dequantize_rule, dequantize_linear, computed(dequantize_compute),
          _ATTRS, BROADCAST, (2, 3),
          doc="(x - zero_point) * scale: per tensor, per axis or blocked; `to` the float output "
              "type."),
]  # fmt: skip
