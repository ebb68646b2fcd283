"""Converters of BatchNormalization, LayerNormalization and InstanceNormalization."""

from __future__ import annotations

import numpy as np
import onnx

from tvmc.errors import UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter, unique_axes


@converter("BatchNormalization")
def BatchNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    # momentum, spatial (opset < 9), is_test and consumed_inputs (opset < 7) do not change inference
    if node.attrs.get("training_mode", 0):
        raise UnsupportedModelError(
            f"{node.describe()}: training_mode=1 is not supported; tvmc compiles inference only"
        )
    ctx.add(
        "BatchNormalization",
        node.inputs,
        {"epsilon": node.attrs.get("epsilon", 1e-5)},
        outputs=node.outputs[:1],
    )
    # old opsets may list the running statistics as outputs; in inference they are the inputs
    for index, source in ((1, 3), (2, 4)):
        if len(node.outputs) > index and node.outputs[index]:
            ctx.add("Identity", [node.inputs[source]], outputs=[node.outputs[index]])
    if any(node.outputs[3:]):
        raise UnsupportedModelError(
            f"{node.describe()}: the saved mean/variance outputs exist only in training mode"
        )


@converter("LayerNormalization")
def LayerNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    """Y is one op; the training outputs Mean and InvStdDev, when asked for, are built apart."""
    ndim = ctx.type(node.inputs[0]).ndim
    (axis,) = unique_axes(node, [node.attrs.get("axis", -1)], ndim)
    epsilon = float(node.attrs.get("epsilon", 1e-5))
    ctx.add("LayerNormalization", node.inputs, {"axis": axis, "epsilon": epsilon},
            outputs=node.outputs[:1])  # fmt: skip
    if any(node.outputs[1:]):
        _layer_norm_statistics(ctx, node, tuple(range(axis, ndim)), epsilon)


def _layer_norm_statistics(
    ctx: ConvertContext, node: OnnxNode, axes: tuple[int, ...], epsilon: float
) -> None:
    """Mean and 1/sqrt(var + epsilon) over `axes` (kept as size 1), in the stash type."""
    stash = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(node.attrs.get("stash_type", 1))).name
    if stash not in ("float32", "float64"):
        raise UnsupportedModelError(f"{node.describe()}: stash_type {stash} is not supported")
    x = node.inputs[0]
    if ctx.type(x).dtype != stash:
        (x,) = ctx.add("Cast", [x], {"to": stash})
    reduce = {"axes": axes, "keepdims": True}
    mean_name = node.outputs[1] if node.outputs[1] else None
    (mean,) = ctx.add("ReduceMean", [x], reduce, outputs=[mean_name] if mean_name else None)
    if len(node.outputs) > 2 and node.outputs[2]:
        (centered,) = ctx.add("Sub", [x, mean])
        (square,) = ctx.add("Mul", [centered, centered])
        (var,) = ctx.add("ReduceMean", [square], reduce)
        (shifted,) = ctx.add("Add", [var, ctx.add_const(np.array(epsilon, dtype=stash))])
        (std,) = ctx.add("Sqrt", [shifted])
        ctx.add("Reciprocal", [std], outputs=[node.outputs[2]])


@converter("InstanceNormalization")
def InstanceNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    """InstanceNormalization with its epsilon default filled in."""
    epsilon = float(node.attrs.get("epsilon", 1e-5))
    ctx.add("InstanceNormalization", node.inputs, {"epsilon": epsilon}, outputs=node.outputs)
