"""RotaryEmbedding, SwiGLU and CausalConvWithState, decomposed by their converters, compiled
whole and run against onnxruntime (RotaryEmbedding) or onnx's reference evaluator (onnxruntime
has no SwiGLU, opset 28, nor CausalConvWithState, opset 27); errors name the node.

Tolerances: float32 rtol 1e-5/atol 1e-6 (a few roundings per element); float16 1e-3.
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
F16 = (1e-3, 1e-3)


def check(op, inputs, attrs, opset, num_outputs=1, order=None, onnxruntime=True, tol=F32,
          cuda=False):  # fmt: skip
    """Compiled (or CUDA-interpreted) `op` against the oracle."""
    model = model_of(op, inputs, attrs, opset, num_outputs, order)
    run = run_cuda_interpreted if cuda else run_compiled
    assert_outputs_close(run(model, inputs), run_oracle(model, inputs, onnxruntime), *tol)


# ---- RotaryEmbedding ---------------------------------------------------------------------------
def rotary_inputs(rng, shape, half, positions, dtype=np.float32):
    """X, cos/sin caches of `half` angles (a table of 16 positions, or [B, S, half] without
    position_ids), position_ids."""
    b, s = shape[0], shape[-2] if len(shape) == 4 else shape[1]
    angles = rng.uniform(0, 6, (16, half) if positions else (b, s, half))
    inputs = {"x": rng.standard_normal(shape).astype(dtype),
              "cos": np.cos(angles).astype(dtype), "sin": np.sin(angles).astype(dtype)}  # fmt: skip
    if positions:
        inputs["positions"] = rng.integers(0, 16, (b, s)).astype(np.int64)
    return inputs


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 4])
@pytest.mark.parametrize("positions", [True, False], ids=["position_ids", "no_position_ids"])
def test_rotary_embedding_4d(interleaved, rotary_dim, positions, rng):
    half = (rotary_dim or 8) // 2
    inputs = rotary_inputs(rng, (2, 3, 5, 8), half, positions)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rotary_dim}
    check("RotaryEmbedding", inputs, attrs, 23)


@pytest.mark.parametrize("dtype, tol", [(np.float32, F32), (np.float16, F16)])
def test_rotary_embedding_3d(dtype, tol, rng):
    inputs = rotary_inputs(rng, (2, 5, 24), 3, True, dtype)
    check("RotaryEmbedding", inputs, {"num_heads": 4, "interleaved": 1}, 23, tol=tol)


def test_rotary_embedding_on_the_cuda_schedules(rng):
    inputs = rotary_inputs(rng, (1, 4, 32), 4, True)
    attrs = {"num_heads": 2, "rotary_embedding_dim": 8}
    check("RotaryEmbedding", inputs, attrs, 23, cuda=True)


@pytest.mark.parametrize(
    "shape, attrs, half, message",
    [((2, 5, 24), {}, 3, "num_heads"), ((2, 3, 5, 8), {"rotary_embedding_dim": 5}, 2, "even"),
     ((2, 3, 5, 8), {}, 3, "caches")],
    ids=["3d_without_heads", "odd_rotary_dim", "cache_width"])  # fmt: skip
def test_rotary_embedding_errors_name_the_node(shape, attrs, half, message, rng):
    model = model_of("RotaryEmbedding", rotary_inputs(rng, shape, half, True), attrs, 23)
    model.graph.node[0].name = "rope0"
    with pytest.raises(ModelError, match=f"(?s)rope0.*{message}"):
        imported(model)


# ---- SwiGLU ------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [1.0, 1.702])
@pytest.mark.parametrize("dtype, tol", [(np.float32, F32), (np.float16, F16), (np.float64, F32)])
def test_swiglu(alpha, dtype, tol, rng):
    inputs = {n: (rng.standard_normal((3, 2, 10)) * 3).astype(dtype) for n in ("a", "b")}
    check("SwiGLU", inputs, {"alpha": alpha}, 28, onnxruntime=False, tol=tol)


def test_swiglu_on_the_cuda_schedules(rng):
    inputs = {n: rng.standard_normal((4, 33)).astype(np.float32) for n in ("a", "b")}
    check("SwiGLU", inputs, {"alpha": 0.5}, 28, onnxruntime=False, cuda=True)


def test_swiglu_does_not_broadcast(rng):
    inputs = {"a": np.ones((2, 3), np.float32), "b": np.ones((1, 3), np.float32)}
    model = model_of("SwiGLU", inputs, {}, 28)
    with pytest.raises(ModelError, match="one shape"):
        imported(model)


# ---- CausalConvWithState -----------------------------------------------------------------------
def conv_inputs(rng, b, c, length, k, bias, past, dtype=np.float32):
    """input [b, c, length], weight [c, 1, k], optional bias and past_state."""
    inputs = {"x": rng.standard_normal((b, c, length)), "w": rng.standard_normal((c, 1, k))}
    if bias:
        inputs["bias"] = rng.standard_normal(c)
    if past:
        inputs["past"] = rng.standard_normal((b, c, k - 1))
    return {n: v.astype(dtype) for n, v in inputs.items()}


@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
@pytest.mark.parametrize("bias, past", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("length, k", [(7, 4), (1, 4), (2, 5)], ids=["prefill", "decode", "short"])
def test_causal_conv_with_state(activation, bias, past, length, k, rng):
    inputs = conv_inputs(rng, 2, 3, length, k, bias, past)
    order = ["x", "w", "bias" if bias else "", "past" if past else ""]
    check("CausalConvWithState", inputs, {"activation": activation}, 27, 2, order, False)


def test_causal_conv_with_state_kernel_one_float16(rng):
    """k = 1 keeps no state: present_state is [B, C, 0]."""
    inputs = conv_inputs(rng, 1, 4, 6, 1, True, False, np.float16)
    check("CausalConvWithState", inputs, {"activation": "silu"}, 27, 2, onnxruntime=False, tol=F16)


def test_causal_conv_with_state_on_the_cuda_schedules(rng):
    inputs = conv_inputs(rng, 2, 8, 5, 3, True, True)
    check("CausalConvWithState", inputs, {"activation": "silu"}, 27, 2, onnxruntime=False,
          cuda=True, tol=(1e-4, 1e-5))  # fmt: skip


@pytest.mark.parametrize(
    "attrs, shapes, message",
    [({"activation": "gelu"}, {}, "activation"),
     ({}, {"w": (3, 2, 4)}, "weight"),
     ({}, {"past": (2, 3, 2)}, "past_state")],
    ids=["activation", "weight_shape", "past_shape"])  # fmt: skip
def test_causal_conv_with_state_errors_name_the_node(attrs, shapes, message, rng):
    inputs = conv_inputs(rng, 2, 3, 5, 4, False, True)
    inputs.update({n: np.zeros(s, np.float32) for n, s in shapes.items()})
    model = model_of("CausalConvWithState", inputs, attrs, 27, 2, ["x", "w", "", "past"])
    model.graph.node[0].name = "conv0"
    with pytest.raises(ModelError, match=f"(?s)conv0.*{message}"):
        imported(model)


def test_integer_inputs_are_unsupported():
    inputs = {n: np.ones((2, 3), np.int32) for n in ("a", "b")}
    with pytest.raises(UnsupportedModelError, match="int32"):
        imported(model_of("SwiGLU", inputs, {}, 28))
