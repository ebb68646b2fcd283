"""On a real GPU (skipped without one): the example program and a compiled model against numpy.

`make gpu-check` covers every op and model on the lent GPU machine (which has no pytest); these
run wherever a GPU and the test tools meet.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmc
from tests.codegen.cuda_examples import (
    bias_rowsum_params,
    bias_rowsum_program,
    bias_rowsum_reference,
)
from tests.driver.test_compile_run import inputs_for, write_tiny_model
from tvmc.codegen.cuda_program import emit_cuda_program
from tvmc.codegen.target import CUDATarget
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
    info = ProgramInfo(program.entry, program.inputs, program.outputs, program.params,
                       program.buffers, program.calls, program.workspace_bytes)  # fmt: skip
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
