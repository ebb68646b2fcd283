"""One short converter per ONNX op, named like the op, in a module named after its op family
(as tvmc.ops): conv, elementwise, linalg, norm, pool, reduction, resize, tensor; and two
families with no op family of their own, as they build on existing ops only: recurrent (RNN, GRU,
LSTM unrolled) and control_flow (If, Loop, Scan inlined).

A converter reads an `OnnxNode` and calls `ctx.add(...)` with our op names and normalized
attributes (opset differences, e.g. axes that moved from attribute to input, handled as data).
The table and the decorator live in `registry`; importing the families fills the table.
`subgraph` converts nodes in order, those of subgraphs inlined under renamed scopes.
"""

from tvmc.frontend.converters import (
    control_flow,
    conv,
    elementwise,
    linalg,
    norm,
    pool,
    recurrent,
    reduction,
    resize,
    tensor,
)
from tvmc.frontend.converters.registry import CONVERTERS, Converter, converter, same_name

FAMILIES = (conv, elementwise, linalg, norm, pool, reduction, resize, tensor, recurrent,
            control_flow)  # fmt: skip
# converter families that build on existing ops and have no op family in tvmc.ops
CONVERTER_ONLY = frozenset({"recurrent", "control_flow"})

__all__ = ["CONVERTERS", "CONVERTER_ONLY", "FAMILIES", "Converter", "converter", "same_name"]
