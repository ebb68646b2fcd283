"""Converters of elementwise ONNX ops."""

from __future__ import annotations

import numpy as np

from tvmc.errors import UnsupportedModelError
from tvmc.frontend.context import ConvertContext, OnnxNode, onnx_dtype
from tvmc.frontend.converters.registry import converter, same_name

same_name(
    [
        "Relu", "Sigmoid", "HardSwish", "Softplus", "Tanh", "Erf", "Sqrt", "Exp", "Log",
        "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Not", "Identity",
        "LeakyRelu", "Elu", "HardSigmoid", "Gelu",
        "Sub", "Mul", "Div", "Pow", "PRelu",
        "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
        "Sum", "Max", "Min", "Mean", "Where", "Mod",
        "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
        "Celu", "Selu", "ThresholdedRelu", "Softsign", "Shrink", "Mish", "Swish",
        "Sign", "Round", "IsInf", "IsNaN", "Xor",
        "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift",
    ],
    ignore=["consumed_inputs"],  # opset < 6 bookkeeping with no effect on results
)  # fmt: skip


@converter("Add")
def Add(ctx: ConvertContext, node: OnnxNode) -> None:
    # opset < 7 Add had broadcast/axis attributes; only numpy-style broadcasting remains
    ctx.add("Add", node.inputs, {}, outputs=node.outputs)


@converter("Clip")
def Clip(ctx: ConvertContext, node: OnnxNode) -> None:
    lo = ctx.attr_or_input(node, "min", 1)
    hi = ctx.attr_or_input(node, "max", 2)
    ctx.add("Clip", [node.inputs[0]], {"min": lo, "max": hi}, outputs=node.outputs)


@converter("Cast")
def Cast(ctx: ConvertContext, node: OnnxNode) -> None:
    to = onnx_dtype(node.attrs["to"], f"{node.describe()}: its 'to'")
    ctx.add("Cast", [node.inputs[0]], {"to": to, **_cast_options(node)}, outputs=node.outputs)


@converter("CastLike")
def CastLike(ctx: ConvertContext, node: OnnxNode) -> None:
    """A Cast to the element type of the second input (whose values are not read)."""
    to = ctx.type(node.inputs[1]).dtype
    ctx.add("Cast", [node.inputs[0]], {"to": to, **_cast_options(node)}, outputs=node.outputs)


def _cast_options(node: OnnxNode) -> dict[str, object]:
    """saturate (opset 19+: float8 targets) and round_mode (24+: float8_e8m0fnu)."""
    mode = node.attrs.get("round_mode", "up")
    return {"saturate": int(node.attrs.get("saturate", 1)),
            "round_mode": mode.decode() if isinstance(mode, bytes) else mode}  # fmt: skip


@converter("Dropout")
def Dropout(ctx: ConvertContext, node: OnnxNode) -> None:
    """Inference: the data passes through; the optional mask is all ones."""
    training = node.attrs.get("is_test", 1) == 0 or (
        node.input(2) and bool(ctx.require_const(node, 2, "training_mode"))
    )
    if training:
        raise UnsupportedModelError(
            f"{node.describe()}: training mode is not supported (inference only)"
        )
    ctx.add("Identity", [node.inputs[0]], outputs=node.outputs[:1])
    if len(node.outputs) > 1 and node.outputs[1]:
        mask = np.ones(ctx.type(node.inputs[0]).shape, dtype=bool)
        ctx.add_const(mask, node.outputs[1])
