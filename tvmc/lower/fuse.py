"""Fusion: decide which tensors are stored and which are computed on the fly by their reader.

- A template op (conv, matmul, pool, reduction, ...) absorbs the elementwise ops after it as its
  epilogue (bias, activation, residual add): a chain, or a DAG with one exit such as a decomposed
  GELU or SiLU (x * sigmoid(x) reads x twice), when no tensor inside it is read elsewhere.
- A compute op's result is inlined into its only reader when that reader is a compute (or an
  epilogue) and inlining does not multiply work: the reader has the same shape, or the producer is
  a pure index remap (reshape, transpose, slice). A Reshape read by a Reshape stays: both are
  views of the same bytes, and an inlined one would make its reader a copy.
- Everything else is materialized: stored once, read from memory. So is every
  MAX_INLINED_DEPTH-th tensor of a long inlined chain, so that expression trees (and the
  recursion that builds and compiles them) stay shallow whatever the model's depth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvmc.graph import Graph, Node
from tvmc.ops import OPS
from tvmc.ops.registry import BROADCAST, ELEMENTWISE, INJECTIVE

MAX_INLINED_DEPTH = 64  # ops computed on the fly in one expression, at most


@dataclass
class FusionPlan:
    """The fusion decisions for one graph."""

    inlined: set[str] = field(default_factory=set)  # tensors computed by their reader
    epilogues: dict[str, list[Node]] = field(default_factory=dict)  # template node -> chain
    absorbed: set[str] = field(default_factory=set)  # names of nodes inside some epilogue

    def chain_output(self, node: Node) -> str:
        """The tensor a template node's kernels finally store (after its epilogue)."""
        chain = self.epilogues.get(node.name, [])
        return chain[-1].outputs[0] if chain else node.outputs[0]


def _elementwise_on(node: Node, tensor: str, graph: Graph) -> bool:
    """`node` is elementwise/broadcast and its output has the shape of `tensor`."""
    if OPS[node.op].kind not in (ELEMENTWISE, BROADCAST) or not OPS[node.op].is_compute:
        return False
    out, src = graph.types[node.outputs[0]], graph.types[tensor]
    return len(node.outputs) == 1 and out == src  # same shape and dtype as the value it extends


def _epilogue_region(
    graph: Graph,
    position: int,
    consumers: dict[str, list[Node]],
    outputs: set[str],
    absorbed: set[str],
) -> list[Node]:
    """The largest epilogue of the template at `position`: the elementwise nodes after it, in graph
    order, that read its value or each other's, such that only the last one's output is read
    outside them (or is a graph output). Growth stops at the first reader that cannot join."""
    anchor = graph.nodes[position].outputs[0]
    if anchor in outputs:
        return []
    region: list[Node] = []
    best: list[Node] = []
    unread = {anchor: len(consumers.get(anchor, []))}  # region tensor -> readers not yet in it
    for node in graph.nodes[position + 1 :]:
        reads = {t for t in node.inputs if t in unread}
        if not reads:
            continue
        if node.name in absorbed or not _elementwise_on(node, anchor, graph):
            break  # an add of two convs joins the first one only; other readers end the region
        if len(region) == MAX_INLINED_DEPTH:
            break  # the epilogue's expression stays shallow; the rest reads a stored tensor
        region.append(node)
        for tensor in reads:
            unread[tensor] -= 1
        exit_ = node.outputs[0]
        unread[exit_] = len(consumers.get(exit_, []))
        live = [t for t, n in unread.items() if n or t in outputs]
        if live == [exit_]:
            best = list(region)
        if not any(unread.values()):
            break  # nothing after this reads the region
    return best


def plan_fusion(graph: Graph, enabled: bool = True) -> FusionPlan:
    """Fusion decisions; `enabled=False` materializes every tensor (one kernel per node)."""
    plan = FusionPlan()
    if not enabled:
        return plan
    consumers = graph.consumers()
    outputs = set(graph.outputs)

    def only_reader(tensor: str) -> Node | None:
        readers = consumers.get(tensor, [])
        if tensor in outputs or len(readers) != 1:
            return None
        reader = readers[0]
        return reader if reader.inputs.count(tensor) == 1 else None

    for position, node in enumerate(graph.nodes):
        if OPS[node.op].epilogue and node.name not in plan.absorbed:
            region = _epilogue_region(graph, position, consumers, outputs, plan.absorbed)
            if region:
                plan.epilogues[node.name] = region
                plan.absorbed.update(link.name for link in region)

    depth: dict[str, int] = {}  # inlined tensor -> ops in the expression that computes it
    for node in graph.nodes:
        opdef = OPS[node.op]
        if not opdef.is_compute or node.name in plan.absorbed:
            continue
        below = max((depth.get(name, 0) for name in node.inputs), default=0)
        if below + 1 > MAX_INLINED_DEPTH:
            continue  # stored: readers start a fresh expression
        for tensor in node.outputs:
            reader = only_reader(tensor)
            if reader is None:
                continue
            if node.op == reader.op == "Reshape":
                continue  # both are free views of one stored tensor; inlined, the reader copies
            reader_is_compute = OPS[reader.op].is_compute
            if not (reader_is_compute or reader.name in plan.absorbed):
                continue
            same_shape = all(
                graph.types[o].shape == graph.types[tensor].shape for o in reader.outputs
            )
            if same_shape or opdef.kind == INJECTIVE:
                plan.inlined.add(tensor)
                depth[tensor] = below + 1
    return plan
