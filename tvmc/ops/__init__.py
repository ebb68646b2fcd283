"""Ops: one folder (big family) or module (small one) per family; each op's `OpDef` holds its
attributes, shape rule, reference, FLOPs, weight inputs and its lowering per target kind.

In: tvmc.graph, tvmc.kernel. Out: `OPS`, `get_op`, `infer_node`, `node_flops`, `evaluate_node`,
`run_reference`.
The numpy references serve constant folding and tests, never the compiled run path.

Families register their own ops when imported; `FAMILIES` lists them, in no required order.
Shared scheduling pieces (the injective and row-reduction schedules, CPU micro-kernels, the GPU
tiled GEMM and launch helpers) live in tvmc.ops.schedule.
"""

from tvmc.ops import (
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
    vision,
)
from tvmc.ops.interpret import run_reference
from tvmc.ops.registry import OPS, OpDef, evaluate_node, get_op, infer_node, node_flops

FAMILIES = (conv, elementwise, linalg, loss, norm, pool, quantization, reduction, resize, tensor,
            vision)  # fmt: skip

__all__ = [
    "FAMILIES",
    "OPS",
    "OpDef",
    "evaluate_node",
    "get_op",
    "infer_node",
    "node_flops",
    "run_reference",
]
