"""plan_fusion on tiny graphs: the exact plan per rule, and a property test over random DAGs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.lower.tiny_graphs import (
    conv1x1,
    graph_of,
    lower_for_interpreter,
    node,
    random_inputs,
    run_native,
    run_program,
)
from tvmc.graph import Graph, TensorType
from tvmc.lower import FusionPlan, lower_graph, plan_fusion
from tvmc.ops import OPS, infer_node, run_reference
from tvmc.ops.registry import BROADCAST, ELEMENTWISE, INJECTIVE

X = (1, 4, 3, 3)  # conv input and output: 4 channels in and out, 1x1 kernels
W = np.ones((4, 4, 1, 1), np.float32)
BIAS = np.ones((4, 1, 1), np.float32)


def conv_bias_relu() -> Graph:
    nodes = [conv1x1("x", "w", "c"), node("Add", ["c", "b"], "a"), node("Relu", ["a"], "y")]
    return graph_of({"x": X}, nodes, ["y"], {"w": W, "b": BIAS})


def two_readers() -> Graph:
    nodes = [conv1x1("x", "w", "c"), node("Relu", ["c"], "r"),
             node("Sigmoid", ["r"], "s"), node("Tanh", ["r"], "t")]  # fmt: skip
    return graph_of({"x": X}, nodes, ["s", "t"], {"w": W})


def output_mid_chain() -> Graph:
    nodes = [conv1x1("x", "w", "c"), node("Relu", ["c"], "r"), node("Sigmoid", ["r"], "y")]
    return graph_of({"x": X}, nodes, ["r", "y"], {"w": W})


def conv_output() -> Graph:
    """The conv's own output is a graph output: no epilogue; its reader is a plain compute."""
    nodes = [conv1x1("x", "w", "c"), node("Relu", ["c"], "r"), node("Sigmoid", ["r"], "y")]
    return graph_of({"x": X}, nodes, ["c", "y"], {"w": W})


def add_of_two_convs() -> Graph:
    nodes = [conv1x1("x", "w1", "c1"), conv1x1("x", "w2", "c2"),
             node("Add", ["c1", "c2"], "a"), node("Relu", ["a"], "y")]  # fmt: skip
    return graph_of({"x": X}, nodes, ["y"], {"w1": W, "w2": 2 * W})


def broadcast_to_bigger() -> Graph:
    """The Add broadcasts the conv's [1,4,3,3] against [2,4,3,3]: not an epilogue."""
    nodes = [conv1x1("x", "w", "c"), node("Add", ["c", "z"], "a"), node("Relu", ["a"], "y")]
    return graph_of({"x": X, "z": (2, 4, 3, 3)}, nodes, ["y"], {"w": W})


def cast_changes_dtype() -> Graph:
    """The chain stops where the dtype changes (Cast to float64 after the ReLU)."""
    cast = node("Cast", ["r"], "y", to="float64")
    nodes = [conv1x1("x", "w", "c"), node("Relu", ["c"], "r"), cast]
    return graph_of({"x": X}, nodes, ["y"], {"w": W})


def compute_into_compute() -> Graph:
    nodes = [node("Exp", ["x"], "e"), node("Neg", ["e"], "n"), node("Mul", ["n", "z"], "y")]
    return graph_of({"x": (2, 3), "z": (2, 3)}, nodes, ["y"])


def compute_into_bigger_reader() -> Graph:
    """Exp's [3,2] read by an Add of shape [4,3,2] would be recomputed 4 times: stored."""
    nodes = [node("Exp", ["x"], "e"), node("Add", ["e", "z"], "y")]
    return graph_of({"x": (3, 2), "z": (4, 3, 2)}, nodes, ["y"])


def transpose_into_bigger_reader() -> Graph:
    nodes = [node("Transpose", ["x"], "t", perm=(1, 0)), node("Add", ["t", "z"], "y")]
    return graph_of({"x": (2, 3), "z": (4, 3, 2)}, nodes, ["y"])


def reshape_into_bigger_reader() -> Graph:
    nodes = [node("Reshape", ["x"], "r", shape=(3, 2)), node("Mul", ["z", "r"], "y")]
    return graph_of({"x": (6,), "z": (4, 3, 2)}, nodes, ["y"])


def compute_into_template() -> Graph:
    nodes = [node("Relu", ["x"], "r"), conv1x1("r", "w", "y")]
    return graph_of({"x": X}, nodes, ["y"], {"w": W})


def compute_into_epilogue() -> Graph:
    """Exp (after the conv in node order) feeds the conv's epilogue Add: computed in place."""
    nodes = [conv1x1("x", "w", "c"), node("Exp", ["z"], "e"), node("Add", ["c", "e"], "y")]
    return graph_of({"x": X, "z": X}, nodes, ["y"], {"w": W})


def compute_read_twice() -> Graph:
    nodes = [node("Exp", ["x"], "e"), node("Mul", ["e", "e"], "y")]
    return graph_of({"x": (2, 3)}, nodes, ["y"])


def template_read_twice() -> Graph:
    nodes = [conv1x1("x", "w", "c"), node("Mul", ["c", "c"], "y")]
    return graph_of({"x": X}, nodes, ["y"], {"w": W})


def conv_silu() -> Graph:
    """x * sigmoid(x) reads the conv's value twice: one epilogue, a DAG with one exit."""
    nodes = [conv1x1("x", "w", "c"), node("Sigmoid", ["c"], "s"), node("Mul", ["c", "s"], "y")]
    return graph_of({"x": X}, nodes, ["y"], {"w": W})


def conv_erf_gelu() -> Graph:
    """The exporters' decomposed GELU after a bias add: c+b is read by the Div and the Mul."""
    nodes = [conv1x1("x", "w", "c"), node("Add", ["c", "b"], "a"),
             node("Div", ["a", "root2"], "d"), node("Erf", ["d"], "e"),
             node("Add", ["e", "one"], "p"), node("Mul", ["a", "p"], "m"),
             node("Mul", ["m", "half"], "y")]  # fmt: skip
    scalars = {"root2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}
    params = {"w": W, "b": BIAS, **{k: np.array(v, np.float32) for k, v in scalars.items()}}
    return graph_of({"x": X}, nodes, ["y"], params)


def diamond_read_outside() -> Graph:
    """The Sigmoid's value is also read by the Transpose (not elementwise), so no region after the
    conv has one exit: the conv and the Sigmoid are stored, the Mul and Transpose inline."""
    nodes = [
        conv1x1("x", "w", "c"),
        node("Sigmoid", ["c"], "s"),
        node("Mul", ["c", "s"], "m"),
        node("Transpose", ["s"], "t", perm=(0, 1, 3, 2)),
        node("Add", ["m", "t"], "y"),
    ]
    return graph_of({"x": X}, nodes, ["y"], {"w": W})


def split_outputs() -> Graph:
    """Each output of a multi-output injective op is inlined into its own reader."""
    nodes = [node("Split", ["x"], ["s0", "s1"], axis=1, split=(1, 2)),
             node("Relu", ["s0"], "y0"), node("Neg", ["s1"], "y1")]  # fmt: skip
    return graph_of({"x": (2, 3)}, nodes, ["y0", "y1"])


PLANS = {  # graph -> (inlined tensors, epilogues as anchor -> chain node names)
    conv_bias_relu: (set(), {"c": ["a", "y"]}),
    two_readers: (set(), {"c": ["r"]}),
    output_mid_chain: (set(), {"c": ["r"]}),
    conv_output: ({"r"}, {}),
    add_of_two_convs: (set(), {"c1": ["a", "y"]}),
    broadcast_to_bigger: ({"a"}, {}),
    cast_changes_dtype: (set(), {"c": ["r"]}),
    compute_into_compute: ({"e", "n"}, {}),
    compute_into_bigger_reader: (set(), {}),
    transpose_into_bigger_reader: ({"t"}, {}),
    reshape_into_bigger_reader: ({"r"}, {}),
    compute_into_template: (set(), {}),
    compute_into_epilogue: ({"e"}, {"c": ["y"]}),
    compute_read_twice: (set(), {}),
    template_read_twice: (set(), {"c": ["y"]}),
    conv_silu: (set(), {"c": ["s", "y"]}),
    conv_erf_gelu: (set(), {"c": ["a", "d", "e", "p", "m", "y"]}),
    diamond_read_outside: ({"m", "t"}, {}),
    split_outputs: ({"s0", "s1"}, {}),
}


def summary(plan: FusionPlan) -> tuple[set[str], dict[str, list[str]]]:
    return plan.inlined, {k: [n.name for n in chain] for k, chain in plan.epilogues.items()}


@pytest.mark.parametrize("build", list(PLANS), ids=[f.__name__ for f in PLANS])
def test_plan(build):
    graph = build()
    plan = plan_fusion(graph)
    assert summary(plan) == PLANS[build]
    assert plan.absorbed == {n.name for chain in plan.epilogues.values() for n in chain}


@pytest.mark.parametrize("build", list(PLANS), ids=[f.__name__ for f in PLANS])
def test_disabled_plan_is_empty(build):
    plan = plan_fusion(build(), enabled=False)
    assert (plan.inlined, plan.epilogues, plan.absorbed) == (set(), {}, set())


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("build", list(PLANS), ids=[f.__name__ for f in PLANS])
def test_lowered_plan_computes_the_reference(build, fuse):
    graph = build()
    inputs = random_inputs(graph)
    lowered = lower_for_interpreter(graph, fuse=fuse)
    assert summary(lowered.fusion) == (PLANS[build] if fuse else (set(), {}))
    inside = {n.outputs[0] for chain in lowered.fusion.epilogues.values() for n in chain[:-1]}
    assert not (lowered.fusion.inlined | inside) & set(lowered.tensor_of.values())  # no buffer
    got = run_program(lowered, inputs)
    want = run_reference(graph, inputs)
    for name, value in zip(graph.outputs, got):
        np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_chain_output():
    graph = add_of_two_convs()
    plan = plan_fusion(graph)
    by_name = {n.name: n for n in graph.nodes}
    assert plan.chain_output(by_name["c1"]) == "y"  # the end of its epilogue
    assert plan.chain_output(by_name["c2"]) == "c2"  # no epilogue: its own output
    assert plan_fusion(graph, enabled=False).chain_output(by_name["c1"]) == "c1"


UNARY = ("Relu", "Neg", "Sigmoid", "Tanh", "Abs")
BINARY = ("Add", "Mul", "Sub", "Max")


@st.composite
def random_dags(draw) -> Graph:
    """Up to 8 elementwise, broadcast, injective ops (and ReduceSum templates) over two inputs;
    every tensor nobody reads is an output, and so are a few that are read."""
    shapes: dict[str, tuple[int, ...]] = {"x": (2, 3, 4), "y": (3, 1)}
    nodes = []
    for i in range(draw(st.integers(1, 8))):
        latest = f"t{i - 1}" if i else "x"  # read the newest tensor more often: longer chains
        a, out = draw(st.one_of(st.just(latest), st.sampled_from(sorted(shapes)))), f"t{i}"
        shape = shapes[a]
        kind = draw(st.sampled_from(("unary", "binary", "transpose", "reshape", "reduce")))
        if kind == "unary":
            n = node(draw(st.sampled_from(UNARY)), [a], out)
        elif kind == "binary":
            b = draw(st.sampled_from([t for t in sorted(shapes) if broadcasts(shape, shapes[t])]))
            n = node(draw(st.sampled_from(BINARY)), [a, b], out)
        elif kind == "transpose":
            n = node("Transpose", [a], out, perm=tuple(draw(st.permutations(range(len(shape))))))
        elif kind == "reshape":
            size = int(np.prod(shape))
            target = draw(st.sampled_from([(size,), shape[::-1], (shape[0], size // shape[0])]))
            n = node("Reshape", [a], out, shape=target)
        else:
            n = node("ReduceSum", [a], out, axes=(len(shape) - 1,), keepdims=True)
        nodes.append(n)
        shapes[out] = infer_node(n, [TensorType(shapes[t], "float32") for t in n.inputs])[0].shape
    read = {t for n in nodes for t in n.inputs}
    made = [n.outputs[0] for n in nodes]
    extra = draw(st.lists(st.sampled_from(made), unique=True, max_size=2))
    outputs = [t for t in made if t not in read or t in extra]
    return graph_of({"x": shapes["x"], "y": shapes["y"]}, nodes, outputs)


def broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def check_plan_rules(graph: Graph, plan: FusionPlan) -> None:
    """What every plan must satisfy, whatever the graph."""
    consumers, producers = graph.consumers(), graph.producers()
    for tensor in plan.inlined:
        (reader,) = consumers[tensor]  # exactly one reader ...
        assert reader.inputs.count(tensor) == 1, tensor  # ... reading it once
        assert tensor not in graph.outputs, tensor
        producer = producers[tensor]
        assert OPS[producer.op].is_compute and producer.name not in plan.absorbed
        assert OPS[reader.op].is_compute or reader.name in plan.absorbed, tensor
        same = all(graph.types[o].shape == graph.types[tensor].shape for o in reader.outputs)
        assert same or OPS[producer.op].kind == INJECTIVE, tensor  # no recomputation
    by_name = {n.name: n for n in graph.nodes}
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    for anchor, chain in plan.epilogues.items():
        assert OPS[by_name[anchor].op].is_template and OPS[by_name[anchor].op].epilogue
        value = by_name[anchor].outputs[0]
        inside = {value} | {link.outputs[0] for link in chain}
        assert [order[n.name] for n in chain] == sorted(order[n.name] for n in chain)  # in order
        for link in chain:
            assert set(link.inputs) & (inside - {link.outputs[0]}), link.name  # reads the region
            assert OPS[link.op].kind in (ELEMENTWISE, BROADCAST), link.op
            assert graph.types[link.outputs[0]] == graph.types[value], link.name
        for tensor in inside - {chain[-1].outputs[0]}:  # only the exit is read outside
            assert tensor not in graph.outputs, (anchor, tensor)
            assert all(r in chain for r in consumers[tensor]), (anchor, tensor)
    assert plan.absorbed == {n.name for chain in plan.epilogues.values() for n in chain}


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(graph=random_dags())
def test_random_dags_fuse_by_the_rules_and_compute_the_same(graph):
    plan = plan_fusion(graph)
    check_plan_rules(graph, plan)
    inputs = random_inputs(graph)
    want = run_reference(graph, inputs)
    fused, unfused = lower_graph(graph, fuse=True), lower_graph(graph, fuse=False)
    for lowered in (fused, unfused):
        assert lowered.program.workspace_bytes <= lowered.program.naive_bytes
        for name, value in zip(graph.outputs, run_program(lowered, inputs)):
            np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_fusion_keeps_a_reshape_of_a_reshape_a_view():
    nodes = [node("Exp", ["x"], "e"), node("Reshape", ["e"], "r", shape=(6,)),
             node("Reshape", ["r"], "y", shape=(3, 2))]  # fmt: skip
    graph = graph_of({"x": (2, 3)}, nodes, ["y"])
    unfused = lower_graph(graph, fuse=False).program
    assert [c.node for c in unfused.calls] == ["e"]  # both reshapes are views of Exp's output
    fused = lower_graph(graph, fuse=True).program
    assert [c.node for c in fused.calls] == ["e"]  # once ["e", "y"]: a copy through r


def dense_with(activation: str) -> Graph:
    """A transformer's MLP input: MatMul, bias add, then the activation as exporters decompose it:
    'erf' GELU (BERT, ViT), 'tanh' GELU (GPT-2, T5), 'silu' (Llama's gate)."""
    rng = np.random.default_rng(1)
    scalar = {"root2": np.sqrt(2), "one": 1, "half": 0.5, "three": 3, "k": 0.044715,
              "c": np.sqrt(2 / np.pi)}  # fmt: skip
    params = {"w": rng.standard_normal((32, 48)), "b": rng.standard_normal(48),
              **{k: np.array(v) for k, v in scalar.items()}}  # fmt: skip
    nodes = [node("MatMul", ["x", "w"], "mm"), node("Add", ["mm", "b"], "a")]
    if activation == "erf":
        nodes += [node("Div", ["a", "root2"], "d"), node("Erf", ["d"], "e"),
                  node("Add", ["e", "one"], "p"), node("Mul", ["a", "p"], "m"),
                  node("Mul", ["m", "half"], "y")]  # fmt: skip
    elif activation == "tanh":
        nodes += [node("Mul", ["a", "half"], "h"), node("Pow", ["a", "three"], "cube"),
                  node("Mul", ["cube", "k"], "kc"), node("Add", ["a", "kc"], "s"),
                  node("Mul", ["s", "c"], "z"), node("Tanh", ["z"], "t"),
                  node("Add", ["t", "one"], "p"), node("Mul", ["h", "p"], "y")]  # fmt: skip
    else:
        nodes += [node("Sigmoid", ["a"], "sg"), node("Mul", ["a", "sg"], "y")]
    params = {k: np.asarray(v, np.float32) for k, v in params.items()}
    return graph_of({"x": (2, 7, 32)}, nodes, ["y"], params)


@pytest.mark.parametrize("activation", ["erf", "tanh", "silu"])
def test_decomposed_activations_are_one_matmul_kernel(activation):
    """Bias and activation ride in the GEMM's epilogue: one call, no stored intermediate."""
    graph = dense_with(activation)
    lowered = lower_graph(graph)
    assert [c.node.split("+")[0] for c in lowered.program.calls] == ["mm"]
    (got,) = run_native(lowered, random_inputs(graph))
    want = run_reference(graph, random_inputs(graph))["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
