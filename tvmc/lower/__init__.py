"""Lowering: an optimized graph in, a `Program` (kernels + memory plan + call order) out.

In: tvmc.graph, tvmc.kernel, tvmc.ops (computes and templates), tvmc.passes.
Out: `lower_graph` -> `LoweredModel` (the Program and its param values), or its three steps
`plan_fusion` -> `lower_kernels` -> `plan_memory` (the compile pipeline times each).
"""

from tvmc.lower.fuse import FusionPlan, plan_fusion
from tvmc.lower.lower import KernelLowering, LoweredModel, lower_graph, lower_kernels, plan_memory

__all__ = [
    "FusionPlan",
    "KernelLowering",
    "LoweredModel",
    "lower_graph",
    "lower_kernels",
    "plan_fusion",
    "plan_memory",
]
