"""Run one-node ONNX models of ops tvmc decomposes in a converter (Attention, RotaryEmbedding,
...) compiled whole, natively for the CPU or lowered for CUDA and interpreted, against an oracle:
onnxruntime, or onnx's reference evaluator for what onnxruntime lacks (newer opsets, float64).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from tests.backend.node_cases import evaluate
from tests.onnx_helpers import run_onnxruntime, single_node_model
from tests.ops.gpu.test_gpu_graph import run_interpreted
from tvmc.frontend import convert_model
from tvmc.graph import Graph
from tvmc.lower import lower_graph
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.schedule.gpu_launch import check_gpu_config
from tvmc.passes import IMPORT_PIPELINE, OPTIMIZE_PIPELINE, run_passes


def model_of(
    op: str, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any], opset: int,
    num_outputs: int = 1, order: Sequence[str] | None = None,
) -> onnx.ModelProto:  # fmt: skip
    """A one-node model; every input a runtime input (`order` places absent ones as '')."""
    return single_node_model(op, inputs, attrs, opset=opset, num_outputs=num_outputs,
                             input_order=order)  # fmt: skip


def imported(model: onnx.ModelProto) -> Graph:
    """The model through the frontend and the import pipeline."""
    return run_passes(convert_model(model), IMPORT_PIPELINE, verify=True)


def run_compiled(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The model compiled for llvm (fusion, templates, memory plan) and run natively."""
    graph = imported(model)
    results = evaluate(graph, dict(feeds), compiled=True)
    return [results[o.name] for o in model.graph.output]


def run_cuda_interpreted(model: onnx.ModelProto,
                         feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:  # fmt: skip
    """The model lowered whole for CUDA, its kernels run by the interpreter with GPU semantics."""
    graph = run_passes(imported(model), OPTIMIZE_PIPELINE)
    lowered = lower_graph(graph, LoweringTarget(kind="cuda"))
    check_gpu_config(lowered.program.kernels)
    outputs = run_interpreted(lowered, [feeds[n] for n in graph.inputs])
    by_name = dict(zip(lowered.program.outputs, outputs))
    return [by_name[o.name].reshape(graph.types[o.name].shape) for o in model.graph.output]


def run_oracle(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
               onnxruntime: bool = True) -> list[np.ndarray]:  # fmt: skip
    """onnxruntime's outputs, or onnx's reference evaluator's."""
    if onnxruntime:
        return run_onnxruntime(model, feeds)
    from onnx.reference import ReferenceEvaluator

    with np.errstate(all="ignore"):
        return ReferenceEvaluator(model).run(None, dict(feeds))


def assert_outputs_close(got: Sequence[np.ndarray], want: Sequence[np.ndarray], rtol: float,
                         atol: float) -> None:  # fmt: skip
    """Same count, shapes and dtypes; values within tolerance (NaN where NaN)."""
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"out{i}")
