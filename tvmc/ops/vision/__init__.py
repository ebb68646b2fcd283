"""Vision ops that sample, pool or scatter by coordinates: GridSample. Registered here.

Each is a compute (serving every target through the injective schedule) whose input positions
come from data: a grid of normalized coordinates. Every position is clamped into its input
before it is read, so no kernel reads out of bounds, whatever the data.
"""

from tvmc.ops.lowering import computed
from tvmc.ops.registry import OPAQUE, OpDef, register
from tvmc.ops.vision.grid_sample import (
    GRID_SAMPLE_ATTRS,
    grid_sample,
    grid_sample_compute,
    grid_sample_rule,
)

register(
    OpDef("GridSample", grid_sample_rule, grid_sample, computed(grid_sample_compute),
          GRID_SAMPLE_ATTRS, OPAQUE, num_inputs=(2, 2))
)  # fmt: skip
