"""Converters of the normalizations: BatchNormalization, LayerNormalization, RMSNormalization,
InstanceNormalization, GroupNormalization, LpNormalization, MeanVarianceNormalization.

Opset data: GroupNormalization took one scale and bias per group before opset 21 (per channel
since); the converter repeats them per channel, so our op has one form.
"""

from __future__ import annotations

import numpy as np
import onnx

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter, unique_axes
from tvmc.ops.norm.layer import STASH_DTYPES

GROUP_SCALE_PER_CHANNEL_OPSET = 21  # before: GroupNormalization scale and bias per group
MVN_DEFAULT_AXES = (0, 2, 3)


def stash_dtype(node: OnnxNode) -> str:
    """The dtype name of the node's stash_type (default float32); only float32/float64."""
    code = node.attrs.get("stash_type", onnx.TensorProto.FLOAT)
    try:
        stash = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code)).name
    except (KeyError, TypeError, ValueError):
        stash = str(code)
    if stash not in STASH_DTYPES:
        raise UnsupportedModelError(
            f"{node.describe()}: stash_type {stash} is not supported (supported: "
            f"{', '.join(STASH_DTYPES)})"
        )
    return stash


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
    stash = stash_dtype(node)
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


@converter("RMSNormalization")
def RMSNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    """RMSNormalization (opset 23) with its axis, epsilon and stash_type resolved."""
    (axis,) = unique_axes(node, [node.attrs.get("axis", -1)], ctx.type(node.inputs[0]).ndim)
    attrs = {
        "axis": axis,
        "epsilon": float(node.attrs.get("epsilon", 1e-5)),
        "stash_type": stash_dtype(node),
    }
    ctx.add("RMSNormalization", node.inputs[:2], attrs, outputs=node.outputs)


@converter("GroupNormalization")
def GroupNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    """GroupNormalization; before opset 21 its per-group scale and bias repeat per channel."""
    if "num_groups" not in node.attrs:
        raise ModelError(f"{node.describe()} has no num_groups attribute")
    groups = int(node.attrs["num_groups"])
    if len([name for name in node.inputs[:3] if name]) < 3:
        raise ValueError("needs inputs X, scale and bias")
    x, scale, bias = node.inputs[:3]
    shape = ctx.type(x).shape
    if len(shape) < 2 or groups < 1 or shape[1] % groups:
        raise ValueError(
            f"num_groups {groups} must be positive and divide the channels (dim 1) of {list(shape)}"
        )
    if ctx.opset < GROUP_SCALE_PER_CHANNEL_OPSET:
        scale, bias = (_per_channel(ctx, name, groups, shape[1]) for name in (scale, bias))
    attrs = {
        "num_groups": groups,
        "epsilon": float(node.attrs.get("epsilon", 1e-5)),
        "stash_type": stash_dtype(node),
    }
    ctx.add("GroupNormalization", [x, scale, bias], attrs, outputs=node.outputs)


def _per_channel(ctx: ConvertContext, name: str, groups: int, channels: int) -> str:
    """A [num_groups] tensor repeated into [channels] (folds at once when it is constant)."""
    if ctx.type(name).shape != (groups,):
        raise ValueError(
            f"scale and bias must be [num_groups] = [{groups}] before opset "
            f"{GROUP_SCALE_PER_CHANNEL_OPSET}, got {list(ctx.type(name).shape)}"
        )
    (column,) = ctx.add("Reshape", [name], {"shape": (groups, 1)})
    (repeated,) = ctx.add("Expand", [column], {"shape": (groups, channels // groups)})
    (flat,) = ctx.add("Reshape", [repeated], {"shape": (channels,)})
    return flat


@converter("LpNormalization")
def LpNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    """LpNormalization along one axis (default -1), p 1 or 2 (default 2)."""
    (axis,) = unique_axes(node, [node.attrs.get("axis", -1)], ctx.type(node.inputs[0]).ndim)
    attrs = {"axis": axis, "p": int(node.attrs.get("p", 2))}
    ctx.add("LpNormalization", node.inputs[:1], attrs, outputs=node.outputs)


@converter("MeanVarianceNormalization")
def MeanVarianceNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    """MeanVarianceNormalization over `axes` (default [0, 2, 3])."""
    ndim = ctx.type(node.inputs[0]).ndim
    axes = tuple(sorted(unique_axes(node, node.attrs.get("axes", MVN_DEFAULT_AXES), ndim)))
    ctx.add("MeanVarianceNormalization", node.inputs[:1], {"axes": axes}, outputs=node.outputs)
