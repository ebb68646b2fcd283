"""Converters of pooling ONNX ops and LRN (window attributes resolved as for Conv)."""

from __future__ import annotations

from tvmc.errors import ModelError, UnsupportedModelError
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
    ctx.add(op, node.inputs[:1], {**attrs, "ceil_mode": ceil_mode, **extra}, outputs=node.outputs)


@converter("MaxPool")
def MaxPool(ctx: ConvertContext, node: OnnxNode) -> None:
    if len(node.outputs) > 1 and node.outputs[1]:
        raise UnsupportedModelError(
            f"{node.describe()}: the Indices output of MaxPool is not supported (only the values)"
        )
    _pool(ctx, node, "MaxPool", {})


@converter("AveragePool")
def AveragePool(ctx: ConvertContext, node: OnnxNode) -> None:
    _pool(ctx, node, "AveragePool", {"count_include_pad": node.attrs.get("count_include_pad", 0)})


@converter("LpPool")
def LpPool(ctx: ConvertContext, node: OnnxNode) -> None:
    """LpPool: the window as for the other pools, p (default 2)."""
    _pool(ctx, node, "LpPool", {"p": node.attrs.get("p", 2)})
