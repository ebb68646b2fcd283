"""Converters of the vision ops: GridSample (opset 16's mode names mapped to opset 20's),
AffineGrid, RoiAlign and Col2Im (shapes resolved to constants); MaxUnpool decomposes into
ScatterElements and Reshapes."""

from __future__ import annotations

import math

import numpy as np

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


@converter("MaxUnpool")
def MaxUnpool(ctx: ConvertContext, node: OnnxNode) -> None:
    """Zeros with X scattered to the positions in I (flat over the whole output, as MaxPool's
    Indices): one ScatterElements over the flattened tensors."""
    x = ctx.type(node.inputs[0])
    kernel = list(node.attrs["kernel_shape"])
    k = len(kernel)
    strides = list(node.attrs.get("strides", [1] * k))
    pads = list(node.attrs.get("pads", [0] * 2 * k))
    if x.ndim != k + 2 or len(strides) != k or len(pads) != 2 * k:
        raise ValueError(f"kernel_shape {kernel}, strides and pads do not fit input {x}")
    if node.input(2):
        shape = [int(v) for v in ctx.require_const(node, 2, "output_shape")]
    else:
        shape = [*x.shape[:2], *((x.shape[2 + d] - 1) * strides[d] + kernel[d] - pads[d]
                                  - pads[d + k] for d in range(k))]  # fmt: skip
    if len(shape) != x.ndim or shape[:2] != list(x.shape[:2]) or min(shape) < 0:
        raise ValueError(f"output shape {shape} does not fit input {x}")
    zeros = ctx.add_const(np.zeros(math.prod(shape), x.dtype))
    (values,) = ctx.add("Reshape", node.inputs[:1], {"shape": (x.size,)})
    (where,) = ctx.add("Reshape", node.inputs[1:2], {"shape": (x.size,)})
    (flat,) = ctx.add("ScatterElements", [zeros, where, values], {"axis": 0})
    ctx.add("Reshape", [flat], {"shape": tuple(shape)}, outputs=node.outputs)
