"""ONNX nodes into the graph being built, top-level ones and those of subgraphs inlined in place.

A subgraph (a GRAPH attribute: If's branches, Loop's and Scan's body) is converted where it runs:
its nodes are added to the one static graph, once for the taken If branch and once per Loop or
Scan iteration, with its tensors renamed into fresh graph names. Names a subgraph reads but does
not define resolve in the enclosing scopes (outer-scope tensors), innermost first. Unrolling
multiplies the graph, so `MAX_UNROLLED_NODES` bounds what one model may unroll.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import onnx
from onnx import numpy_helper

from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend import bounds
from tvmc.frontend.context import ConvertContext, OnnxNode
from tvmc.frontend.converters.registry import CONVERTERS

# Nodes a model may unroll (subgraph nodes once per copy; a recurrent node's steps): compiling
# costs about 30 ms per node, so the limit keeps a compile under about five minutes
MAX_UNROLLED_NODES = 10_000
_GRAPH_ATTRS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def decode_attribute(attr: onnx.AttributeProto) -> Any:
    """An attribute's value: tensors as numpy arrays, strings as str, subgraphs as GraphProto."""
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


def subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """(attribute name, graph) of each subgraph a node holds."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from ((attr.name, g) for g in attr.graphs)


def walk(nodes: Iterable[onnx.NodeProto], where: str = "") -> Iterator[tuple[onnx.NodeProto, str]]:
    """Every node with where it sits ('' at top level, else e.g. "If 'pick'.then_branch"),
    subgraph nodes right after the node holding them."""
    for node in nodes:
        yield node, where
        for attr, graph in subgraphs(node):
            inner = f"{node.op_type} {node.name or node.output[0]!r}.{attr}"
            yield from walk(graph.node, f"{where} > {inner}" if where else inner)


def count_nodes(graph: onnx.GraphProto) -> int:
    """Nodes of a graph, those of its subgraphs included (each counted once)."""
    return sum(1 for _ in walk(graph.node))


def check_unrolled_size(node: OnnxNode, count: int, what: str) -> None:
    """UnsupportedModelError when unrolling `what` of `node` would make too many nodes."""
    if count > MAX_UNROLLED_NODES:
        raise UnsupportedModelError(
            f"{node.describe()}: unrolling {what} makes about {count} nodes, more than "
            f"{MAX_UNROLLED_NODES}; tvmc compiles one static graph and unrolls control flow "
            "and recurrences into it, which is only sensible for short sequences and loops"
        )


def convert_nodes(ctx: ConvertContext, protos: Iterable[onnx.NodeProto], prefix: str = "") -> None:
    """Convert nodes in order. Inside a subgraph scope (ctx.scopes) their inputs resolve through
    the scopes and their outputs get fresh names, `prefix` + the name, kept in the innermost."""
    outer = ctx.current
    for proto in protos:
        if ctx.scopes:
            ctx.unrolled += 1
        inputs = [ctx.resolve(n) for n in proto.input]
        while inputs and not inputs[-1]:
            inputs.pop()
        outputs = list(proto.output)
        if ctx.scopes:
            for i, name in enumerate(outputs):
                if name:
                    outputs[i] = ctx.scopes[-1][name] = ctx.fresh_name(prefix + name)
        attrs = {a.name: decode_attribute(a) for a in proto.attribute}
        name = prefix + proto.name if proto.name and ctx.scopes else proto.name
        node = OnnxNode(proto.op_type, name, inputs, outputs, attrs, proto.domain)
        missing = [n for n in node.inputs if n and n not in ctx.graph.types]
        if missing:
            raise ModelError(
                f"{node.describe()} reads {missing}, which no earlier node produces "
                "(the graph is not topologically sorted or is broken)"
            )
        ctx.current = node
        bounds.check_node(ctx, node)
        try:
            CONVERTERS[node.op_type](ctx, node)
        except MemoryError:  # a bound passed, yet the machine had less free than the limit
            raise ModelError(f"{node.describe()}: out of memory while converting it") from None
    ctx.current = outer


def inline(
    ctx: ConvertContext, node: OnnxNode, body: onnx.GraphProto, inputs: list[str], prefix: str
) -> list[str]:
    """Convert `body` in place with its inputs bound to graph tensors `inputs`; its outputs."""
    if len(inputs) != len(body.input):
        raise ModelError(f"{node.describe()}: its subgraph {body.name!r} takes "
                         f"{len(body.input)} inputs, the node binds {len(inputs)}")  # fmt: skip
    check_unrolled_size(node, ctx.unrolled + count_nodes(body), "its subgraphs")
    scope = {value.name: name for value, name in zip(body.input, inputs)}
    ctx.scopes.append(scope)
    try:
        for init in body.initializer:
            scope[init.name] = ctx.add_const(
                numpy_helper.to_array(init), ctx.fresh_name(prefix + init.name)
            )
        convert_nodes(ctx, body.node, prefix)
        outputs = [ctx.resolve(value.name) for value in body.output]
    finally:
        ctx.scopes.pop()
    undefined = [v.name for v, n in zip(body.output, outputs) if n not in ctx.graph.types]
    if undefined:
        raise ModelError(f"{node.describe()}: its subgraph {body.name!r} never produces "
                         f"{undefined}")  # fmt: skip
    return outputs


def bind_outputs(ctx: ConvertContext, node: OnnxNode, values: list[str]) -> None:
    """The node's outputs (those asked for) as the tensors `values`, through Identity."""
    if len(values) < len(node.outputs):
        raise ModelError(f"{node.describe()}: has {len(node.outputs)} outputs, its subgraph "
                         f"gives {len(values)}")  # fmt: skip
    for name, value in zip(node.outputs, values):
        if name:
            ctx.add("Identity", [value], outputs=[name])
