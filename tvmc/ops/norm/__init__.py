"""Normalizations: `layer` (LayerNormalization, RMSNormalization, and the statistics the norms
share), `channel` (InstanceNormalization, GroupNormalization), `axes` (LpNormalization,
MeanVarianceNormalization), each a row-reduction template on either target, tunable on CUDA in
`reduce_threads`; and inference BatchNormalization (`channel`, a compute). Registered here.
"""

from tvmc.ops.norm import axes, channel, layer
from tvmc.ops.norm.channel import batch_norm_affine
from tvmc.ops.registry import register

for _opdef in (*layer.DEFINITIONS, *channel.DEFINITIONS, *axes.DEFINITIONS):
    register(_opdef)

__all__ = ["batch_norm_affine"]
