"""One short converter per ONNX op, named like the op, in a module named after its op family
(as tvmc.ops): conv, elementwise, linalg, norm, pool, quantization, reduction, resize,
tensor.

A converter reads an `OnnxNode` and calls `ctx.add(...)` with our op names and normalized
attributes (opset differences, e.g. axes that moved from attribute to input, handled as data).
The table and the decorator live in `registry`; importing the families fills the table.
"""

from tvmc.frontend.converters import (
    conv,
    elementwise,
    linalg,
    norm,
    pool,
    quantization,
    reduction,
    resize,
    tensor,
)
from tvmc.frontend.converters.registry import CONVERTERS, Converter, converter, same_name

FAMILIES = (conv, elementwise, linalg, norm, pool, quantization, reduction, resize, tensor)

__all__ = ["CONVERTERS", "FAMILIES", "Converter", "converter", "same_name"]
