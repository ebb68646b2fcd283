"""Ops: one module per family; each op's `OpDef` holds its attributes, shape rule and reference.

In: tvmc.graph. Out: `OPS`, `get_op`, `infer_node`, `evaluate_node`, `run_reference`.
The numpy references serve constant folding and tests, never the compiled run path.
"""

from tvmc.ops.registry import OPS, OpDef, evaluate_node, get_op, infer_node

# Importing the families registers their ops.
from tvmc.ops import conv, elementwise, linalg, norm, pool, reduce, resize, tensor  # noqa: E402,F401  isort: skip
from tvmc.ops.interpret import run_reference  # noqa: E402  isort: skip

# Importing the lowerings attaches computes and templates to the ops.
from tvmc.ops import (  # noqa: E402,F401  isort: skip
    conv_kernels,
    elementwise_kernels,
    linalg_kernels,
    norm_kernels,
    pool_kernels,
    reduce_kernels,
    resize_kernels,
    tensor_kernels,
)

# GPU variants register after the CPU templates they sit beside.
from tvmc.ops.gpu import conv as gpu_conv  # noqa: E402,F401  isort: skip
from tvmc.ops.gpu import linalg as gpu_linalg  # noqa: E402,F401  isort: skip
from tvmc.ops.gpu import pool as gpu_pool  # noqa: E402,F401  isort: skip
from tvmc.ops.gpu import reduction_spaces as gpu_reduction_spaces  # noqa: E402,F401  isort: skip

__all__ = ["OPS", "OpDef", "evaluate_node", "get_op", "infer_node", "run_reference"]
