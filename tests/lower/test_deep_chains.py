"""Models deeper than Python's recursion: long elementwise chains compile and run, because
fusion stores every MAX_INLINED_DEPTH-th tensor of an inlined chain."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

import tvmc
from tvmc.lower import plan_fusion
from tvmc.lower.fuse import MAX_INLINED_DEPTH


def add_chain(length: int) -> onnx.ModelProto:
    """y = x + x + ... + x: `length` Adds, each reading the previous sum and the input."""
    nodes, previous = [], "x"
    for i in range(length):
        nodes.append(helper.make_node("Add", [previous, "x"], [f"s{i}"]))
        previous = f"s{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [3, 5])],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_long_chain_is_cut_into_bounded_expressions(tmp_path: Path):
    onnx.save(add_chain(300), tmp_path / "chain.onnx")
    graph = tvmc.load(str(tmp_path / "chain.onnx")).graph
    plan = plan_fusion(graph)
    stored = [n.outputs[0] for n in graph.nodes if n.outputs[0] not in plan.inlined]
    assert 300 // MAX_INLINED_DEPTH <= len(stored) <= 300 // MAX_INLINED_DEPTH + 2
    run = 0  # inlined tensors in a row never exceed the bound
    for n in graph.nodes:
        run = run + 1 if n.outputs[0] in plan.inlined else 0
        assert run <= MAX_INLINED_DEPTH


def test_a_chain_deeper_than_the_recursion_limit_runs(tmp_path: Path):
    onnx.save(add_chain(1200), tmp_path / "chain.onnx")
    package = tvmc.compile(str(tmp_path / "chain.onnx"), package_path=str(tmp_path / "m.tar"))
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    y = tvmc.run(package, inputs={"x": x}).get_output("output_0")
    np.testing.assert_allclose(y, x * 1201, rtol=1e-4, atol=1e-4)


def test_a_long_epilogue_is_cut_too(tmp_path: Path):
    # a MatMul followed by 300 Adds: its epilogue takes at most MAX_INLINED_DEPTH of them
    model = add_chain(300)
    model.graph.node.insert(0, helper.make_node("MatMul", ["x", "w"], ["m"]))
    model.graph.node[1].input[0] = "m"
    w = np.eye(5, dtype=np.float32) * 2
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    onnx.save(model, tmp_path / "chain.onnx")
    graph = tvmc.load(str(tmp_path / "chain.onnx")).graph
    plan = plan_fusion(graph)
    assert all(len(chain) <= MAX_INLINED_DEPTH for chain in plan.epilogues.values())
    package = tvmc.compile(str(tmp_path / "chain.onnx"), package_path=str(tmp_path / "m.tar"))
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    y = tvmc.run(package, inputs={"x": x}).get_output("output_0")
    np.testing.assert_allclose(y, x * 302, rtol=1e-4, atol=1e-4)
