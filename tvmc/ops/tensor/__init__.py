"""Tensor and shape manipulation ops: `shape` (Reshape, Transpose, Expand, Tile), `slicing`
(Concat, Split, Slice, Pad), `gather` (Gather, GatherElements, GatherND, ReverseSequence),
`mask` (Trilu, EyeLike, OneHot), `scatter` (ScatterElements, ScatterND), `scan` (CumSum,
CumProd), `topk` (TopK) and `cache` (TensorScatter). Registered here.

The re-indexing ops are computes that turn output indices into input indices and serve every
target; scatters, scans and TopK, which must visit elements in order, are templates.
Every static parameter is a resolved attribute: Reshape holds the full target shape, Slice one
start/end/step per axis already clamped, Pad one begin/end pair per axis, TopK its k. The
frontend lowers Flatten, Squeeze, Unsqueeze (to Reshape), DepthToSpace/SpaceToDepth (Reshape,
Transpose), CenterCropPad (Pad), Compress (Gather) and Einsum (Transpose, Reshape, Gather,
ReduceSum, MatMul, Mul: tvmc/frontend/einsum.py).
Converters emit non-negative axes; the rules also accept negative ones.
"""

from tvmc.ops.registry import register
from tvmc.ops.tensor import cache, gather, mask, scan, scatter, shape, slicing, topk

for _module in (shape, slicing, gather, mask, scatter, scan, topk, cache):
    for _opdef in _module.DEFINITIONS:
        register(_opdef)
