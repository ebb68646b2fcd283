"""Graph IR: a typed dataflow graph with static shapes.

In: nothing (the base layer; imports only numpy, tvmc.errors and tvmc.dtypes).
Out: `Graph`, `Node`, `TensorType`, text dump and JSON (de)serialisation.
"""

from tvmc.graph.ir import DTYPES, Graph, Node, TensorType, canonical_attr
from tvmc.graph.serialize import graph_from_json, graph_to_json

__all__ = [
    "DTYPES",
    "Graph",
    "Node",
    "TensorType",
    "canonical_attr",
    "graph_from_json",
    "graph_to_json",
]
