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


@converter("DeformConv")
def DeformConv(ctx: ConvertContext, node: OnnxNode) -> None:
    """DeformableColumns (every channel sampled at every moved tap), then one MatMul per group
    of the weights (oC / G, C / G * K) with the columns (C / G * K, positions), plus the bias."""
    x, w = ctx.type(node.inputs[0]), ctx.type(node.inputs[1])
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"DeformConv takes 2-D images and kernels, got {x} and {w}")
    group = int(node.attrs.get("group", 1))
    kernel = list(node.attrs.get("kernel_shape", w.shape[2:]))
    if group < 1 or x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise ValueError(f"weights {w} do not fit input {x} in {group} group(s)")
    if kernel != list(w.shape[2:]):
        raise ValueError(f"kernel_shape {kernel} differs from the weights' {list(w.shape[2:])}")
    attrs = {"kernel_shape": kernel, "strides": list(node.attrs.get("strides", [1, 1])),
             "pads": list(node.attrs.get("pads", [0] * 4)),
             "dilations": list(node.attrs.get("dilations", [1, 1])),
             "offset_group": int(node.attrs.get("offset_group", 1))}  # fmt: skip
    sampled = [node.inputs[0], node.inputs[2]] + ([node.input(4)] if node.input(4) else [])
    (columns,) = ctx.add("DeformableColumns", sampled, attrs)
    n, rows, oh, ow = ctx.type(columns).shape
    (grouped,) = ctx.add("Reshape", [columns], {"shape": (n, group, rows // group, oh * ow)})
    per_group = (group, w.shape[0] // group, rows // group)
    (weights,) = ctx.add("Reshape", [node.inputs[1]], {"shape": per_group})
    (product,) = ctx.add("MatMul", [weights, grouped])  # (N, G, oC / G, positions)
    shape = {"shape": (n, w.shape[0], oh, ow)}
    if not node.input(3):
        ctx.add("Reshape", [product], shape, outputs=node.outputs)
        return
    (out,) = ctx.add("Reshape", [product], shape)
    (bias,) = ctx.add("Reshape", [node.input(3)], {"shape": (w.shape[0], 1, 1)})
    ctx.add("Add", [out, bias], outputs=node.outputs)
