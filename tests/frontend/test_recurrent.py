"""RNN, GRU and LSTM unrolled by the frontend, compiled and run, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.backend.node_cases import evaluate
from tests.lowering_helpers import run_graph_lowered
from tests.onnx_helpers import run_onnxruntime, single_node_model
from tvmc.errors import ModelError, NonConstantInputError, UnsupportedModelError
from tvmc.frontend import convert_model
from tvmc.frontend.converters.recurrent import ACTIVATIONS
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
OUTPUTS = {"RNN": 2, "GRU": 2, "LSTM": 3}
INPUT_NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def recurrent_case(op, steps=3, batch=2, features=4, hidden=3, *, direction="forward",
                   layout=0, bias=True, lengths=None, initial=False, peepholes=False,
                   weights_constant=True, outputs=None, opset=14, seed=0, **attrs):  # fmt: skip
    """(model, runtime inputs) of one recurrent node with random weights."""
    rng = np.random.default_rng(seed)
    count, gates = 2 if direction == "bidirectional" else 1, GATES[op] * hidden
    x_shape = (batch, steps, features) if layout else (steps, batch, features)
    state = (batch, count, hidden) if layout else (count, batch, hidden)
    values = {
        "X": rng.standard_normal(x_shape),
        "W": rng.standard_normal((count, gates, features)) * 0.5,
        "R": rng.standard_normal((count, gates, hidden)) * 0.5,
        "B": rng.standard_normal((count, 2 * gates)) * 0.5 if bias else None,
        "sequence_lens": None if lengths is None else np.array(lengths, np.int32),
        "initial_h": rng.standard_normal(state) if initial else None,
        "initial_c": rng.standard_normal(state) if initial and op == "LSTM" else None,
        "P": rng.standard_normal((count, 3 * hidden)) * 0.5 if peepholes else None,
    }
    values = {k: v if v is None or v.dtype.kind == "i" else v.astype(np.float32)
              for k, v in values.items()}  # fmt: skip
    order = [n if values[n] is not None else "" for n in INPUT_NAMES[: 5 + (op == "LSTM") * 3]]
    while order and not order[-1]:
        order.pop()
    runtime_names = {"X", "initial_h", "initial_c"}
    if not weights_constant:
        runtime_names |= {"W", "R", "B", "P"}
    runtime = {n: v for n, v in values.items() if v is not None and n in runtime_names}
    constants = {n: v for n, v in values.items() if v is not None and n not in runtime_names}
    attrs = {"hidden_size": hidden, "direction": direction, **attrs}
    if layout:
        attrs["layout"] = layout
    model = single_node_model(op, runtime, attrs, constants, OUTPUTS[op], opset, order)
    if outputs is not None:  # outputs asked for: '' drops one
        node = model.graph.node[0]
        del node.output[:]
        node.output.extend(outputs)
        del model.graph.output[:]
        model.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in outputs if o)
    return model, runtime


def compiled(model, feeds):
    """The model converted, compiled for llvm and run natively."""
    graph = run_passes(convert_model(model), IMPORT_PIPELINE, verify=True)
    results = evaluate(graph, feeds, compiled=True)
    return [results[o.name] for o in model.graph.output]


def batchwise_reference(op, **kwargs):
    """onnxruntime has no layout=1: the time-major twin (same weights) on transposed data."""
    kwargs = {k: v for k, v in kwargs.items() if k != "layout"}

    def run(model, feeds):
        twin, _ = recurrent_case(op, **kwargs)
        feeds = {n: np.swapaxes(v, 0, 1) if n in ("X", "initial_h", "initial_c") else v
                 for n, v in feeds.items()}  # fmt: skip
        perms = {"out0": (2, 0, 1, 3), "out1": (1, 0, 2), "out2": (1, 0, 2)}
        perms.update({"Y": perms["out0"], "Y_h": perms["out1"], "Y_c": perms["out2"]})
        outputs = run_onnxruntime(twin, feeds)
        names = [o.name for o in twin.graph.output]
        return [np.transpose(y, perms[n]) for n, y in zip(names, outputs)]

    return run


def check(model, feeds, rtol=1e-4, atol=1e-5, runner=compiled, reference=run_onnxruntime):
    """`runner` against `reference` (onnxruntime); float32 steps accumulate rounding."""
    expected = reference(model, feeds)
    actual = runner(model, feeds)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_with_initial_states(op, direction):
    check(*recurrent_case(op, direction=direction, initial=True))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_batchwise_layout_and_runtime_weights(op, direction):
    kwargs = {"direction": direction, "layout": 1, "initial": True, "weights_constant": False}
    check(*recurrent_case(op, **kwargs), reference=batchwise_reference(op, **kwargs))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens_mask_steps(op, direction):
    """Entries ending early hold their state and give 0 past their end; one runs no step (then
    its final state is the initial one; onnxruntime's LSTM alone gives 0 there)."""
    lengths = [2, 4, 1 if op == "LSTM" else 0]
    check(*recurrent_case(op, steps=4, batch=3, direction=direction, lengths=lengths, initial=True))


def test_sequence_lens_all_short_and_no_bias():
    """Every entry ends before the last step: the steps past them are not built."""
    check(*recurrent_case("LSTM", steps=4, lengths=[3, 1], bias=False))


@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("initial", [False, True])
def test_gru_linear_before_reset(lbr, initial):
    check(*recurrent_case("GRU", direction="bidirectional", initial=initial,
                          linear_before_reset=lbr))  # fmt: skip


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(op):
    check(*recurrent_case(op, direction="bidirectional", clip=0.4, initial=True))


@pytest.mark.parametrize("input_forget", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_peepholes_and_input_forget(input_forget, direction):
    case = recurrent_case("LSTM", direction=direction, peepholes=True, initial=True,
                          input_forget=input_forget, lengths=[3, 2])  # fmt: skip
    check(*case)


def _activation_attrs(name):
    alpha, beta = ACTIVATIONS[name]
    attrs = {"activations": [name]}
    if alpha is not None:
        attrs["activation_alpha"] = [0.7]
    if beta is not None:
        attrs["activation_beta"] = [0.3]
    return attrs


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_every_activation(name):
    """Each activation the spec lists, with alpha/beta given, on an RNN."""
    check(*recurrent_case("RNN", initial=True, **_activation_attrs(name)))


def test_activation_lists_and_their_parameters():
    """Per-direction lists; alpha/beta consumed in order by the functions that take them."""
    attrs = {"activations": ["HardSigmoid", "Relu", "LeakyRelu", "Sigmoid", "tanh", "elu"],
             "activation_alpha": [0.3, 0.2, 0.9], "activation_beta": [0.4]}  # fmt: skip
    check(*recurrent_case("LSTM", direction="bidirectional", initial=True, **attrs))
    gru = {"activations": ["Sigmoid", "Softsign", "HardSigmoid", "Affine"],
           "activation_alpha": [0.3, 0.8], "activation_beta": [0.4, 0.1]}  # fmt: skip
    check(*recurrent_case("GRU", direction="bidirectional", **gru))


@pytest.mark.parametrize(
    "outputs", [["Y"], ["", "Y_h"], ["Y", "", "Y_c"], ["", "", "Y_c"]], ids=str
)
def test_optional_outputs(outputs):
    kwargs = {"direction": "bidirectional", "layout": 1, "outputs": outputs}
    check(*recurrent_case("LSTM", **kwargs), reference=batchwise_reference("LSTM", **kwargs))


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_opset_7_and_one_step(op):
    check(*recurrent_case(op, steps=1, opset=7, initial=True))


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_cuda_lowering_interpreted(op):
    """The unrolled graph lowered for CUDA, run by the kernel IR interpreter with GPU semantics."""

    def cuda(model, feeds):
        graph = run_passes(convert_model(model), IMPORT_PIPELINE)
        outputs = run_graph_lowered(graph, feeds, target=LoweringTarget(kind="cuda"))
        return [outputs[o.name] for o in model.graph.output]

    case = recurrent_case(op, steps=2, direction="bidirectional", initial=True, lengths=[2, 1])
    check(*case, runner=cuda)


def test_the_input_projection_is_one_gemm_and_steps_add_one_each():
    model, _ = recurrent_case("LSTM", steps=5, direction="bidirectional", initial=True)
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    gemms = [n for n in graph.nodes if n.op == "Gemm"]
    assert len(gemms) == 1 + 5 * 2
    assert graph.types[gemms[0].outputs[0]].shape == (5 * 2, 2 * 4 * 3)


# ---- errors ------------------------------------------------------------------------------------
def test_runtime_sequence_lens_must_be_constant():
    model, feeds = recurrent_case("GRU", lengths=[3, 1])
    init = next(i for i in model.graph.initializer if i.name == "sequence_lens")
    model.graph.initializer.remove(init)
    model.graph.input.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [2]))
    with pytest.raises(NonConstantInputError, match="GRU node.*sequence_lens"):
        convert_model(model)


@pytest.mark.parametrize(
    "attrs, error, message",
    [
        ({"direction": "sideways"}, ModelError, "direction 'sideways'"),
        ({"layout": 2}, ModelError, "layout must be 0 or 1"),
        ({"hidden_size": 5}, ModelError, "W has shape"),
        ({"activations": ["Gelu"]}, UnsupportedModelError, "activation 'Gelu'"),
        ({"activations": ["Tanh", "Tanh"]}, ModelError, "2 activations"),
        ({"direction": "bidirectional", "activations": ["Relu"]}, ModelError, "1 activations"),
    ],
)
def test_bad_attributes_name_the_node(attrs, error, message):
    model, _ = recurrent_case("RNN", **{"direction": "forward", **attrs})
    with pytest.raises(error, match=f"RNN node.*{message}"):
        convert_model(model)


def test_bad_sequence_lens_and_too_long_sequences():
    model, _ = recurrent_case("RNN", lengths=[3, 4])
    with pytest.raises(ModelError, match=r"sequence_lens \[3, 4\] must hold"):
        convert_model(model)
    model, _ = recurrent_case("LSTM", steps=2000, batch=1, features=1, hidden=1)
    with pytest.raises(UnsupportedModelError, match="unrolling its sequence makes about"):
        convert_model(model)
