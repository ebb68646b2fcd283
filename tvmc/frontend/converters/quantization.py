"""Converters of the quantization ONNX ops.

QuantizeLinear and DequantizeLinear map onto our ops of the same name with their attributes
resolved (output type from output_dtype or the zero point, precision, a normalized axis). The
integer ops are composed from existing ops plus tvmc.ops.quantization's Requantize and
DynamicQuantizeParams, each exact (the reasons are in tvmc.ops.quantization.integer):

- MatMulInteger: int32 MatMul of (A - a_zero_point) and (B - b_zero_point), widened to int32;
- ConvInteger: a float Conv of the shifted operands in float32 or float64, whichever holds every
  partial sum exactly, cast to int32 (through int64: a sum past int32 wraps as in onnxruntime);
- QLinearMatMul / QLinearConv: those sums, then Requantize by a_scale * b_scale / y_scale;
- DynamicQuantizeLinear: ReduceMin, ReduceMax, DynamicQuantizeParams, QuantizeLinear.
"""

from __future__ import annotations

import numpy as np
import onnx

from tvmc.dtypes import is_narrow
from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.conv import window_attrs
from tvmc.frontend.converters.registry import converter
from tvmc.graph import DTYPES
from tvmc.ops.common import broadcasts_to
from tvmc.ops.quantization.integer import (
    accumulation_dtype,
    conv_terms,
    offset_bound,
    weight_sums,
)

_INT8 = ("int8", "uint8")  # what the integer matmuls and convs read


def _dtype(node: OnnxNode, code: int, what: str) -> str:
    """Our dtype for ONNX element type `code` (an attribute); float8/int4/... are unsupported."""
    try:
        name = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code)).name
    except (KeyError, TypeError, ValueError):
        raise ModelError(f"{node.describe()}: {what} {code} is not an ONNX element type") from None
    if name not in DTYPES:
        raise UnsupportedModelError(f"{node.describe()}: {what} {name} is not supported by tvmc")
    return name


def _not_narrow(node: OnnxNode, dtype: str, what: str) -> str:
    """`dtype`, unless it is one of the narrow types (float8, int4...) the quantization ops do not
    take yet: they quantize to and compute in 8, 16 and 32-bit types."""
    if is_narrow(dtype):
        raise UnsupportedModelError(
            f"{node.describe()}: {what} {dtype} is not supported by tvmc's {node.op_type} "
            "(8, 16 and 32-bit types are)"
        )
    return dtype


def _outputs(ctx: ConvertContext, node: OnnxNode, first: int, count: int) -> list[str]:
    """Names for outputs first..first+count-1: the node's, or fresh ones for omitted outputs."""
    names = [node.outputs[i] if i < len(node.outputs) else "" for i in range(first, first + count)]
    hint = node.outputs[0] or node.name or node.op_type
    return [n or ctx.graph.fresh_name(f"{hint}_unused{i}") for i, n in enumerate(names)]


# ---- QuantizeLinear / DequantizeLinear -----------------------------------------------------------
def _layout_attrs(ctx: ConvertContext, node: OnnxNode) -> dict:
    """axis (non-negative where it matters) and block_size."""
    ndim, scale = ctx.type(node.inputs[0]).ndim, ctx.type(node.inputs[1])
    axis, block = int(node.attrs.get("axis", 1)), int(node.attrs.get("block_size", 0))
    if block == 0 and scale.size == 1 and scale.ndim <= 1:
        axis = 0  # per tensor: the axis means nothing (opset 10 data of rank 1 has axis 1)
    elif not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for the data's rank {ndim}")
    return {"axis": axis % max(ndim, 1), "block_size": block}


@converter("QuantizeLinear")
def QuantizeLinear(ctx: ConvertContext, node: OnnxNode) -> None:
    """Output type: output_dtype, else the zero point's, else uint8."""
    zero_point = node.input(2)
    to = ctx.type(zero_point).dtype if zero_point else "uint8"
    if node.attrs.get("output_dtype"):
        wanted = _dtype(node, node.attrs["output_dtype"], "output_dtype")
        if zero_point and wanted != to:
            raise ValueError(f"output_dtype {wanted} differs from the zero point's type {to}")
        to = wanted
    _not_narrow(node, to, "output_dtype" if node.attrs.get("output_dtype") else "output type")
    if node.attrs.get("saturate", 1) not in (0, 1):
        raise ValueError(f"saturate must be 0 or 1, got {node.attrs['saturate']}")
    # saturate only changes float8 outputs (integers always saturate); tvmc has none
    precision = node.attrs.get("precision", 0)
    attrs = {**_layout_attrs(ctx, node), "to": to,
             "precision": _not_narrow(node, _dtype(node, precision, "precision"), "precision")
             if precision else ""}  # fmt: skip
    ctx.add("QuantizeLinear", node.inputs[:3], attrs, outputs=node.outputs)


@converter("DequantizeLinear")
def DequantizeLinear(ctx: ConvertContext, node: OnnxNode) -> None:
    """Output type: output_dtype, else the scale's."""
    to = ctx.type(node.inputs[1]).dtype
    if node.attrs.get("output_dtype"):
        to = _dtype(node, node.attrs["output_dtype"], "output_dtype")
    _not_narrow(node, ctx.type(node.inputs[0]).dtype, "input type")
    _not_narrow(node, to, "output type")
    attrs = {**_layout_attrs(ctx, node), "to": to}
    ctx.add("DequantizeLinear", node.inputs[:3], attrs, outputs=node.outputs)


@converter("DynamicQuantizeLinear")
def DynamicQuantizeLinear(ctx: ConvertContext, node: OnnxNode) -> None:
    """uint8 by the data's range widened to include 0: min and max reductions, then scalars."""
    x = ctx.type(node.inputs[0])
    if x.dtype != "float32":
        raise ValueError(f"DynamicQuantizeLinear reads float32, got {x.dtype}")
    whole = {"axes": tuple(range(x.ndim)), "keepdims": False}
    (lo,) = ctx.add("ReduceMin", node.inputs[:1], whole)
    (hi,) = ctx.add("ReduceMax", node.inputs[:1], whole)
    scale, zero_point = ctx.add(
        "DynamicQuantizeParams", [lo, hi], outputs=_outputs(ctx, node, 1, 2)
    )
    attrs = {"axis": 0, "block_size": 0, "to": "uint8", "precision": ""}
    ctx.add("QuantizeLinear", [node.inputs[0], scale, zero_point], attrs,
            outputs=_outputs(ctx, node, 0, 1))  # fmt: skip


# ---- shared by the integer ops -------------------------------------------------------------------
def _as(ctx: ConvertContext, name: str, dtype: str) -> str:
    """`name` converted to `dtype` (itself when it already is)."""
    return name if ctx.type(name).dtype == dtype else ctx.add("Cast", [name], {"to": dtype})[0]


def _check_int8(ctx: ConvertContext, node: OnnxNode, data: int, zero_point: int) -> str:
    """The dtype of input `data` (int8/uint8) after checking its zero point's dtype and shape."""
    dtype = ctx.type(node.inputs[data]).dtype
    if dtype not in _INT8:
        raise ValueError(f"input {data} must be int8 or uint8, got {dtype}")
    if node.input(zero_point) and ctx.type(node.input(zero_point)).dtype != dtype:
        raise ValueError(f"input {zero_point} (zero point) must be {dtype} like input {data}")
    return dtype


def _shifted(
    ctx: ConvertContext, node: OnnxNode, data: int, zero_point: int, dtype: str, along: int | None
) -> str:
    """Input `data` widened to `dtype` minus its zero point (input `zero_point`, if any).

    A 1-D zero point with one value per index of axis `along` (A's rows: ndim - 2; a weight's
    output channels: 0) is reshaped to broadcast along that axis; others broadcast as numpy does.
    """
    x = node.inputs[data]
    wide = _as(ctx, x, dtype)
    if not node.input(zero_point):
        return wide
    shape, zp = ctx.type(x).shape, ctx.type(node.input(zero_point))
    z = _as(ctx, node.input(zero_point), dtype)
    if along is not None and zp.ndim == 1 and zp.size > 1 and len(shape) >= 2:
        (z,) = ctx.add("Reshape", [z], {"shape": [zp.size] + [1] * (len(shape) - 1 - along)})
    if not broadcasts_to(ctx.type(z).shape, shape):
        raise ValueError(
            f"zero point of shape {list(zp.shape)} does not fit input {data} {list(shape)}"
        )
    return ctx.add("Sub", [wide, z])[0]


def _multiplier(ctx: ConvertContext, node: OnnxNode, a: int, b: int, y: int) -> str:
    """float32 scale_a * scale_b / scale_y, in onnxruntime's order and precision."""
    sa, sb, sy = (_as(ctx, node.inputs[i], "float32") for i in (a, b, y))
    return ctx.add("Div", [ctx.add("Mul", [sa, sb])[0], sy])[0]


def _zero_point_or_0(ctx: ConvertContext, node: OnnxNode, index: int) -> str:
    """The output zero point; a uint8 0 when omitted (the default of QuantizeLinear)."""
    return node.input(index) or ctx.add_const(np.array(0, np.uint8))


# ---- matrix products -----------------------------------------------------------------------------
def _rows(ctx: ConvertContext, node: OnnxNode, index: int) -> int:
    """The axis of A's rows, along which a 1-D zero point runs (per-row quantization)."""
    return max(ctx.type(node.inputs[index]).ndim - 2, 0)


@converter("MatMulInteger")
def MatMulInteger(ctx: ConvertContext, node: OnnxNode) -> None:
    """int32 MatMul of the shifted operands: exact while the sums fit int32 (K <= 33,025)."""
    _check_int8(ctx, node, 0, 2)
    _check_int8(ctx, node, 1, 3)
    a = _shifted(ctx, node, 0, 2, "int32", _rows(ctx, node, 0))
    b = _shifted(ctx, node, 1, 3, "int32", None)
    ctx.add("MatMul", [a, b], outputs=node.outputs)


@converter("QLinearMatMul")
def QLinearMatMul(ctx: ConvertContext, node: OnnxNode) -> None:
    """The int32 MatMul of MatMulInteger, requantized."""
    _check_int8(ctx, node, 0, 2)
    _check_int8(ctx, node, 3, 5)
    a = _shifted(ctx, node, 0, 2, "int32", _rows(ctx, node, 0))
    b = _shifted(ctx, node, 3, 5, "int32", None)
    (acc,) = ctx.add("MatMul", [a, b])
    multiplier = _multiplier(ctx, node, 1, 4, 6)
    zero_point = _zero_point_or_0(ctx, node, 7)
    ctx.add("Requantize", [acc, multiplier, zero_point], outputs=node.outputs)


# ---- convolutions --------------------------------------------------------------------------------
def _conv_attrs(ctx: ConvertContext, node: OnnxNode, x: int, w: int) -> dict:
    """Conv's window attributes and group for data input `x` and weight input `w`."""
    kernel = list(ctx.type(node.inputs[w]).shape[2:])
    given = node.attrs.get("kernel_shape")
    if given is not None and list(given) != kernel:
        raise ValueError(f"kernel_shape {list(given)} differs from the weight's {kernel}")
    spatial = ctx.type(node.inputs[x]).shape[2:]
    return {**window_attrs(node, spatial, kernel), "group": node.attrs.get("group", 1)}


def _bound(ctx: ConvertContext, node: OnnxNode, data: int, zero_point: int) -> int:
    """The largest |q - zero_point| of input `data` (see offset_bound)."""
    name = node.input(zero_point)
    value = ctx.const(name)
    return offset_bound(ctx.type(node.inputs[data]).dtype, value, bool(name) and value is None)


def _integer_conv(
    ctx: ConvertContext, node: OnnxNode, x: int, x_zero: int, w: int, w_zero: int, bias: int | None
) -> str:
    """The float Conv whose sums equal the integer conv's exactly; returns its output."""
    if node.input(x_zero) and ctx.type(node.input(x_zero)).size != 1:
        raise ValueError(f"the data's zero point (input {x_zero}) must be a scalar")
    weights, zp = ctx.const(node.inputs[w]), node.input(w_zero)
    sums = None
    if weights is not None and (not zp or ctx.const(zp) is not None):
        sums = weight_sums(weights, ctx.const(zp) if zp else None)
    bias_name = node.input(bias) if bias is not None else ""
    bias_bound = 0
    if bias_name:
        b = ctx.const(bias_name)
        bias_bound = int(np.abs(b.astype(np.int64)).max(initial=0)) if b is not None else 1 << 31
    terms = conv_terms(ctx.type(node.inputs[w]).shape)
    acc = accumulation_dtype(_bound(ctx, node, x, x_zero), sums, terms,
                             _bound(ctx, node, w, w_zero), bias_bound)  # fmt: skip
    attrs = _conv_attrs(ctx, node, x, w)
    inputs = [_shifted(ctx, node, x, x_zero, acc, None), _shifted(ctx, node, w, w_zero, acc, 0)]
    if bias_name:
        if ctx.type(bias_name).dtype != "int32":
            raise ValueError(f"the bias must be int32, got {ctx.type(bias_name).dtype}")
        inputs.append(_as(ctx, bias_name, acc))
    return ctx.add("Conv", inputs, attrs)[0]


@converter("ConvInteger")
def ConvInteger(ctx: ConvertContext, node: OnnxNode) -> None:
    """int32 from the exact float Conv (through int64, so a sum past int32 wraps)."""
    _check_int8(ctx, node, 0, 2)
    _check_int8(ctx, node, 1, 3)
    acc = _integer_conv(ctx, node, 0, 2, 1, 3, bias=None)
    if ctx.type(acc).dtype == "float64":
        acc = _as(ctx, acc, "int64")
    ctx.add("Cast", [acc], {"to": "int32"}, outputs=node.outputs)


@converter("QLinearConv")
def QLinearConv(ctx: ConvertContext, node: OnnxNode) -> None:
    """The exact float Conv of ConvInteger (bias included), requantized per output channel."""
    _check_int8(ctx, node, 0, 2)
    _check_int8(ctx, node, 3, 5)
    acc = _integer_conv(ctx, node, 0, 2, 3, 5, bias=8)
    multiplier = _multiplier(ctx, node, 1, 4, 6)
    channels = ctx.type(multiplier)
    if channels.size > 1:  # per output channel: along axis 1 of the output
        spatial = ctx.type(acc).ndim - 2
        (multiplier,) = ctx.add("Reshape", [multiplier], {"shape": [channels.size] + [1] * spatial})
    zero_point = _zero_point_or_0(ctx, node, 7)
    ctx.add("Requantize", [acc, multiplier, zero_point], outputs=node.outputs)
