"""Converters of the vision ops: GridSample (opset 16's mode names mapped to opset 20's),
AffineGrid (its size a constant)."""

from __future__ import annotations

from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter

_GRID_SAMPLE_MODES = {"bilinear": "linear", "bicubic": "cubic"}  # GridSample-16's names


@converter("GridSample")
def GridSample(ctx: ConvertContext, node: OnnxNode) -> None:
    mode = node.attrs.get("mode", "linear" if ctx.opset >= 20 else "bilinear")
    attrs = {
        "mode": _GRID_SAMPLE_MODES.get(mode, mode),
        "padding_mode": node.attrs.get("padding_mode", "zeros"),
        "align_corners": int(node.attrs.get("align_corners", 0)),
    }
    ctx.add("GridSample", node.inputs, attrs, outputs=node.outputs)


@converter("AffineGrid")
def AffineGrid(ctx: ConvertContext, node: OnnxNode) -> None:
    size = ctx.require_const(node, 1, "size").tolist()
    attrs = {
        "size": [int(s) for s in size],
        "align_corners": int(node.attrs.get("align_corners", 0)),
    }
    ctx.add("AffineGrid", node.inputs[:1], attrs, outputs=node.outputs)


_ROI_ALIGN_ATTRS = ("output_height", "output_width", "sampling_ratio", "spatial_scale", "mode",
                    "coordinate_transformation_mode")  # fmt: skip


@converter("RoiAlign")
def RoiAlign(ctx: ConvertContext, node: OnnxNode) -> None:
    attrs = {k: node.attrs[k] for k in _ROI_ALIGN_ATTRS if k in node.attrs}
    if ctx.opset < 16:  # RoiAlign-10 shifts no half pixel (its only behaviour)
        attrs["coordinate_transformation_mode"] = "output_half_pixel"
    ctx.add("RoiAlign", node.inputs, attrs, outputs=node.outputs)


@converter("Col2Im")
def Col2Im(ctx: ConvertContext, node: OnnxNode) -> None:
    attrs = {k: [int(v) for v in node.attrs[k]] for k in ("dilations", "pads", "strides")
             if k in node.attrs}  # fmt: skip
    attrs["image_shape"] = [int(v) for v in ctx.require_const(node, 1, "image_shape")]
    attrs["block_shape"] = [int(v) for v in ctx.require_const(node, 2, "block_shape")]
    ctx.add("Col2Im", node.inputs[:1], attrs, outputs=node.outputs)
