"""JSON (de)serialisation of a graph's structure; params travel separately (see driver)."""

from __future__ import annotations

import json
from typing import Any

from tvmc.dtypes import as_dtype
from tvmc.errors import ModelError
from tvmc.graph.ir import Graph, Node, TensorType, canonical_attr

GRAPH_FORMAT = "tvmc.graph"
GRAPH_VERSION = 1


def graph_to_json(graph: Graph) -> str:
    """The graph without param values, as JSON text that `graph_from_json` reads back exactly."""
    doc = {
        "format": GRAPH_FORMAT,
        "version": GRAPH_VERSION,
        "name": graph.name,
        "inputs": graph.inputs,
        "outputs": graph.outputs,
        "params": list(graph.params),
        "types": {k: {"shape": list(t.shape), "dtype": t.dtype} for k, t in graph.types.items()},
        "nodes": [
            {"name": n.name, "op": n.op, "inputs": n.inputs, "outputs": n.outputs, "attrs": n.attrs}
            for n in graph.nodes
        ],
    }
    return json.dumps(doc, indent=1)


def graph_from_json(text: str, params: dict[str, Any]) -> Graph:
    """Rebuild a graph from `graph_to_json` text and its param arrays."""
    try:
        doc = json.loads(text)
        if doc.get("format") != GRAPH_FORMAT:
            raise ModelError("not a tvmc graph (missing 'format': 'tvmc.graph')")
        if doc.get("version") != GRAPH_VERSION:
            raise ModelError(
                f"graph format version {doc.get('version')} is not supported "
                f"(this tvmc reads version {GRAPH_VERSION})"
            )
        types = {k: TensorType(tuple(v["shape"]), v["dtype"]) for k, v in doc["types"].items()}
        nodes = [
            Node(
                n["op"],
                n["inputs"],
                n["outputs"],
                {k: canonical_attr(v) for k, v in n["attrs"].items()},
                n["name"],
            )
            for n in doc["nodes"]
        ]
        missing = [p for p in doc["params"] if p not in params]
        if missing:
            raise ModelError(f"saved model lacks param values for {missing[:5]}")
        # .npz holds bfloat16, float8, int4... as raw bytes (void): their types say what they are
        ordered = {name: as_dtype(params[name], types[name].dtype) for name in doc["params"]}
        return Graph(doc["inputs"], doc["outputs"], nodes, types, ordered, doc["name"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"corrupt graph JSON: {exc}") from exc
