"""The nine ONNX light models (randomized weights) through tvmc's reference path vs onnxruntime.

Tolerance: float32 through up to ~120 layers; tvmc's references and onnxruntime sum in different
orders (im2col + BLAS versus direct kernels), so logits agree to about 1e-5 relative to their
largest magnitude. We assert atol = 1e-4 * max|logit| with rtol = 1e-3.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmc
from tests.onnx_helpers import run_onnxruntime
from tvmc.frontend import convert_model
from tvmc.models import LIGHT_MODELS, light_model_inputs, light_model_path, randomized_light_model
from tvmc.ops import infer_node, run_reference
from tvmc.passes import IMPORT_PIPELINE, run_passes


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_loads_with_constants_folded(name):
    model = tvmc.load(light_model_path(name))
    model.graph.verify(infer_node)
    ops = model.graph.op_counts()
    assert "ConstantOfShape" not in ops and "Dropout" not in ops and "Identity" not in ops
    assert len(model.inputs) == 1 and list(model.inputs.values())[0].shape == (1, 3, 224, 224)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_reference_matches_onnxruntime(name):
    onnx_model = randomized_light_model(name)
    inputs = light_model_inputs(onnx_model)
    graph = run_passes(convert_model(onnx_model), IMPORT_PIPELINE, verify=True)
    (expected,) = run_onnxruntime(onnx_model, inputs)
    actual = run_reference(graph, inputs)[graph.outputs[0]]
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-4 * scale)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_compiled_matches_onnxruntime(name):
    """Compiled for llvm and run natively; same tolerance as the reference path."""
    from tvmc.codegen import load_shared
    from tvmc.driver.compiler import CompileOptions, build
    from tvmc.runtime import Executor, ProgramInfo

    onnx_model = randomized_light_model(name)
    inputs = light_model_inputs(onnx_model)
    graph = run_passes(convert_model(onnx_model), IMPORT_PIPELINE)
    result = build(graph, CompileOptions())
    p = result.lowered.program
    info = ProgramInfo.of(p)
    executor = Executor(load_shared(result.artifact), info, result.lowered.param_values)
    executor.set_inputs([inputs[n] for n in graph.inputs])
    actual = executor.run()[0].reshape(graph.types[graph.outputs[0]].shape)
    (expected,) = run_onnxruntime(onnx_model, inputs)
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-4 * scale)
