"""One short converter per ONNX op, named like the op, in a module named after its op family
(as tvmc.ops): conv, elementwise, linalg, loss, norm, pool, quantization, reduction, resize,
tensor. The transformer blocks (`attention`: Attention, LinearAttention; `transformer`:
RotaryEmbedding, SwiGLU, CausalConvWithState) have no op family (CONVERTER_ONLY): they decompose
into the others' ops.

A converter reads an `OnnxNode` and calls `ctx.add(...)` with our op names and normalized
attributes (opset differences, e.g. axes that moved from attribute to input, handled as data).
The table and the decorator live in `registry`; importing the families fills the table.
"""

from tvmc.frontend.converters import (
    attention,
    conv,
    elementwise,
    linalg,
    loss,
    norm,
    pool,
    quantization,
    reduction,
    resize,
    tensor,
    transformer,
)
from tvmc.frontend.converters.registry import CONVERTERS, Converter, converter, same_name

FAMILIES = (attention, conv, elementwise, linalg, loss, norm, pool, quantization, reduction,
            resize, tensor, transformer)  # fmt: skip
CONVERTER_ONLY = (attention, transformer)  # decompositions into the other families' ops

__all__ = ["CONVERTERS", "CONVERTER_ONLY", "FAMILIES", "Converter", "converter", "same_name"]
