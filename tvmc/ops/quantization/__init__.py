"""Quantization: `linear` (QuantizeLinear, DequantizeLinear), `integer` (Requantize and
DynamicQuantizeParams, tvmc's own ops, and the exact-accumulation rule of integer convs),
`common` (integer ranges, scale/zero-point layouts, round-then-saturate). Registered here.

Every op here is a compute serving both targets. The ONNX integer ops are composed by the
frontend (tvmc.frontend.converters.quantization) from these and the existing ops:
MatMulInteger is an int32 MatMul of the zero-point-shifted operands; ConvInteger a float Conv in
which the integer sums are exact, cast to int32; QLinearMatMul and QLinearConv those sums then
Requantize; DynamicQuantizeLinear ReduceMin/ReduceMax, DynamicQuantizeParams, QuantizeLinear.
"""

from tvmc.ops.quantization import integer, linear
from tvmc.ops.registry import register

for _opdef in (*linear.DEFINITIONS, *integer.DEFINITIONS):
    register(_opdef)
