"""Vision ops that sample, pool or scatter by coordinates: GridSample, AffineGrid, RoiAlign,
Col2Im, DeformableColumns (the sampling half of DeformConv). Registered here.

Their input positions come from data (a grid of normalized coordinates, regions of interest).
Every position is clamped into its input before it is read, so no kernel reads out of bounds,
whatever the data. GridSample, AffineGrid and DeformableColumns are computes, serving every
target through the injective schedule; RoiAlign, whose sample loops have run-time extents, and
Col2Im, which loops over its block's taps, are templates.
"""

from tvmc.ops.lowering import Template, computed
from tvmc.ops.registry import OPAQUE, OpDef, register
from tvmc.ops.vision.affine_grid import (
    AFFINE_GRID_ATTRS,
    affine_grid,
    affine_grid_compute,
    affine_grid_rule,
)
from tvmc.ops.vision.col2im import COL2IM_ATTRS, col2im, col2im_rule, col2im_template
from tvmc.ops.vision.deform import (
    DEFORM_ATTRS,
    deform_rule,
    deformable_columns,
    deformable_columns_compute,
)
from tvmc.ops.vision.grid_sample import (
    GRID_SAMPLE_ATTRS,
    grid_sample,
    grid_sample_compute,
    grid_sample_rule,
)
from tvmc.ops.vision.roi_align import (
    ROI_ALIGN_ATTRS,
    roi_align,
    roi_align_rule,
    roi_align_template,
)

register(
    OpDef("GridSample", grid_sample_rule, grid_sample, computed(grid_sample_compute),
          GRID_SAMPLE_ATTRS, OPAQUE, num_inputs=(2, 2))
)  # fmt: skip
register(
    OpDef("AffineGrid", affine_grid_rule, affine_grid, computed(affine_grid_compute),
          AFFINE_GRID_ATTRS, OPAQUE)
)  # fmt: skip
_ROI_ALIGN = Template(roi_align_template)
register(
    OpDef("RoiAlign", roi_align_rule, roi_align, {"cpu": _ROI_ALIGN, "cuda": _ROI_ALIGN},
          ROI_ALIGN_ATTRS, OPAQUE, num_inputs=(3, 3))
)  # fmt: skip
_COL2IM = Template(col2im_template)
register(
    OpDef("Col2Im", col2im_rule, col2im, {"cpu": _COL2IM, "cuda": _COL2IM}, COL2IM_ATTRS, OPAQUE)
)
register(
    OpDef("DeformableColumns", deform_rule, deformable_columns,
          computed(deformable_columns_compute), DEFORM_ATTRS, OPAQUE, num_inputs=(2, 3))
)  # fmt: skip
