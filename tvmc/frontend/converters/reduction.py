"""Converters of reductions, ArgMax/ArgMin and the softmax-like ops.

Opset data: Softmax-like ops switched from "coerce to 2-D at axis" (default 1) to one axis
(default -1) at opset 13; reduction axes moved from attribute to input (ReduceSum at 13, the
rest at 18), which `attr_or_input` reads whatever the opset.
"""

from __future__ import annotations

from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter, unique_axes

SOFTMAX_SINGLE_AXIS_OPSET = 13  # before: the input is seen as 2-D, [prod(dims<axis), rest]
REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]  # fmt: skip
# Reducing no axes returns the input unchanged for these (the others still square, log, ...).
_IDENTITY_WHEN_EMPTY = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"}


@converter("Softmax", "LogSoftmax", "Hardmax")
def Softmax(ctx: ConvertContext, node: OnnxNode) -> None:
    """Softmax, LogSoftmax and Hardmax: the axis (or coerced 2-D row) becomes `axes`."""
    shape = ctx.type(node.inputs[0]).shape
    if ctx.opset < SOFTMAX_SINGLE_AXIS_OPSET:
        (axis,) = unique_axes(node, [node.attrs.get("axis", 1)], len(shape))
        axes = tuple(range(axis, len(shape)))
    else:
        axes = unique_axes(node, [node.attrs.get("axis", -1)], len(shape))
    # size-1 dims change nothing; dropping them turns e.g. [N,C,1,1] at axis 1 into one axis
    axes = tuple(a for a in axes if shape[a] != 1) or axes[:1]
    ctx.add(node.op_type, [node.inputs[0]], {"axes": axes}, outputs=node.outputs)


@converter(*REDUCTIONS)
def Reduce(ctx: ConvertContext, node: OnnxNode) -> None:
    """Every ReduceXxx: axes from the attribute or input; empty means all unless noop is set."""
    ndim = ctx.type(node.inputs[0]).ndim
    axes = ctx.attr_or_input(node, "axes", 1)
    if isinstance(axes, int):  # a 0-d axes tensor
        axes = [axes]
    if not axes:
        axes = [] if node.attrs.get("noop_with_empty_axes", 0) else range(ndim)
    axes = tuple(sorted(unique_axes(node, axes, ndim)))
    if not axes and node.op_type in _IDENTITY_WHEN_EMPTY:
        ctx.add("Identity", [node.inputs[0]], outputs=node.outputs)
        return
    keepdims = bool(node.attrs.get("keepdims", 1))
    ctx.add(node.op_type, [node.inputs[0]], {"axes": axes, "keepdims": keepdims},
            outputs=node.outputs)  # fmt: skip


@converter("ArgMax", "ArgMin")
def ArgMax(ctx: ConvertContext, node: OnnxNode) -> None:
    """ArgMax and ArgMin (select_last_index from opset 12, else the first index)."""
    (axis,) = unique_axes(node, [node.attrs.get("axis", 0)], ctx.type(node.inputs[0]).ndim)
    attrs = {
        "axis": axis,
        "keepdims": bool(node.attrs.get("keepdims", 1)),
        "select_last_index": bool(node.attrs.get("select_last_index", 0)),
    }
    ctx.add(node.op_type, [node.inputs[0]], attrs, outputs=node.outputs)
