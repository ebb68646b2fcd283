"""Converters of matrix products, softmax-like ops, normalizations and reductions.

Opset data: Softmax-like ops switched from "coerce to 2-D at axis" (default 1) to one axis
(default -1) at opset 13; reduction axes moved from attribute to input (ReduceSum at 13, the
rest at 18), which `attr_or_input` reads whatever the opset.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters import converter, same_name
from tvmc.ops.common import normalize_axes

SOFTMAX_SINGLE_AXIS_OPSET = 13  # before: the input is seen as 2-D, [prod(dims<axis), rest]
REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]  # fmt: skip
# Reducing no axes returns the input unchanged for these (the others still square, log, ...).
_IDENTITY_WHEN_EMPTY = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"}


def _axes(node: OnnxNode, axes: Iterable[int], ndim: int) -> tuple[int, ...]:
    """Axes as a sorted tuple of non-negative ints; ModelError naming the node when invalid."""
    try:
        result = normalize_axes(axes, ndim, node.op_type)
    except ValueError as exc:
        raise ModelError(f"{node.describe()}: {exc}") from None
    if len(set(result)) != len(result):
        raise ModelError(f"{node.describe()}: axes {list(axes)} name a dimension twice")
    return tuple(sorted(result))


same_name(["MatMul"])


@converter("Gemm")
def Gemm(ctx: ConvertContext, node: OnnxNode) -> None:
    """Gemm stays one op (a dense layer): transposes as flags, C optional."""
    attrs = {
        "transA": bool(node.attrs.get("transA", 0)),
        "transB": bool(node.attrs.get("transB", 0)),
        "alpha": float(node.attrs.get("alpha", 1.0)),
        "beta": float(node.attrs.get("beta", 1.0)),
    }  # opset < 7 `broadcast` is implied by numpy-style broadcasting of C
    ctx.add("Gemm", [n for n in node.inputs if n], attrs, outputs=node.outputs)


@converter("Softmax", "LogSoftmax", "Hardmax")
def Softmax(ctx: ConvertContext, node: OnnxNode) -> None:
    """Softmax, LogSoftmax and Hardmax: the axis (or coerced 2-D row) becomes `axes`."""
    shape = ctx.type(node.inputs[0]).shape
    if ctx.opset < SOFTMAX_SINGLE_AXIS_OPSET:
        (axis,) = _axes(node, [node.attrs.get("axis", 1)], len(shape))
        axes = tuple(range(axis, len(shape)))
    else:
        axes = _axes(node, [node.attrs.get("axis", -1)], len(shape))
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
    axes = _axes(node, axes, ndim)
    if not axes and node.op_type in _IDENTITY_WHEN_EMPTY:
        ctx.add("Identity", [node.inputs[0]], outputs=node.outputs)
        return
    keepdims = bool(node.attrs.get("keepdims", 1))
    ctx.add(node.op_type, [node.inputs[0]], {"axes": axes, "keepdims": keepdims},
            outputs=node.outputs)  # fmt: skip


@converter("ArgMax", "ArgMin")
def ArgMax(ctx: ConvertContext, node: OnnxNode) -> None:
    """ArgMax and ArgMin (select_last_index from opset 12, else the first index)."""
    (axis,) = _axes(node, [node.attrs.get("axis", 0)], ctx.type(node.inputs[0]).ndim)
    attrs = {
        "axis": axis,
        "keepdims": bool(node.attrs.get("keepdims", 1)),
        "select_last_index": bool(node.attrs.get("select_last_index", 0)),
    }
    ctx.add(node.op_type, [node.inputs[0]], attrs, outputs=node.outputs)


@converter("LayerNormalization")
def LayerNormalization(ctx: ConvertContext, node: OnnxNode) -> None:
    """Y is one op; the training outputs Mean and InvStdDev, when asked for, are built apart."""
    ndim = ctx.type(node.inputs[0]).ndim
    (axis,) = _axes(node, [node.attrs.get("axis", -1)], ndim)
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
