"""What every graph-pass test checks: the pass's graph verifies and computes what the graph
before it and onnxruntime compute, under the same output names."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from tests.onnx_helpers import assert_close, run_onnxruntime
from tvmc.frontend import convert_model
from tvmc.graph import Graph
from tvmc.ops import infer_node, run_reference


def apply_and_compare(model, inputs: dict[str, np.ndarray], graph_pass: Callable[[Graph], Graph],
                      tol: dict[str, float]) -> Graph:  # fmt: skip
    """Run `graph_pass` on the converted model, verify the result, compare its outputs with the
    graph before and with onnxruntime; the graph after, for the caller's structure checks."""
    graph = convert_model(model)
    before = run_reference(copy.deepcopy(graph), inputs)
    after_graph = graph_pass(graph)
    after_graph.verify(infer_node)
    after = run_reference(after_graph, inputs)
    assert list(after) == [o.name for o in model.graph.output]  # output names survive
    for name, expected in zip(after, run_onnxruntime(model, inputs)):
        assert_close(after[name], np.asarray(expected), **tol)
        assert_close(after[name], before[name], **tol)
    return after_graph
