"""Converters of the losses: NegativeLogLikelihoodLoss (one op) and SoftmaxCrossEntropyLoss
(LogSoftmax over the class axis, then NegativeLogLikelihoodLoss, as its ONNX function is)."""

from __future__ import annotations

from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter

CLASS_AXIS = 1


def _loss_attrs(node: OnnxNode) -> dict:
    """reduction (default mean) and ignore_index (None when absent)."""
    return {
        "reduction": node.attrs.get("reduction", "mean"),
        "ignore_index": node.attrs.get("ignore_index"),
    }


@converter("NegativeLogLikelihoodLoss")
def NegativeLogLikelihoodLoss(ctx: ConvertContext, node: OnnxNode) -> None:
    """input, target and the optional weight, as they are."""
    if not (node.input(0) and node.input(1)):
        raise ValueError("needs inputs input and target")
    inputs = [name for name in node.inputs[:3] if name]
    ctx.add("NegativeLogLikelihoodLoss", inputs, _loss_attrs(node), outputs=node.outputs[:1])


@converter("SoftmaxCrossEntropyLoss")
def SoftmaxCrossEntropyLoss(ctx: ConvertContext, node: OnnxNode) -> None:
    """LogSoftmax over the classes (the optional log_prob output), then the NLL loss."""
    if not (node.input(0) and node.input(1)):
        raise ValueError("needs inputs scores and labels")
    scores, labels = node.inputs[:2]
    if ctx.type(scores).ndim < 2:
        raise ValueError(f"scores must be [N,C,D1,...], got {list(ctx.type(scores).shape)}")
    log_prob = node.outputs[1] if len(node.outputs) > 1 and node.outputs[1] else None
    (log_prob,) = ctx.add("LogSoftmax", [scores], {"axes": (CLASS_AXIS,)},
                          outputs=[log_prob] if log_prob else None)  # fmt: skip
    inputs = [log_prob, labels, *(name for name in node.inputs[2:3] if name)]
    ctx.add("NegativeLogLikelihoodLoss", inputs, _loss_attrs(node), outputs=node.outputs[:1])
