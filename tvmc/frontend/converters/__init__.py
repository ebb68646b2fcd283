"""One short converter per ONNX op, named like the op, in a module named after its op family
(as tvmc.ops): conv, elementwise, linalg, loss, norm, pool, quantization, reduction, resize,
tensor. Families with no op family of their own (CONVERTER_ONLY) decompose into the others' ops:
the transformer blocks (`attention`: Attention, LinearAttention; `transformer`: RotaryEmbedding,
SwiGLU, CausalConvWithState), `recurrent` (RNN, GRU, LSTM unrolled) and `control_flow` (If, Loop,
Scan inlined).

A converter reads an `OnnxNode` and calls `ctx.add(...)` with our op names and normalized
attributes (opset differences, e.g. axes that moved from attribute to input, handled as data).
The table and the decorator live in `registry`; importing the families fills the table.
`subgraph` converts nodes in order, those of subgraphs inlined under renamed scopes.
"""

from tvmc.frontend.converters import (
    attention,
    control_flow,
    conv,
    elementwise,
    linalg,
    loss,
    norm,
    pool,
    quantization,
    recurrent,
    reduction,
    resize,
    tensor,
    transformer,
)
from tvmc.frontend.converters.registry import CONVERTERS, Converter, converter, same_name

FAMILIES = (attention, control_flow, conv, elementwise, linalg, loss, norm, pool, quantization,
            recurrent, reduction, resize, tensor, transformer)  # fmt: skip
# decompositions into the other families' ops: no op family in tvmc.ops
CONVERTER_ONLY = (attention, control_flow, recurrent, transformer)

__all__ = ["CONVERTERS", "CONVERTER_ONLY", "FAMILIES", "Converter", "converter", "same_name"]
