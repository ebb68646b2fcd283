"""Attention (opsets 23-25), decomposed by its converter, compiled whole and run against
onnxruntime, or onnx's reference evaluator where onnxruntime lacks a feature or strays from the
spec; errors a model can cause name the node.

Tolerances: float32 rtol 1e-5/atol 1e-6 over two reassociated dot products and a softmax;
float16 rtol/atol 2e-3 (a few half-precision ulps: tvmc accumulates MatMul in float32).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.frontend.decompositions import (
    assert_outputs_close,
    imported,
    model_of,
    run_compiled,
    run_cuda_interpreted,
    run_oracle,
)
from tvmc.errors import ModelError, UnsupportedModelError

F32 = (1e-5, 1e-6)
F16 = (2e-3, 2e-3)


def qkv(rng, q, k, v, dtype=np.float32) -> dict[str, np.ndarray]:
    """Q, K, V of the given shapes."""
    return {n: rng.standard_normal(s).astype(dtype) for n, s in (("Q", q), ("K", k), ("V", v))}


def check(inputs, attrs, opset=23, num_outputs=1, order=None, onnxruntime=True, tol=F32):
    """Compiled Attention against the oracle."""
    model = model_of("Attention", inputs, attrs, opset, num_outputs, order)
    assert_outputs_close(run_compiled(model, inputs), run_oracle(model, inputs, onnxruntime), *tol)


# ---- against onnxruntime -------------------------------------------------------------------------
CASES = {  # name: (Q, K, V shapes, attrs)
    "4d": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), {}),
    "4d_causal_scaled": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), {"is_causal": 1, "scale": 0.3}),
    "4d_gqa_causal": ((1, 6, 5, 8), (1, 2, 5, 8), (1, 2, 5, 4), {"is_causal": 1}),
    "3d_mha": ((2, 4, 24), (2, 6, 24), (2, 6, 24), {"q_num_heads": 3, "kv_num_heads": 3}),
    "3d_gqa_softcap": ((2, 4, 32), (2, 6, 16), (2, 6, 12),
                       {"q_num_heads": 4, "kv_num_heads": 2, "softcap": 2.0}),
    "3d_mqa_causal": ((1, 3, 32), (1, 7, 8), (1, 7, 8),
                      {"q_num_heads": 4, "kv_num_heads": 1, "is_causal": 1}),
}  # fmt: skip


@pytest.mark.parametrize("opset", [23, 24])
@pytest.mark.parametrize("name", sorted(CASES))
def test_attention(name, opset, rng):
    q, k, v, attrs = CASES[name]
    check(qkv(rng, q, k, v), attrs, opset)


@pytest.mark.parametrize(
    "mask",
    [
        np.array([[1, 1, 0, 1, 0, 1]] * 4, bool),
        (np.arange(24.0).reshape(4, 6) % 3 * -2).astype(np.float32),
    ],
    ids=["bool_2d", "float_2d"],
)
def test_attention_masks(mask, rng):
    inputs = {**qkv(rng, (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8)), "mask": mask}
    check(inputs, {}, num_outputs=4)


@pytest.mark.parametrize("mode", [0, 1, 3])
def test_qk_matmul_output_modes_with_a_cache(mode, rng):
    """present_key/value are past ++ new; output 3 is the raw, soft-capped or softmaxed scores."""
    inputs = {**qkv(rng, (2, 3, 4, 8), (2, 3, 2, 8), (2, 3, 2, 8)),
              "mask": rng.standard_normal((2, 1, 4, 5)).astype(np.float32),
              "past_key": rng.standard_normal((2, 3, 3, 8)).astype(np.float32),
              "past_value": rng.standard_normal((2, 3, 3, 8)).astype(np.float32)}  # fmt: skip
    check(inputs, {"qk_matmul_output_mode": mode, "softcap": 1.5}, num_outputs=4)


def test_float16_causal_with_a_bool_mask(rng):
    inputs = {**qkv(rng, (1, 4, 6, 16), (1, 2, 6, 16), (1, 2, 6, 16), np.float16),
              "mask": rng.random((6, 6)) < 0.7}  # fmt: skip
    check(inputs, {"is_causal": 1}, tol=F16)


# ---- against onnx's reference evaluator ----------------------------------------------------------
def test_float64_and_softmax_precision(rng):
    """onnxruntime has no float64 Attention, nor softmax_precision above the input's type."""
    check(qkv(rng, (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), np.float64), {"is_causal": 1},
          onnxruntime=False)  # fmt: skip
    check(qkv(rng, (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)),
          {"softmax_precision": 11, "qk_matmul_output_mode": 3}, num_outputs=4,
          onnxruntime=False)  # fmt: skip


def test_a_short_mask_pads_keys_out_and_causal_bias_is_output_2(rng):
    """A mask shorter than the keys masks the rest (onnxruntime refuses it); mode 2 shows -inf
    where the causal bias masks (onnxruntime shows a finite stand-in)."""
    inputs = {**qkv(rng, (1, 2, 3, 4), (1, 2, 2, 4), (1, 2, 2, 4)),
              "mask": rng.standard_normal((1, 1, 3, 4)).astype(np.float32),
              "past_key": rng.standard_normal((1, 2, 3, 4)).astype(np.float32),
              "past_value": rng.standard_normal((1, 2, 3, 4)).astype(np.float32)}  # fmt: skip
    check(inputs, {"is_causal": 1, "qk_matmul_output_mode": 2}, num_outputs=4, onnxruntime=False)


def test_fully_masked_rows_are_zero_not_nan(rng):
    mask = np.array([[True, True, False], [False, False, False]])
    inputs = {**qkv(rng, (1, 2, 2, 4), (1, 2, 3, 4), (1, 2, 3, 4)), "mask": mask}
    model = model_of("Attention", inputs, {"qk_matmul_output_mode": 3}, 24, 4)
    y, _, _, probs = run_compiled(model, inputs)
    assert not np.isnan(y).any() and (y[:, :, 1] == 0).all() and (probs[:, :, 1] == 0).all()
    assert_outputs_close([y, probs], [run_oracle(model, inputs, False)[i] for i in (0, 3)], *F32)


@pytest.mark.parametrize(
    "attrs", [{}, {"is_causal": 1}, {"is_causal": 1, "left_window_size": 1},
              {"left_window_size": 1}, {"left_window_size": 2, "right_window_size": 0}],
    ids=["padding", "causal", "causal_window", "left_window", "window"])  # fmt: skip
def test_nonpad_kv_seqlen_is_a_run_time_input(attrs, rng):
    """Per-batch valid lengths (opsets 24/25) mask padding keys and move the causal frontier."""
    inputs = {**qkv(rng, (3, 2, 2, 4), (3, 2, 6, 4), (3, 2, 6, 4)),
              "lengths": np.array([6, 3, 1], np.int64)}  # fmt: skip
    order = ["Q", "K", "V", "", "", "", "lengths"]
    check(inputs, attrs, opset=25, order=order, onnxruntime=False)
    graph = imported(model_of("Attention", inputs, attrs, 25, 1, order))
    assert "lengths" in graph.inputs  # not bound: the mask is computed at run time


@pytest.mark.parametrize("window", [(2, -1), (1, 2), (-1, 0)])
def test_sliding_window_with_a_cache(window, rng):
    inputs = {**qkv(rng, (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)),
              "past_key": rng.standard_normal((1, 2, 4, 4)).astype(np.float32),
              "past_value": rng.standard_normal((1, 2, 4, 4)).astype(np.float32)}  # fmt: skip
    attrs = {"left_window_size": window[0], "right_window_size": window[1]}
    check(inputs, attrs, opset=25, num_outputs=3, order=["Q", "K", "V", "", "past_key",
          "past_value"], onnxruntime=False)  # fmt: skip


# ---- the decomposition -------------------------------------------------------------------------
def test_causal_masks_fold_and_gqa_shares_kv_heads(rng):
    """A causal mask is a constant bias; GQA groups query heads instead of repeating K/V."""
    inputs = qkv(rng, (1, 6, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8))
    graph = imported(model_of("Attention", inputs, {"is_causal": 1}, 23))
    ops = [n.op for n in graph.nodes]
    assert ops.count("MatMul") == 2 and "Softmax" in ops
    assert not {"Where", "Less", "Expand", "Tile", "ReduceMax"} & set(ops)
    matmul = next(n for n in graph.nodes if n.op == "MatMul")
    assert graph.types[matmul.outputs[0]].shape == (1, 2, 15, 5)  # 3 query heads per KV head


def test_gqa_causal_mask_on_the_cuda_schedules(rng):
    inputs = {**qkv(rng, (1, 5, 16), (1, 5, 8), (1, 5, 8)),
              "mask": rng.random((5, 5)) < 0.8}  # fmt: skip
    attrs = {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1, "softcap": 3.0}
    model = model_of("Attention", inputs, attrs, 23)
    assert_outputs_close(run_cuda_interpreted(model, inputs), run_oracle(model, inputs), 1e-4, 1e-5)


# ---- errors ------------------------------------------------------------------------------------
BAD = {  # name: (attrs, inputs' shapes, expected error, message)
    "3d_without_heads": ({}, (2, 4, 8), ModelError, "q_num_heads"),
    "heads_do_not_divide": ({"q_num_heads": 3, "kv_num_heads": 2}, (2, 4, 12), ModelError,
                            "multiple"),
    "mode": ({"qk_matmul_output_mode": 4}, (1, 2, 3, 4), ModelError, "qk_matmul_output_mode"),
    "softcap": ({"softcap": -1.0}, (1, 2, 3, 4), ModelError, "softcap"),
    "window": ({"left_window_size": -2}, (1, 2, 3, 4), ModelError, "window"),
    "bfloat16_softmax": ({"softmax_precision": 16}, (1, 2, 3, 4), UnsupportedModelError,
                         "softmax_precision"),
    "heads_disagree": ({"q_num_heads": 3}, (1, 2, 3, 4), ModelError, "disagree"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors_name_the_node(name, rng):
    attrs, shape, error, message = BAD[name]
    model = model_of("Attention", qkv(rng, shape, shape, shape), attrs, 24)
    model.graph.node[0].name = "attn0"
    with pytest.raises(error, match=f"(?s)attn0.*{message}"):
        imported(model)


@pytest.mark.parametrize(
    "extra, order, message",
    [({"past_key": (1, 2, 3, 4)}, ["Q", "K", "V", "", "past_key"], "together"),
     ({"mask": (5, 3)}, ["Q", "K", "V", "mask"], "broadcast"),
     ({"lengths": (2,)}, ["Q", "K", "V", "", "", "", "lengths"], "nonpad_kv_seqlen")],
    ids=["past_alone", "mask_shape", "lengths_shape"])  # fmt: skip
def test_input_errors_name_the_node(extra, order, message, rng):
    inputs = {**qkv(rng, (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)),
              **{n: np.zeros(s, np.int64 if n == "lengths" else np.float32)
                 for n, s in extra.items()}}  # fmt: skip
    model = model_of("Attention", inputs, {}, 24, 1, order)
    model.graph.node[0].name = "attn0"
    with pytest.raises(ModelError, match=f"(?s)attn0.*{message}"):
        imported(model)


# ---- LinearAttention (onnxruntime has none: onnx's reference is the oracle) ------------------
def linear_inputs(rng, b, t, q_heads, kv_heads, dk, dv, decay=0, beta=0, past=False,
                  dtype=np.float32, state_dtype=np.float32):  # fmt: skip
    """query/key/value [b, t, heads*size]; decay (log space) and beta of the given widths."""
    inputs = {"query": rng.standard_normal((b, t, q_heads * dk)),
              "key": rng.standard_normal((b, t, kv_heads * dk)) / np.sqrt(dk),
              "value": rng.standard_normal((b, t, kv_heads * dv))}  # fmt: skip
    if past:
        inputs["past_state"] = rng.standard_normal((b, kv_heads, dk, dv)).astype(state_dtype)
    if decay:
        inputs["decay"] = -rng.uniform(0, 1, (b, t, decay))
    if beta:
        inputs["beta"] = rng.uniform(0, 1, (b, t, beta))
    return {n: x if n == "past_state" else x.astype(dtype) for n, x in inputs.items()}


LINEAR = {  # name: (attrs, linear_inputs arguments after rng)
    "linear": ({"update_rule": "linear"}, (2, 5, 2, 2, 4, 3)),
    "linear_past_gqa": ({"update_rule": "linear"}, (1, 3, 4, 2, 4, 4, 0, 0, True)),
    "gated_per_feature": ({"update_rule": "gated"}, (2, 4, 2, 2, 4, 4, 8)),
    "gated_per_head": ({"update_rule": "gated"}, (1, 4, 2, 2, 4, 4, 2)),
    "delta_one_beta": ({"update_rule": "delta"}, (2, 4, 2, 2, 4, 4, 0, 1)),
    "gated_delta_mqa": ({}, (1, 6, 4, 1, 4, 2, 4, 1, True)),
    "gated_delta_decode": ({"scale": 0.5}, (2, 1, 2, 2, 8, 8, 16, 2, True)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_linear_attention(name, rng):
    attrs, args = LINEAR[name]
    inputs = linear_inputs(rng, *args)
    attrs = {"q_num_heads": args[2], "kv_num_heads": args[3], **attrs}
    order = ["query", "key", "value"] + [n if n in inputs else "" for n in
                                         ("past_state", "decay", "beta")]  # fmt: skip
    check_linear(inputs, attrs, order)


def check_linear(inputs, attrs, order, tol=F32, cuda=False):
    model = model_of("LinearAttention", inputs, attrs, 27, 2, order)
    run = run_cuda_interpreted if cuda else run_compiled
    assert_outputs_close(run(model, inputs), run_oracle(model, inputs, False), *tol)


def test_linear_attention_float16_with_a_float32_state(rng):
    """Activations in float16, the state in float32: the recurrence runs in float32."""
    inputs = linear_inputs(rng, 1, 3, 2, 2, 4, 4, 8, 2, True, np.float16, np.float32)
    check_linear(inputs, {"q_num_heads": 2, "kv_num_heads": 2},
                 ["query", "key", "value", "past_state", "decay", "beta"], F16)  # fmt: skip


def test_linear_attention_on_the_cuda_schedules(rng):
    inputs = linear_inputs(rng, 1, 3, 4, 2, 4, 4, 8, 2, True)
    check_linear(
        inputs,
        {"q_num_heads": 4, "kv_num_heads": 2},
        ["query", "key", "value", "past_state", "decay", "beta"],
        (1e-4, 1e-5),
        True,
    )


@pytest.mark.parametrize(
    "attrs, args, message",
    [({"update_rule": "gated"}, (1, 2, 2, 2, 4, 4), "needs decay"),
     ({"update_rule": "linear"}, (1, 2, 2, 2, 4, 4, 0, 2), "forbids beta"),
     ({"update_rule": "rwkv"}, (1, 2, 2, 2, 4, 4), "update_rule"),
     ({"update_rule": "gated", "kv_num_heads": 3}, (1, 2, 2, 2, 4, 4, 8), "multiple"),
     ({"update_rule": "gated"}, (1, 2, 2, 2, 4, 4, 3), "decay must be")],
    ids=["decay_missing", "beta_extra", "rule", "heads", "decay_width"])  # fmt: skip
def test_linear_attention_errors_name_the_node(attrs, args, message, rng):
    inputs = linear_inputs(rng, *args)
    attrs = {"q_num_heads": 2, "kv_num_heads": 2, **attrs}
    order = ["query", "key", "value", "", *(n for n in ("decay", "beta") if n in inputs)]
    if "beta" in inputs and "decay" not in inputs:
        order = ["query", "key", "value", "", "", "beta"]
    model = model_of("LinearAttention", inputs, attrs, 27, 2, order)
    model.graph.node[0].name = "lin0"
    with pytest.raises(ModelError, match=f"(?s)lin0.*{message}"):
        imported(model)


def test_linear_attention_refuses_long_sequences(rng):
    inputs = linear_inputs(rng, 1, 300, 1, 1, 2, 2)
    model = model_of("LinearAttention", inputs, {"q_num_heads": 1, "kv_num_heads": 1,
                                                 "update_rule": "linear"}, 27, 2)  # fmt: skip
    with pytest.raises(UnsupportedModelError, match="300 tokens"):
        imported(model)
