"""The converter table: ONNX op type -> a function adding our nodes to the graph being built."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from tvmc.errors import ModelError
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.ops.common import normalize_axes

Converter = Callable[[ConvertContext, OnnxNode], None]
CONVERTERS: dict[str, Converter] = {}


def converter(*op_types: str) -> Callable[[Converter], Converter]:
    """Register `fn` as the converter of each ONNX op in `op_types`.

    A ValueError or IndexError it raises (bad shapes, axes, attribute values) becomes a
    ModelError naming the node.
    """

    def wrap(fn: Converter) -> Converter:
        @functools.wraps(fn)
        def checked(ctx: ConvertContext, node: OnnxNode) -> None:
            try:
                fn(ctx, node)
            except (ValueError, IndexError) as exc:
                raise ModelError(f"{node.describe()}: {exc}") from None

        for op_type in op_types:
            if op_type in CONVERTERS:
                raise AssertionError(f"two converters for {op_type}")
            CONVERTERS[op_type] = checked
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


def unique_axes(node: OnnxNode, axes: Iterable[int], ndim: int) -> tuple[int, ...]:
    """`axes` as non-negative ints in their given order; ModelError naming the node when one is
    out of range or repeated."""
    try:
        result = normalize_axes(axes, ndim, node.op_type)
    except ValueError as exc:
        raise ModelError(f"{node.describe()}: {exc}") from None
    if len(set(result)) != len(result):
        raise ModelError(f"{node.describe()}: axes {list(axes)} name a dimension twice")
    return result
