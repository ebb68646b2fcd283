"""If, Loop and Scan inlined by the frontend, compiled and run, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.backend.node_cases import evaluate
from tests.lowering_helpers import run_graph_lowered
from tests.onnx_helpers import run_onnxruntime
from tvmc.errors import ModelError, NonConstantInputError, UnsupportedModelError
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def value(name, elem=FLOAT, shape=None):
    """A typed value_info (shape None: unknown)."""
    return helper.make_tensor_value_info(name, elem, shape)


def subgraph(name, nodes, inputs, outputs, initializers=()):
    """A body or branch; inputs as (name, element type, shape), outputs as (name, type)."""
    return helper.make_graph(
        nodes, name, [value(*i) for i in inputs], [value(n, e) for n, e in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers],
    )  # fmt: skip


def model_of(nodes, inputs, outputs, initializers=(), opset=17):
    """A main graph of float inputs (name, shape); outputs untyped."""
    graph = helper.make_graph(
        nodes, "main", [value(n, FLOAT, s) for n, s in inputs],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in initializers],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)  # what the installed onnxruntime reads
    return model


def compiled(model, feeds):
    """The model converted, compiled for llvm and run natively."""
    graph = run_passes(convert_model(model), IMPORT_PIPELINE, verify=True)
    results = evaluate(graph, feeds, compiled=True)
    return [results[o.name] for o in model.graph.output]


def cuda_interpreted(model, feeds):
    """The model lowered for CUDA and run by the kernel IR interpreter."""
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    outputs = run_graph_lowered(graph, feeds, target=LoweringTarget(kind="cuda"))
    return [outputs[o.name] for o in model.graph.output]


def check(model, feeds, runner=compiled):
    """`runner` against onnxruntime."""
    expected = run_onnxruntime(model, feeds)
    actual = runner(model, feeds)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


X = np.arange(6, dtype=np.float32).reshape(2, 3) / 7 - 0.3


# ---- If ----------------------------------------------------------------------------------------
def if_model(cond_nodes, cond_inits=()):
    """y, z = If(c): then (x + w, relu(x)), else (x * w, x - 1); w an outer initializer, the
    branches' tensors named like the main graph's (renaming keeps them apart)."""
    then = subgraph("then", [helper.make_node("Add", ["x", "w"], ["y"]),
                             helper.make_node("Relu", ["x"], ["t"])],
                    [], [("y", FLOAT), ("t", FLOAT)])  # fmt: skip
    one = [("one", np.ones((), np.float32))]
    otherwise = subgraph("else", [helper.make_node("Mul", ["x", "w"], ["y"]),
                                  helper.make_node("Sub", ["x", "one"], ["t"])],
                         [], [("y", FLOAT), ("t", FLOAT)], one)  # fmt: skip
    node = helper.make_node("If", ["c"], ["y", "z"], then_branch=then, else_branch=otherwise)
    w = np.array([0.5, -1.0, 2.0], np.float32)
    return model_of([*cond_nodes, node], [("x", [2, 3])], ["y", "z"], [("w", w), *cond_inits])


@pytest.mark.parametrize("taken", [True, False])
def test_if_with_a_constant_condition_inlines_its_branch(taken):
    model = if_model([], [("c", np.array(taken))])
    check(model, {"x": X})
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    assert {n.op for n in graph.nodes} == ({"Add", "Relu"} if taken else {"Mul", "Sub"})


def test_if_condition_folded_from_shapes():
    """A condition computed from static shapes folds at import: Shape -> Gather -> Greater."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Greater", ["n", "one_i"], ["c"])]  # fmt: skip
    inits = [("zero", np.array(0, np.int64)), ("one_i", np.array(1, np.int64))]
    check(if_model(nodes, inits), {"x": X})


def test_if_on_a_runtime_condition_is_refused():
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"])]  # fmt: skip
    model = if_model(nodes, [("zero", np.array(0, np.float32))])
    with pytest.raises(NonConstantInputError, match="If node.*condition.*constant") as info:
        convert_model(model)
    assert info.value.tensor == "c"


# ---- Loop --------------------------------------------------------------------------------------
def loop_body(extra_nodes=(), cond_out="cond_in", iteration="i_f"):
    """acc += x * i + b (x outer, b a body initializer); scans acc (negated by a nested If when
    i == 2) and `iteration` (the float i by default)."""
    nested = subgraph("pick", [helper.make_node("Neg", ["acc_out"], ["flip"])], [],
                      [("flip", FLOAT)])  # fmt: skip
    keep = subgraph("keep", [helper.make_node("Identity", ["acc_out"], ["same"])], [],
                    [("same", FLOAT)])  # fmt: skip
    nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=FLOAT),
        helper.make_node("Mul", ["x", "i_f"], ["scaled"]),
        helper.make_node("Add", ["acc", "scaled"], ["partial"]),
        helper.make_node("Add", ["partial", "b"], ["acc_out"]),
        helper.make_node("Equal", ["i", "two"], ["is_two"]),
        helper.make_node("If", ["is_two"], ["scan_acc"], then_branch=nested, else_branch=keep),
        *extra_nodes,
        helper.make_node("Identity", [cond_out], ["cond_next"]),
    ]
    inits = [("b", np.full((3,), 0.25, np.float32)), ("two", np.array(2, np.int64))]
    return subgraph("body", nodes, [("i", INT64, []), ("cond_in", BOOL, []), ("acc", FLOAT, [3])],
                    [("cond_next", BOOL), ("acc_out", FLOAT), ("scan_acc", FLOAT),
                     (iteration, INT64 if iteration == "i" else FLOAT)],
                    inits)  # fmt: skip


def loop_model(trips, cond=True, body=None, opset=17):
    """Loop(M=trips, cond) over `body` (default loop_body()); None leaves an input out."""
    inputs = ["M" if trips is not None else "", "cond" if cond is not None else "", "acc0"]
    node = helper.make_node("Loop", inputs, ["acc", "scans", "iters"], body=body or loop_body())
    inits = [("acc0", np.zeros(3, np.float32))]
    inits += [("M", np.array(trips, np.int64))] if trips is not None else []
    inits += [("cond", np.array(cond))] if cond is not None else []
    return model_of([node], [("x", [2, 3])], ["acc", "scans", "iters"], inits, opset)


@pytest.mark.parametrize("trips", [1, 4])
def test_loop_with_a_constant_trip_count_unrolls(trips):
    check(loop_model(trips), {"x": X})


def test_loop_scans_the_iteration_number():
    """The iteration number itself as a scan output: 0, 1, 2 (onnxruntime 1.32 gives its last
    value for every iteration: it aliases the one buffer)."""
    model = loop_model(3, body=loop_body(iteration="i"))
    assert compiled(model, {"x": X})[2].tolist() == [0, 1, 2]


def test_loop_whose_condition_folds_to_false_stops():
    """cond_out = i < 2 folds each iteration: three iterations of at most ten, or no M at all."""
    less = [helper.make_node("Less", ["i", "two"], ["going"])]
    for trips in (10, None):
        check(loop_model(trips, body=loop_body(less, "going")), {"x": X})


def test_loop_cuda_lowering_interpreted():
    check(loop_model(3), {"x": X}, runner=cuda_interpreted)


def test_loop_that_never_runs_passes_its_initial_values():
    body = subgraph("body", [helper.make_node("Identity", ["cond_in"], ["c"]),
                             helper.make_node("Add", ["acc", "x"], ["a"])],
                    [("i", INT64, []), ("cond_in", BOOL, []), ("acc", FLOAT, [2, 3])],
                    [("c", BOOL), ("a", FLOAT)])  # fmt: skip
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc"], body=body)
    inits = [("M", np.array(0, np.int64)), ("acc0", np.ones((2, 3), np.float32))]
    check(model_of([node], [("x", [2, 3])], ["acc"], inits), {"x": X})


def test_loop_refusals_say_why():
    with pytest.raises(UnsupportedModelError, match="runs no iteration.*scan outputs"):
        convert_model(loop_model(0))
    runtime_cond = [helper.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
                    helper.make_node("Less", ["s", "b_big"], ["going"])]  # fmt: skip
    body = loop_body(runtime_cond, "going")
    body.initializer.append(numpy_helper.from_array(np.array(9, np.float32), "b_big"))
    with pytest.raises(UnsupportedModelError, match="condition depends on run-time values"):
        convert_model(loop_model(5, body=body))


def test_loop_unrolled_size_is_bounded(monkeypatch):
    """Known at once when the condition passes through; else when the copies reach the limit."""
    with pytest.raises(UnsupportedModelError, match="no trip count.*stays true.*never ends"):
        convert_model(loop_model(None))
    with pytest.raises(UnsupportedModelError, match=r"unrolling 100000 iterations .*than 10000"):
        convert_model(loop_model(100_000))
    monkeypatch.setattr("tvmc.frontend.converters.subgraph.MAX_UNROLLED_NODES", 200)
    always = [helper.make_node("GreaterOrEqual", ["i", "two"], ["late"]),
              helper.make_node("Not", ["late"], ["early"]),
              helper.make_node("Or", ["late", "early"], ["going"])]  # fmt: skip
    with pytest.raises(UnsupportedModelError, match="unrolling its subgraphs .*than 200"):
        convert_model(loop_model(None, body=loop_body(always, "going")))


def test_loop_trip_count_from_an_input_must_be_constant():
    model = loop_model(3)
    model.graph.initializer.pop(1)  # M becomes a runtime input
    model.graph.input.append(value("M", INT64, []))
    with pytest.raises(NonConstantInputError, match="Loop node.*trip count.*unrolls loops"):
        convert_model(model)


def test_loop_body_reading_an_undefined_name_names_it():
    body = loop_body([helper.make_node("Add", ["acc", "nowhere"], ["unused"])])
    with pytest.raises(ModelError, match=r"Add node.*reads \['nowhere'\]"):
        convert_model(loop_model(2, body=body))


# ---- Scan --------------------------------------------------------------------------------------
def scan_body():
    """state += row * w; out = state * 2; a second state counts steps."""
    nodes = [helper.make_node("Mul", ["row", "w"], ["weighted"]),
             helper.make_node("Add", ["state", "weighted"], ["state_out"]),
             helper.make_node("Add", ["count", "one"], ["count_out"]),
             helper.make_node("Mul", ["state_out", "two"], ["out"])]  # fmt: skip
    inits = [("one", np.ones((), np.float32)), ("two", np.full((), 2, np.float32))]
    inputs = [("state", FLOAT, [3]), ("count", FLOAT, []), ("row", FLOAT, [3])]
    outputs = [("state_out", FLOAT), ("count_out", FLOAT), ("out", FLOAT)]
    return subgraph("scan_body", nodes, inputs, outputs, inits)


@pytest.mark.parametrize(
    "attrs",
    [{}, {"scan_input_axes": [1], "scan_input_directions": [1]},
     {"scan_input_directions": [1], "scan_output_axes": [-1], "scan_output_directions": [1]}],
    ids=["defaults", "axis1-reverse", "reversed-output-last-axis"],
)  # fmt: skip
def test_scan_unrolls_over_its_static_length(attrs):
    shape = [4, 3] if attrs.get("scan_input_axes") != [1] else [3, 4]
    node = helper.make_node("Scan", ["s0", "c0", "x"], ["s", "c", "ys"], body=scan_body(),
                            num_scan_inputs=1, **attrs)  # fmt: skip
    w = np.array([1.0, -2.0, 0.5], np.float32)
    inits = [("s0", np.zeros(3, np.float32)), ("c0", np.zeros((), np.float32)), ("w", w)]
    model = model_of([node], [("x", shape)], ["s", "c", "ys"], inits)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(shape)
    check(model, {"x": x})


def test_scan_8_runs_per_batch_entry():
    node = helper.make_node("Scan", ["", "s0", "c0", "x"], ["s", "c", "ys"], body=scan_body(),
                            num_scan_inputs=1, directions=[1])  # fmt: skip
    w = np.array([1.0, -2.0, 0.5], np.float32)
    inits = [("s0", np.zeros((2, 3), np.float32)), ("c0", np.zeros(2, np.float32)), ("w", w)]
    model = model_of([node], [("x", [2, 4, 3])], ["s", "c", "ys"], inits, opset=8)
    check(model, {"x": np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 4, 3)})
