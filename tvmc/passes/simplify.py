"""Graph clean-up passes: constant folding, identity removal, dead-node elimination."""

from __future__ import annotations

from tvmc.graph import Graph, Node, TensorType
from tvmc.ops import evaluate_node


def fold_constants(graph: Graph) -> Graph:
    """Nodes whose inputs are all constant become constants (computed by the op references)."""
    kept: list[Node] = []
    for node in graph.nodes:
        args = [n for n in node.inputs if n]
        if args and all(n in graph.params for n in args):
            values = evaluate_node(node, [graph.params[n] for n in args])
            for name, value in zip(node.outputs, values):
                graph.params[name] = value
                graph.types[name] = TensorType.of(value)
        else:
            kept.append(node)
    graph.nodes = kept
    return graph


def remove_identities(graph: Graph) -> Graph:
    """Identity nodes (Dropout becomes Identity at import) vanish; readers use the source."""
    protected = set(graph.inputs) | set(graph.outputs) | set(graph.params)
    rename: dict[str, str] = {}
    kept: list[Node] = []
    for node in graph.nodes:
        node.inputs = [rename.get(n, n) for n in node.inputs]
        if node.op == "Identity":
            src, dst = node.inputs[0], node.outputs[0]
            if dst not in graph.outputs:
                rename[dst] = src
                continue
            if src not in protected:
                # the output name is the model's own: rename the producer's result instead
                rename[src] = dst
                for earlier in kept:
                    earlier.outputs = [dst if n == src else n for n in earlier.outputs]
                    earlier.inputs = [dst if n == src else n for n in earlier.inputs]
                continue
        kept.append(node)
    graph.nodes = kept
    graph.prune_types()
    return graph


def eliminate_dead_nodes(graph: Graph) -> Graph:
    """Drop nodes and params that no graph output depends on."""
    live = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(out in live for out in node.outputs):
            kept.append(node)
            live.update(n for n in node.inputs if n)
    graph.nodes = kept[::-1]
    graph.params = {k: v for k, v in graph.params.items() if k in live}
    graph.prune_types()
    return graph
