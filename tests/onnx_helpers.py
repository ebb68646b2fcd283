"""Build one-node ONNX models and compare tvmc's reference path with onnxruntime."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tvmc.frontend import convert_model
from tvmc.ops import run_reference
from tvmc.passes import IMPORT_PIPELINE, run_passes


def onnx_type(dtype: Any) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def single_node_model(
    op_type: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    num_outputs: int = 1,
    opset: int = 17,
    input_order: Sequence[str] | None = None,
) -> onnx.ModelProto:
    """A model with one `op_type` node; `inputs` are runtime inputs, `constants` initializers.

    `input_order` gives the node's input list (use '' for an absent optional input); by default
    runtime inputs come first, then constants.
    """
    constants = dict(constants or {})
    order = list(input_order) if input_order is not None else [*inputs, *constants]
    outputs = [f"out{i}" for i in range(num_outputs)]
    node = helper.make_node(op_type, order, outputs, **dict(attrs or {}))
    graph = helper.make_graph(
        [node],
        f"{op_type.lower()}_test",
        [helper.make_tensor_value_info(k, onnx_type(v.dtype), v.shape) for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)  # what the installed onnxruntime reads
    return model


def run_onnxruntime(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, dict(inputs))


@functools.cache
def onnxruntime_saturates_u8s8() -> bool:
    """Whether this host's onnxruntime sums uint8 x int8 products in pairs saturated to int16
    (MLAS's U8S8 kernels on x86-64 with AVX2 but no VNNI, a limitation onnxruntime documents:
    its quantizer's `reduce_range` keeps the weights to 7 bits for it). There it is no oracle
    for full-range uint8 x int8 data; tvmc sums exactly."""
    a, b = np.full((1, 2), 255, np.uint8), np.full((2, 1), 127, np.int8)
    model = single_node_model("MatMulInteger", {"a": a}, constants={"b": b}, opset=10)
    return int(run_onnxruntime(model, {"a": a})[0][0, 0]) != 2 * 255 * 127


def int8_beside_uint8(rng: np.random.Generator, low: int, high: int, shape) -> np.ndarray:
    """int8 data in [low, high) to multiply with full-range uint8 data, narrowed to [-64, 64)
    (two products within int16) where onnxruntime saturates such sums."""
    if onnxruntime_saturates_u8s8():
        low, high = max(low, -64), min(high, 64)
    return rng.integers(low, high, shape).astype(np.int8)


def run_tvmc_reference(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    graph = convert_model(model)
    graph = run_passes(graph, IMPORT_PIPELINE, verify=True)
    out = run_reference(graph, inputs)
    return [out[o.name] for o in model.graph.output]


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> None:
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    if actual.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


def check_node(
    op_type: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    num_outputs: int = 1,
    opset: int = 17,
    input_order: Sequence[str] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    runner: Callable[[onnx.ModelProto, Mapping[str, np.ndarray]], list[np.ndarray]] | None = None,
) -> None:
    """One ONNX node through tvmc's frontend + references against onnxruntime.

    `runner(model, inputs) -> outputs` replaces the reference path (e.g. compiled kernels).
    Default tolerance: float32 references compute in float32 or float64, onnxruntime in float32
    with vectorised math; 1e-5 relative is a few ulps of accumulated rounding.
    """
    inputs = {k: np.asarray(v) for k, v in inputs.items()}
    model = single_node_model(op_type, inputs, attrs, constants, num_outputs, opset, input_order)
    expected = run_onnxruntime(model, inputs)
    actual = (runner or run_tvmc_reference)(model, inputs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_close(a, np.asarray(e), rtol, atol)
