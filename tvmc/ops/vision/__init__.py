"""Vision ops that sample, pool or scatter by coordinates: GridSample, AffineGrid. Registered
here.

Each is a compute (serving every target through the injective schedule) whose input positions
come from data: a grid of normalized coordinates. Every position is clamped into its input
before it is read, so no kernel reads out of bounds, whatever the data.
"""

from tvmc.ops.lowering import computed
from tvmc.ops.registry import OPAQUE, OpDef, register
from tvmc.ops.vision.affine_grid import (
    AFFINE_GRID_ATTRS,
    affine_grid,
    affine_grid_compute,
    affine_grid_rule,
)
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
register(
    OpDef("AffineGrid", affine_grid_rule, affine_grid, computed(affine_grid_compute),
          AFFINE_GRID_ATTRS, OPAQUE)
)  # fmt: skip
