"""One short converter per ONNX op, named like the op; grouped by op family.

A converter reads an `OnnxNode` and calls `ctx.add(...)` with our op names and normalized
attributes (opset differences, e.g. axes that moved from attribute to input, handled as data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tvmc.frontend.context import ConvertContext, OnnxNode

Converter = Callable[[ConvertContext, OnnxNode], None]
CONVERTERS: dict[str, Converter] = {}


def converter(*op_types: str) -> Callable[[Converter], Converter]:
    """Register `fn` as the converter of each ONNX op in `op_types`."""

    def wrap(fn: Converter) -> Converter:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise AssertionError(f"two converters for {op_type}")
            CONVERTERS[op_type] = fn
        return fn

    return wrap


def same_name(op_types: Iterable[str], ignore: Iterable[str] = ()) -> None:
    """ONNX ops that map 1:1 onto our op of the same name; attributes in `ignore` are dropped."""
    dropped = frozenset(ignore)

    def convert(ctx: ConvertContext, node: OnnxNode) -> None:
        attrs = {k: v for k, v in node.attrs.items() if k not in dropped}
        ctx.add(node.op_type, node.inputs, attrs, outputs=node.outputs)

    for op_type in op_types:
        converter(op_type)(convert)


# Importing the families registers their converters.
from tvmc.frontend.converters import conv, elementwise, linalg, tensor  # noqa: E402,F401
