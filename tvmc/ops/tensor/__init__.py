"""Tensor and shape manipulation ops: `shape` (Reshape, Transpose, Expand, Tile), `slicing`
(Concat, Split, Slice, Pad), `gather` (Gather), `mask` (Trilu). Each re-indexes or masks: its
compute turns output indices into input indices, and serves every target. Registered here.

Every static parameter is a resolved attribute: Reshape holds the full target shape, Slice one
start/end/step per axis already clamped, Pad one begin/end pair per axis. The frontend lowers
Flatten, Squeeze, Unsqueeze (to Reshape) and DepthToSpace/SpaceToDepth (Reshape, Transpose).
Converters emit non-negative axes; the rules also accept negative ones.
"""

from tvmc.ops.registry import register
from tvmc.ops.tensor import gather, mask, shape, slicing

for _opdef in (*shape.DEFINITIONS, *slicing.DEFINITIONS, *gather.DEFINITIONS, *mask.DEFINITIONS):
    register(_opdef)
