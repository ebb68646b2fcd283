"""Evaluate a whole graph with the numpy references: the test oracle, never the compiled path."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tvmc.errors import InputError
from tvmc.graph import Graph, TensorType
from tvmc.ops.registry import evaluate_node


def check_inputs(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs matched to the graph by name, shape and dtype; InputError says what was expected."""
    unknown = sorted(set(inputs) - set(graph.inputs))
    if unknown:
        raise InputError(f"unknown input(s) {unknown}; the model's inputs are {graph.inputs}")
    missing = [name for name in graph.inputs if name not in inputs]
    if missing:
        raise InputError(f"missing input(s) {missing}")
    checked = {}
    for name in graph.inputs:
        array = np.asarray(inputs[name])
        expected = graph.types[name]
        if TensorType.of(array) != expected:
            raise InputError(
                f"input {name!r} is {TensorType.of(array)}, the model expects {expected}"
            )
        checked[name] = array
    return checked


def run_reference(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every graph output by name, computed node by node with the op references."""
    values: dict[str, np.ndarray] = dict(graph.params)
    values.update(check_inputs(graph, inputs))
    last_use = {name: i for i, node in enumerate(graph.nodes) for name in node.inputs}
    keep = set(graph.outputs)
    for i, node in enumerate(graph.nodes):
        outputs = evaluate_node(node, [values[name] for name in node.inputs if name])
        values.update(zip(node.outputs, outputs))
        for name in node.inputs:  # free intermediates early: big models stay within memory
            if last_use.get(name) == i and name not in keep and name not in graph.params:
                values.pop(name, None)
    return {name: values[name] for name in graph.outputs}
