"""On a real GPU (skipped without one): the example program and a compiled model against numpy,
every op case of `make gpu-check` (defaults and the non-default kernels it forces) and the nine
light models with random weights against onnxruntime on the CPU.

`make gpu-check` runs the same cases on the lent GPU machine (which has no pytest); these run
wherever a GPU and the test tools meet.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmc
from benchmarks.gpu_cases import OP_CASES
from tests.codegen.cuda_examples import (
    bias_rowsum_params,
    bias_rowsum_program,
    bias_rowsum_reference,
)
from tests.driver.test_compile_run import inputs_for, write_tiny_model
from tvmc.codegen.cuda_program import emit_cuda_program
from tvmc.codegen.target import CUDATarget
from tvmc.models import LIGHT_MODELS, light_model_inputs, randomized_light_model
from tvmc.ops import run_reference
from tvmc.runtime import cuda_driver
from tvmc.runtime.cuda import CUDAExecutor
from tvmc.runtime.executor import ProgramInfo

cuda_driver.device.cache_clear()
ARCH = cuda_driver.present_arch()
pytestmark = pytest.mark.skipif(ARCH is None, reason="no CUDA GPU (or driver, or cuda-bindings)")


@pytest.mark.parametrize("use_graph", [True, False])
def test_example_program_on_the_gpu(use_graph):
    program = bias_rowsum_program()
    artifact = emit_cuda_program(program, CUDATarget(ARCH or "sm_90"))
    info = ProgramInfo.of(program)
    params = bias_rowsum_params()
    executor = CUDAExecutor(artifact.ptx, info, artifact.launches, params, use_graph=use_graph)
    x = np.random.default_rng(3).standard_normal((6, 256)).astype(np.float32)
    executor.set_inputs([x])
    (y,) = executor.run()
    np.testing.assert_allclose(y, bias_rowsum_reference(x, params["b"]), rtol=1e-4, atol=1e-4)
    assert executor.benchmark(repeat=3).median > 0
    assert len(executor.profile(repeat=2)) == 2
    executor.close()


def test_compiled_model_on_the_gpu(tmp_path, rng):
    model = tvmc.load(str(write_tiny_model(tmp_path)))
    package = tvmc.compile(model, target="cuda", package_path=str(tmp_path / "m.tar"))
    assert package.metadata["arch"] == ARCH
    inputs = inputs_for(rng)
    result = package.run(device="cuda", inputs=inputs, benchmark=True, repeat=3, end_to_end=True)
    expected = run_reference(model.graph, inputs)
    for name in result.output_names:
        np.testing.assert_allclose(result.outputs[name], expected[name], rtol=1e-5, atol=1e-5)


def _against_onnxruntime(tmp_path, name, model, inputs, config=None) -> None:
    """Compiled for this GPU and run there: max |tvmc - ort| / max |ort| <= 1e-3 (gpu-check's)."""
    from benchmarks.gpu_stages import Stage, check_model  # imports tvmc's CUDA runtime

    stage = Stage("pytest", str(tmp_path / "rows.jsonl"), 1e18, str(tmp_path), smoke=False)
    status, detail, _ = check_model(stage, name, model, inputs, str(tmp_path / "m.tar"), config)
    assert status == "ok", detail


@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: c.name)
def test_op_case_on_the_gpu(case, tmp_path):
    model, inputs = case.build()
    _against_onnxruntime(tmp_path, case.name, model, inputs, case.config)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_on_the_gpu(name, tmp_path):
    model = randomized_light_model(name)
    _against_onnxruntime(tmp_path, name, model, light_model_inputs(model))
