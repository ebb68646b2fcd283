"""match_decomposed_norms: the exporters' decomposed LayerNorm and RMSNorm become one op each,
and only when the pattern computes what the op does; results stay onnxruntime's."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.passes.checks import apply_and_compare
from tests.passes.test_fold_batch_norm import make_model
from tvmc.passes import match_decomposed_norms

SHAPE = (2, 5, 16)  # normalized over the last dim
# The matched op sums in another order than the elementwise chain (and onnxruntime): a few ulps.
TOL = {"rtol": 1e-5, "atol": 1e-5}


def reduce_mean(x, out, opset, axes=(-1,)):
    """ReduceMean over `axes`, keepdims: an attribute before opset 18, an input from it."""
    if opset >= 18:
        return [helper.make_node("ReduceMean", [x, "axes_" + out], [out], keepdims=1)], {
            "axes_" + out: np.array(axes, np.int64)
        }
    return [helper.make_node("ReduceMean", [x], [out], axes=list(axes), keepdims=1)], {}


def layer_norm_nodes(opset, square="Pow", divide="Div", gamma=True, beta=True, axes=(-1,)):
    """x -> (x - mean) / sqrt(mean((x - mean)**2) + eps) [* gamma] [+ beta] as exporters write
    it; the output is `y`."""
    params = {"eps": np.array(1e-5, np.float32), "two": np.array(2, np.float32)}
    nodes, means = reduce_mean("x", "mean", opset, axes)
    params.update(means)
    nodes.append(helper.make_node("Sub", ["x", "mean"], ["d"]))
    if square == "Pow":
        nodes.append(helper.make_node("Pow", ["d", "two"], ["sq"]))
    else:
        nodes.append(helper.make_node("Mul", ["d", "d"], ["sq"]))
    n, p = reduce_mean("sq", "var", opset, axes)
    nodes += n
    params.update(p)
    nodes += [
        helper.make_node("Add", ["eps", "var"], ["v"]),
        helper.make_node("Sqrt", ["v"], ["std"]),
    ]
    if divide == "Div":
        nodes.append(helper.make_node("Div", ["d", "std"], ["n"]))
    else:
        nodes += [helper.make_node("Reciprocal", ["std"], ["inv"]),
                  helper.make_node("Mul", ["inv", "d"], ["n"])]  # fmt: skip
    last = "n"
    rng = np.random.default_rng(3)
    if gamma:
        params["gamma"] = rng.standard_normal(SHAPE[-1]).astype(np.float32)
        nodes.append(helper.make_node("Mul", ["gamma", last], ["g"]))
        last = "g"
    if beta:
        params["beta"] = rng.standard_normal((1, 1, SHAPE[-1])).astype(np.float32)
        nodes.append(helper.make_node("Add", [last, "beta"], ["b"]))
        last = "b"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    return nodes, params


def rms_norm_nodes(divide="Reciprocal", weight=True):
    """x * 1/sqrt(mean(x**2) + eps) * weight (T5, Llama), or x / sqrt(...)."""
    params = {"eps": np.array(1e-6, np.float32), "two": np.array(2, np.float32)}
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"])]
    n, _ = reduce_mean("sq", "ms", 17)
    nodes += [
        *n,
        helper.make_node("Add", ["ms", "eps"], ["v"]),
        helper.make_node("Sqrt", ["v"], ["r"]),
    ]
    if divide == "Reciprocal":
        nodes += [helper.make_node("Reciprocal", ["r"], ["inv"]),
                  helper.make_node("Mul", ["x", "inv"], ["n"])]  # fmt: skip
    else:
        nodes.append(helper.make_node("Div", ["x", "r"], ["n"]))
    last = "n"
    if weight:
        params["w"] = np.random.default_rng(4).standard_normal(SHAPE[-1]).astype(np.float32)
        nodes.append(helper.make_node("Mul", ["w", "n"], ["wn"]))
        last = "wn"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    return nodes, params


def check(nodes, params, expect_ops, outputs=("y",), opset=17):
    """Match, verify, compare the op counts and results against the unmatched graph and
    onnxruntime."""
    x = (np.random.default_rng(0).standard_normal(SHAPE) * 3 + 1).astype(np.float32)
    model = make_model(nodes, {"x": x}, list(outputs), params, opset=opset)
    matched = apply_and_compare(model, {"x": x}, match_decomposed_norms, TOL)
    assert {k: v for k, v in matched.op_counts().items() if k != "Identity"} == expect_ops
    return matched


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("square", ["Pow", "Mul"])
@pytest.mark.parametrize("divide", ["Div", "Reciprocal"])
def test_layer_norm_forms_become_one_op(opset, square, divide):
    nodes, params = layer_norm_nodes(opset, square, divide)
    graph = check(nodes, params, {"LayerNormalization": 1}, opset=opset)
    (norm,) = [n for n in graph.nodes if n.op == "LayerNormalization"]
    assert norm.attrs["axis"] == 2 and norm.attrs["epsilon"] == pytest.approx(1e-5)
    assert graph.types[norm.inputs[2]].shape == (16,)  # beta (1, 1, 16) took the row's rank


def test_layer_norm_without_gamma_and_beta_gets_a_scale_of_ones():
    nodes, params = layer_norm_nodes(17, gamma=False, beta=False)
    check(nodes, params, {"LayerNormalization": 1})


@pytest.mark.parametrize("divide", ["Reciprocal", "Div"])
@pytest.mark.parametrize("weight", [True, False])
def test_rms_norm_forms_become_one_op(divide, weight):
    nodes, params = rms_norm_nodes(divide, weight)
    graph = check(nodes, params, {"RMSNormalization": 1})
    (norm,) = [n for n in graph.nodes if n.op == "RMSNormalization"]
    assert norm.attrs["epsilon"] == pytest.approx(1e-6)


def test_a_statistic_read_elsewhere_keeps_the_pattern():
    """The variance is a graph output too: the chain must stay (the op would not make it)."""
    nodes, params = layer_norm_nodes(17)
    graph = check(nodes, params, {"Add": 2, "Mul": 1, "ReduceMean": 2, "Sub": 1, "Pow": 1,
                                  "Sqrt": 1, "Div": 1}, outputs=("y", "var"))  # fmt: skip
    assert "LayerNormalization" not in graph.op_counts()


def test_statistics_over_a_leading_axis_are_no_layer_norm():
    nodes, params = layer_norm_nodes(17, axes=(1,))
    check(nodes, params, {"Add": 2, "Mul": 1, "ReduceMean": 2, "Sub": 1, "Pow": 1,
                          "Sqrt": 1, "Div": 1})  # fmt: skip


def test_a_gamma_along_another_axis_stays_a_mul():
    """gamma of shape (5, 1) scales positions, not the row: the norm matches, the Mul stays."""
    nodes, params = layer_norm_nodes(17, beta=False)
    params["gamma"] = np.arange(1, 6, dtype=np.float32).reshape(5, 1)
    check(nodes, params, {"LayerNormalization": 1, "Mul": 1})
