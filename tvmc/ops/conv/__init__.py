"""Conv and ConvTranspose: one folder holds all tvmc knows of them.

- `definition`: shape rules, numpy references, FLOPs.
- `geometry`: `ConvGeometry`, one for both targets (a ConvTranspose as stated, or stuffed).
- `cpu` (+ `cpu_layout`, `cpu_tiles`, `cpu_transpose`): the CPU templates beside their knob space
  and defaults; `cpu_transpose` runs a strided ConvTranspose as columns and a gather.
- `gpu` (+ `gpu_tiled`, `gpu_operands`): the CUDA templates beside theirs.

Registered here, each with its lowering table.
"""

from tvmc.ops.conv import cpu, gpu
from tvmc.ops.conv.definition import (
    conv,
    conv_flops,
    conv_rule,
    conv_summary,
    conv_transpose,
    conv_transpose_flops,
    conv_transpose_rule,
    conv_transpose_summary,
)
from tvmc.ops.registry import COMPLEX, REQUIRED, OpDef, register
from tvmc.ops.window import WINDOW_ATTRS

register(OpDef(
    "Conv", conv_rule, conv,
    lowerings={"cpu": cpu.CONV, "cuda": gpu.CONV},
    attrs={**WINDOW_ATTRS, "group": 1}, kind=COMPLEX, num_inputs=(2, 3),
    flops=conv_flops, weights=(1, 2), summary=conv_summary,
))  # fmt: skip
register(OpDef(
    "ConvTranspose", conv_transpose_rule, conv_transpose,
    lowerings={"cpu": cpu.CONV_TRANSPOSE, "cuda": gpu.CONV_TRANSPOSE},
    attrs={**WINDOW_ATTRS, "output_padding": REQUIRED, "group": 1},
    kind=COMPLEX, num_inputs=(2, 3), flops=conv_transpose_flops, weights=(1, 2),
    summary=conv_transpose_summary,
))  # fmt: skip
