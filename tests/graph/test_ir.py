"""Graph IR: types, verification, topological order, dump and JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tvmc.errors import ModelError
from tvmc.graph import Graph, Node, TensorType, graph_from_json, graph_to_json
from tvmc.ops import infer_node


def small_graph() -> Graph:
    f32 = "float32"
    types = {
        "x": TensorType((2, 3), f32),
        "w": TensorType((2, 3), f32),
        "y": TensorType((2, 3), f32),
        "z": TensorType((2, 3), f32),
    }
    nodes = [
        Node("Add", ["x", "w"], ["y"]),
        Node("LeakyRelu", ["y"], ["z"], {"alpha": 0.25}),
    ]
    params = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    return Graph(["x"], ["z"], nodes, types, params, "small")


def test_tensor_type_rules():
    t = TensorType([1, 3, 224, 224], "float32")
    assert t.shape == (1, 3, 224, 224) and t.size == 150528 and t.nbytes == 602112
    assert str(t) == "float32[1,3,224,224]"
    assert TensorType.of(np.zeros((), np.int64)) == TensorType((), "int64")
    with pytest.raises(ValueError, match="dtype"):
        TensorType((1,), "float8")
    with pytest.raises(ValueError, match="negative"):
        TensorType((-1,), "float32")


def test_attributes_are_canonical():
    node = Node("Clip", ["x"], ["y"], {"pads": [1, [2, 3]], "v": np.float32(0.5)})
    assert node.attrs == {"pads": (1, (2, 3)), "v": 0.5}
    assert isinstance(node.attrs["v"], float)


def test_verify_accepts_a_valid_graph():
    small_graph().verify(infer_node)


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda g: g.nodes[0].inputs.__setitem__(0, "nope"), "reads undefined 'nope'"),
        (lambda g: g.outputs.append("ghost"), "never defined"),
        (lambda g: g.nodes.append(Node("Relu", ["x"], ["y"])), "defined twice"),
        (lambda g: g.types.__setitem__("z", TensorType((3, 2), "float32")), "rule says"),
        (lambda g: g.params.__setitem__("w", np.zeros((2, 3), np.float64)), "param 'w'"),
    ],
)
def test_verify_rejects(break_it, message):
    graph = small_graph()
    break_it(graph)
    with pytest.raises(ModelError, match=message):
        graph.verify(infer_node)


def test_toposort_orders_and_detects_cycles():
    graph = small_graph()
    graph.nodes.reverse()
    graph.toposort()
    assert [n.op for n in graph.nodes] == ["Add", "LeakyRelu"]
    graph.nodes[0].inputs[0] = "z"  # Add reads LeakyRelu's output: a cycle
    with pytest.raises(ModelError, match="cycle"):
        graph.toposort()


def test_json_round_trip_is_exact():
    graph = small_graph()
    graph.nodes[1].attrs["odd"] = (float("-inf"), 1e-7, "s", None, True, ((1, 2), (3,)))
    again = graph_from_json(graph_to_json(graph), graph.params)
    assert again.nodes == graph.nodes
    assert (again.inputs, again.outputs, again.types, again.name) == (
        graph.inputs,
        graph.outputs,
        graph.types,
        graph.name,
    )
    assert list(again.params) == list(graph.params)
    assert graph_to_json(again) == graph_to_json(graph)


def test_json_keeps_onnx_origins_and_reads_graphs_saved_without():
    graph = small_graph()
    graph.nodes[0].origin, graph.nodes[0].origin_op = "/block/Add", "Add"
    again = graph_from_json(graph_to_json(graph), graph.params)
    assert (again.nodes[0].origin, again.nodes[0].origin_op) == ("/block/Add", "Add")
    old = json.loads(graph_to_json(graph))
    for node in old["nodes"]:
        del node["origin"], node["origin_op"]
    assert graph_from_json(json.dumps(old), graph.params).nodes[0].origin == ""


def test_json_errors_are_clear():
    with pytest.raises(ModelError, match="not a tvmc graph"):
        graph_from_json("{}", {})
    with pytest.raises(ModelError, match="corrupt graph JSON"):
        graph_from_json('{"format": "tvmc.graph", "version": 1}', {})
    text = graph_to_json(small_graph())
    with pytest.raises(ModelError, match="lacks param values"):
        graph_from_json(text, {})


def test_dump_is_readable():
    text = small_graph().dump()
    assert "graph small(%x: float32[2,3]) -> (%z: float32[2,3])" in text
    assert "%y = Add(%x, $w) : float32[2,3]" in text
    assert "%z = LeakyRelu(%y) {alpha=0.25} : float32[2,3]" in text
