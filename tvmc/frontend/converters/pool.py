"""Converters of pooling ONNX ops and LRN (window attributes resolved as for Conv)."""

from __future__ import annotations

from tvmc.errors import ModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.conv import auto_pad, window_attrs
from tvmc.frontend.converters.registry import converter, same_name

same_name(["GlobalAveragePool", "GlobalMaxPool", "LRN"])


def _pool(ctx: ConvertContext, node: OnnxNode, op: str, extra: dict) -> None:
    kernel = node.attrs.get("kernel_shape")
    if kernel is None:
        raise ModelError(f"{node.describe()} has no kernel_shape attribute")
    spatial_shape = ctx.type(node.inputs[0]).shape[2:]
    attrs = window_attrs(node, spatial_shape, list(kernel))
    # SAME pads already give exactly ceil(size / stride) windows; ceil_mode must not add one more
    ceil_mode = 0 if auto_pad(node).startswith("SAME") else node.attrs.get("ceil_mode", 0)
    outputs = node.outputs[1:2] if op == "MaxPoolIndices" else node.outputs[:1]
    ctx.add(op, node.inputs[:1], {**attrs, "ceil_mode": ceil_mode, **extra}, outputs=outputs)


@converter("MaxPool")
def MaxPool(ctx: ConvertContext, node: OnnxNode) -> None:
    """The values, and the Indices output (a second op reading the same windows) when used."""
    _pool(ctx, node, "MaxPool", {})
    if len(node.outputs) > 1 and node.outputs[1]:
        _pool(ctx, node, "MaxPoolIndices",
              {"storage_order": node.attrs.get("storage_order", 0)})  # fmt: skip


@converter("AveragePool")
def AveragePool(ctx: ConvertContext, node: OnnxNode) -> None:
    _pool(ctx, node, "AveragePool", {"count_include_pad": node.attrs.get("count_include_pad", 0)})


@converter("LpPool")
def LpPool(ctx: ConvertContext, node: OnnxNode) -> None:
    """LpPool: the window as for the other pools, p (default 2)."""
    _pool(ctx, node, "LpPool", {"p": node.attrs.get("p", 2)})
