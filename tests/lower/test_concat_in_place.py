"""Concat in place: its inputs' producers write straight into the slices of its output (no copy
kernel) when the slices are contiguous and aligned; otherwise it stays a copy. Both ways the
results match the reference, natively and interpreted over a NaN-filled workspace."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lower.tiny_graphs import (
    conv1x1,
    graph_of,
    lower_for_interpreter,
    node,
    random_inputs,
    run_native,
    run_program,
)
from tvmc.graph import Graph
from tvmc.lower import LoweredModel, lower_graph
from tvmc.ops import run_reference


def conv3x3(x: str, w: str, out: str) -> object:
    return node("Conv", [x, w], out, kernel_shape=(3, 3), strides=(1, 1), pads=(1,) * 4,
                dilations=(1, 1))  # fmt: skip


def weights(oc: int, ic: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((oc, ic, k, k)) * 0.3).astype(np.float32)


def branches_graph(channels: tuple[int, int], hw: int = 4, axis: int = 1) -> Graph:
    """Inception-like: a 1x1 and a 3x3 conv branch (ReLU epilogues) joined by a Concat read by
    a 1x1 conv."""
    a, b = channels
    nodes = [
        conv1x1("x", "wa", "ca"), node("Relu", ["ca"], "ra"),
        conv3x3("x", "wb", "cb"), node("Relu", ["cb"], "rb"),
        node("Concat", ["ra", "rb"], "cat", axis=axis),
    ]  # fmt: skip
    nodes.append(conv1x1("cat", "wy", "y"))
    joined = a + b if axis == 1 else a
    params = {"wa": weights(a, 4, 1, 1), "wb": weights(b, 4, 3, 2), "wy": weights(3, joined, 1, 3)}
    return graph_of({"x": (1, 4, hw, hw)}, nodes, ["y"], params)


def offsets(lowered: LoweredModel) -> dict[str, int]:
    """Workspace byte offset of each graph tensor."""
    return {lowered.tensor_of[b.name]: b.offset for b in lowered.program.buffers.values()
            if b.storage == "workspace" and b.name in lowered.tensor_of}  # fmt: skip


def check(graph: Graph, lowered: LoweredModel) -> None:
    inputs = random_inputs(graph)
    want = run_reference(graph, inputs)["y"]
    (got,) = run_native(lowered, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_branches_write_into_the_concat():
    graph = branches_graph((4, 8))  # slices of 4 * 16 floats: 256 bytes, aligned
    lowered = lower_graph(graph)
    assert not any(c.node.startswith("cat") for c in lowered.program.calls)
    at = offsets(lowered)
    assert at["ra"] == at["cat"] and at["rb"] == at["cat"] + 4 * 16 * 4
    check(graph, lowered)
    interpreted = lower_for_interpreter(graph)
    assert not any(c.node.startswith("cat") for c in interpreted.program.calls)
    inputs = random_inputs(graph)
    (got,) = run_program(interpreted, inputs)
    np.testing.assert_allclose(got, run_reference(graph, inputs)["y"], rtol=1e-5, atol=1e-5)


def test_unfused_producers_write_into_the_concat():
    graph = branches_graph((4, 8))
    lowered = lower_graph(graph, fuse=False)  # the Relu computes write the slices
    assert not any(c.node.startswith("cat") for c in lowered.program.calls)
    at = offsets(lowered)
    assert at["rb"] - at["ra"] == 256
    check(graph, lowered)


@pytest.mark.parametrize(
    "channels, hw, axis",
    [((1, 2), 3, 1),  # the second slice starts 36 bytes in: unaligned
     ((8, 8), 4, 2)],  # slices along rows of several channels: not contiguous
)  # fmt: skip
def test_concat_stays_a_copy(channels, hw, axis):
    graph = branches_graph(channels, hw, axis)
    lowered = lower_graph(graph)
    assert any(c.node == "cat" for c in lowered.program.calls)
    check(graph, lowered)


def test_an_input_of_two_concats_is_a_slice_of_the_first_only():
    w = weights(16, 4, 1, 4)
    nodes = [
        conv1x1("x", "w", "a"), conv1x1("x", "w", "b"), conv1x1("x", "w", "c"),
        node("Concat", ["a", "b"], "ab", axis=1), node("Concat", ["b", "c"], "bc", axis=1),
        node("Add", ["ab", "bc"], "y"),
    ]  # fmt: skip
    graph = graph_of({"x": (1, 4, 2, 2)}, nodes, ["y"], {"w": w})
    lowered = lower_graph(graph, fuse=False)  # fused, the Add would read both Concats inlined
    assert [c.node for c in lowered.program.calls if c.node in ("ab", "bc")] == ["bc"]
    check(graph, lowered)


def test_nested_concats_add_their_offsets():
    w = weights(16, 4, 1, 5)
    nodes = [
        conv1x1("x", "w", "a"), conv1x1("x", "w", "b"), conv1x1("x", "w", "c"),
        node("Concat", ["a", "b"], "ab", axis=1), node("Concat", ["c", "ab"], "cab", axis=1),
        node("Exp", ["cab"], "y"),
    ]  # fmt: skip
    graph = graph_of({"x": (1, 4, 2, 2)}, nodes, ["y"], {"w": w})
    lowered = lower_graph(graph, fuse=False)
    assert not any(c.node in ("ab", "cab") for c in lowered.program.calls)
    at, slice_bytes = offsets(lowered), 16 * 4 * 4
    assert at["c"] == at["cab"] and at["a"] == at["cab"] + slice_bytes  # "ab" has no call
    assert at["b"] == at["cab"] + 2 * slice_bytes
    check(graph, lowered)


@pytest.mark.parametrize("output", ["cat", "r"])
def test_a_concat_the_model_returns_stays_a_copy(output):
    w = weights(16, 4, 1, 6)
    nodes = [conv1x1("x", "w", "a"), conv1x1("x", "w", "b"),
             node("Concat", ["a", "b"], "cat", axis=1)]  # fmt: skip
    if output == "r":  # a view of the Concat would make the model's output hold the slices
        nodes.append(node("Reshape", ["cat"], "r", shape=(32, 4)))
    graph = graph_of({"x": (1, 4, 2, 2)}, nodes, [output], {"w": w})
    lowered = lower_graph(graph)
    inputs = random_inputs(graph)
    (got,) = run_native(lowered, inputs)
    np.testing.assert_allclose(got, run_reference(graph, inputs)[output], rtol=1e-5, atol=1e-5)
