"""Converters of matrix products: MatMul and Det (our ops of the same names) and Gemm."""

from __future__ import annotations

from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import converter, same_name

same_name(["MatMul", "Det"])


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
