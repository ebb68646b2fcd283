"""Lowering: an optimized graph in, a `Program` (kernels + memory plan + call order) out.

In: tvmc.graph, tvmc.kernel, tvmc.ops (computes and templates), tvmc.passes.
Out: `lower_graph` -> `LoweredModel` (the Program and its param values); `plan_fusion`.
"""

from tvmc.lower.fuse import FusionPlan, plan_fusion
from tvmc.lower.lower import LoweredModel, lower_graph

__all__ = ["FusionPlan", "LoweredModel", "lower_graph", "plan_fusion"]
