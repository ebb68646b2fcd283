"""plan_workspace: exact plans for small call sequences, a property test of its invariants, and a
lowered chain whose workspace is smaller than its intermediates side by side."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
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
from tvmc.kernel.program import WORKSPACE_ALIGN
from tvmc.lower import lower_graph
from tvmc.lower.memory import plan_workspace
from tvmc.ops import run_reference


def aligned(size: int) -> int:
    """The bytes a buffer takes: at least one byte (distinct addresses), rounded up."""
    return -(-max(size, 1) // WORKSPACE_ALIGN) * WORKSPACE_ALIGN


def check_plan(sizes, calls, offsets: dict[str, int], total: int) -> None:
    """Aligned offsets; no two buffers live in the same call overlap; total is the peak."""
    used = {name for names in calls for name in names if name in sizes}
    assert set(offsets) == used
    assert all(offset % WORKSPACE_ALIGN == 0 for offset in offsets.values()), offsets
    span = {name: (offsets[name], offsets[name] + aligned(sizes[name])) for name in used}
    first = {n: min(i for i, c in enumerate(calls) if n in c) for n in used}
    last = {n: max(i for i, c in enumerate(calls) if n in c) for n in used}
    for i in range(len(calls)):
        live = [n for n in sorted(used) if first[n] <= i <= last[n]]
        for a, b in itertools.combinations(live, 2):
            disjoint = span[a][1] <= span[b][0] or span[b][1] <= span[a][0]
            assert disjoint, f"call {i}: {a} {span[a]} overlaps {b} {span[b]}"
    assert total == max((end for _, end in span.values()), default=0)


@pytest.mark.parametrize(
    "sizes, calls, expected, total",
    [
        pytest.param(  # a chain x -> a -> b -> c -> y: a dies before c is born
            {"a": 1000, "b": 1000, "c": 1000},
            [["x", "a"], ["a", "b"], ["b", "c"], ["c", "y"]],
            {"a": 0, "b": 1024, "c": 0}, 2048, id="disjoint-lifetimes-share",
        ),
        pytest.param(
            {"a": 100, "b": 100, "c": 100}, [["a", "a", "b", "c"]],
            {"a": 0, "b": 128, "c": 256}, 384, id="one-call-never-aliases",
        ),
        pytest.param(
            {"a": 1, "b": 63, "c": 65, "d": 130}, [["a", "b", "c", "d"]],
            {"a": 0, "b": 64, "c": 128, "d": 256}, 448, id="aligned",
        ),
        pytest.param(  # holes of 192 (A's) and 128 (C's) bytes: E takes C's, F then fits A's
            {"A": 192, "B": 64, "C": 128, "D": 64, "E": 128, "F": 192},
            [["A", "B", "C", "D"], ["B", "D", "E", "F"]],
            {"A": 0, "B": 192, "C": 256, "D": 384, "E": 256, "F": 0}, 448, id="best-fit",
        ),
        pytest.param(  # B's hole ends at the top: C grows it instead of starting above it
            {"A": 64, "B": 64, "C": 128}, [["A", "B"], ["A", "C"]],
            {"A": 0, "B": 64, "C": 64}, 192, id="grow-the-top-hole",
        ),
        pytest.param(  # freed neighbours merge into one hole that fits a bigger buffer
            {"A": 64, "B": 64, "K": 64, "C": 128}, [["A", "B", "K"], ["K", "C"]],
            {"A": 0, "B": 64, "K": 128, "C": 0}, 192, id="merge-holes",
        ),
        pytest.param(  # an empty tensor still gets its own address
            {"z": 0, "a": 100}, [["z", "a"]], {"z": 0, "a": 64}, 192, id="zero-size",
        ),
        pytest.param(  # names the plan does not own (inputs, params) take no workspace
            {"a": 64}, [["x"], ["x", "a"], ["a", "w", "y"]], {"a": 0}, 64, id="foreign-names",
        ),
        pytest.param({}, [], {}, 0, id="empty"),
    ],
)  # fmt: skip
def test_plan(sizes, calls, expected, total):
    offsets, got_total = plan_workspace(sizes, calls)
    assert (offsets, got_total) == (expected, total)
    check_plan(sizes, calls, offsets, got_total)


def test_a_buffer_lives_until_its_last_call():
    """`a` is read again in call 2: `b`, born in call 1, cannot take its bytes."""
    sizes = {"a": 64, "b": 64, "c": 64}
    calls = [["a"], ["b"], ["a", "c"]]
    offsets, total = plan_workspace(sizes, calls)
    assert offsets == {"a": 0, "b": 64, "c": 64} and total == 128


@st.composite
def call_sequences(draw):
    names = [f"b{i}" for i in range(draw(st.integers(1, 8)))]
    sizes = {n: draw(st.integers(0, 300)) for n in names}
    pool = st.sampled_from([*names, "input", "param"])
    calls = draw(st.lists(st.lists(pool, min_size=1, max_size=4), min_size=1, max_size=10))
    return sizes, calls


@settings(max_examples=300, deadline=None, derandomize=True)
@given(case=call_sequences())
def test_plan_invariants(case):
    sizes, calls = case
    offsets, total = plan_workspace(sizes, calls)
    check_plan(sizes, calls, offsets, total)
    assert total <= sum(aligned(sizes[n]) for n in offsets)


def chain_graph():
    """x -> Exp -> Neg -> Sigmoid -> Tanh -> y: three 1,600-byte intermediates."""
    ops = ["Exp", "Neg", "Sigmoid", "Tanh"]
    names = ["x", "t1", "t2", "t3", "y"]
    nodes = [node(op, [a], b) for op, a, b in zip(ops, names, names[1:])]
    return graph_of({"x": (4, 100)}, nodes, ["y"])


def conv_chain_graph():
    """Four 1x1 convs with ReLU epilogues: r1 and r3 may share bytes."""
    w = (np.random.default_rng(1).standard_normal((4, 4, 1, 1)) * 0.5).astype(np.float32)
    nodes, tensor = [], "x"
    for i in range(1, 5):
        nodes += [conv1x1(tensor, "w", f"c{i}"), node("Relu", [f"c{i}"], f"r{i}")]
        tensor = f"r{i}"
    return graph_of({"x": (1, 4, 8, 8)}, nodes, ["r4"], {"w": w})


@pytest.mark.parametrize("size", [(5, 7), (13, 13), (3, 37)])
def test_pointwise_conv_reads_an_intermediate_past_its_end_in_place(size):
    """A 1x1 conv whose last register tiles run past the input's last plane reads an
    intermediate where it is (the workspace is padded by what was granted) and copies a graph
    input (the caller allocated it exactly)."""
    w = (np.random.default_rng(2).standard_normal((8, 4, 1, 1)) * 0.5).astype(np.float32)
    nodes = [conv1x1("x", "w", "c1"), node("Relu", ["c1"], "r1")]
    nodes += [conv1x1("r1", "v", "c2"), node("Relu", ["c2"], "r2")]
    v = (np.random.default_rng(3).standard_normal((4, 8, 1, 1)) * 0.5).astype(np.float32)
    graph = graph_of({"x": (1, 4, *size)}, nodes, ["r2"], {"w": w, "v": v})
    inputs = random_inputs(graph)
    lowered = lower_graph(graph)
    program = lowered.program
    kernels = [c.kernel for c in program.calls]
    assert kernels == ["c1_conv_input", "c1_conv", "c2_conv"]  # x copied, r1 read in place
    r1 = program.buffers["r1"]
    assert 0 < program.workspace_bytes - (r1.offset + 8 * size[0] * size[1] * 4) <= 2048
    (got,) = run_native(lowered, inputs)
    np.testing.assert_allclose(got, run_reference(graph, inputs)["r2"], rtol=1e-5, atol=1e-5)


def test_unfused_chain_reuses_the_first_intermediate():
    graph = chain_graph()
    lowered = lower_graph(graph, fuse=False)
    program = lowered.program
    assert (program.workspace_bytes, program.naive_bytes) == (2 * 1600, 3 * 1600)
    offsets = {lowered.tensor_of[b.name]: b.offset for b in program.buffers.values()
               if b.storage == "workspace"}  # fmt: skip
    assert offsets["t1"] == offsets["t3"] != offsets["t2"]
    inputs = random_inputs(graph)
    (got,) = run_program(lowered, inputs)
    np.testing.assert_allclose(got, run_reference(graph, inputs)["y"], rtol=1e-6, atol=1e-6)


def test_conv_chain_reuses_the_first_intermediate():
    graph = conv_chain_graph()
    inputs = random_inputs(graph)
    want = run_reference(graph, inputs)["r4"]
    lowered = lower_graph(graph)
    program = lowered.program
    assert [c.node for c in program.calls] == [f"c{i}+Relu" for i in range(1, 5)]
    assert (program.workspace_bytes, program.naive_bytes) == (2 * 1024, 3 * 1024)
    offsets = {b.name: b.offset for b in program.buffers.values() if b.storage == "workspace"}
    assert offsets == {"r1": 0, "r2": 1024, "r3": 0}
    (got,) = run_native(lowered, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Interpreted, each conv first copies its input into a temp: more buffers, same reuse.
    lowered = lower_for_interpreter(graph)
    assert 0 < lowered.program.workspace_bytes < lowered.program.naive_bytes
    (got,) = run_program(lowered, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
