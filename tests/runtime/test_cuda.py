"""The CUDA runtime against a fake driver (memory plan, arguments, graph, timing) and its errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.codegen.cuda_examples import (
    bias_rowsum_params,
    bias_rowsum_program,
    bias_rowsum_reference,
)
from tests.runtime.fake_cuda import CUresult, FakeDriver
from tvmc.codegen.cuda_program import emit_cuda_program
from tvmc.errors import InputError, TVMCError
from tvmc.runtime import cuda_driver
from tvmc.runtime.cuda import CUDAExecutor
from tvmc.runtime.cuda_driver import CUDAError, check
from tvmc.runtime.executor import ProgramInfo


def info_of(program) -> ProgramInfo:
    return ProgramInfo(program.entry, program.inputs, program.outputs, program.params,
                       program.buffers, program.calls, program.workspace_bytes)  # fmt: skip


@pytest.fixture
def fake(monkeypatch):
    """A fake GPU whose kernels are the example program's."""
    program = bias_rowsum_program()
    drv = FakeDriver(program.kernels)
    monkeypatch.setattr(cuda_driver, "driver", lambda: drv)
    cuda_driver.device.cache_clear()
    yield drv, program
    cuda_driver.device.cache_clear()


def executor(program, **kw) -> CUDAExecutor:
    artifact = emit_cuda_program(program)
    params = bias_rowsum_params()
    return CUDAExecutor(artifact.ptx, info_of(program), artifact.launches, params, **kw)


@pytest.mark.parametrize("use_graph", [True, False])
def test_runs_the_program_and_matches_numpy(fake, use_graph):
    drv, program = fake
    ex = executor(program, use_graph=use_graph)
    x = np.random.default_rng(1).standard_normal((6, 256)).astype(np.float32)
    ex.set_inputs([x])
    for _ in range(2):  # a second run reuses memory, arguments and the graph
        (y,) = ex.run()
        np.testing.assert_allclose(y, bias_rowsum_reference(x, bias_rowsum_params()["b"]),
                                   rtol=1e-5, atol=1e-4)  # fmt: skip
    assert drv.graph_launches == (2 if use_graph else 0)
    assert drv.launched == 4
    assert len(drv.memory) == 4  # workspace, input, output, param: allocated once
    ex.close()
    assert not drv.memory


def test_benchmark_times_with_events_and_end_to_end(fake):
    drv, program = fake
    ex = executor(program)
    ex.set_inputs([np.zeros((6, 256), np.float32)])
    times = ex.benchmark(number=2, repeat=3)
    assert len(times.results) == 3
    assert times.median == pytest.approx(0.2 + 0.0005)  # two kernels of 0.1 ms (fake clock)
    grown = ex.benchmark(number=1, repeat=1, min_repeat_ms=1.0)
    assert grown.results[0] * 1e3 == pytest.approx(0.2, abs=1e-3)
    assert ex.benchmark(repeat=2, end_to_end=True).median > 0


def test_profile_rows_per_launch(fake):
    _, program = fake
    ex = executor(program)
    ex.set_inputs([np.ones((6, 256), np.float32)])
    rows = ex.profile(repeat=3)
    assert [r["kernel"] for r in rows] == ["bias_add", "gpu_rowsum"]
    assert [r["node"] for r in rows] == ["Add", "ReduceSum"]
    assert all(r["seconds"] == pytest.approx(1.01e-4) for r in rows)


def test_unbound_and_wrong_inputs(fake):
    _, program = fake
    ex = executor(program)
    with pytest.raises(InputError, match="not bound"):
        ex.run()
    with pytest.raises(InputError, match=r"input 0 is float64\[6, 256\]"):
        ex.set_inputs([np.zeros((6, 256))])


def test_failed_module_load_names_the_cuda_error_and_frees_memory(fake):
    drv, program = fake
    drv.fail["cuModuleLoadData"] = CUresult.CUDA_ERROR_INVALID_PTX
    with pytest.raises(CUDAError, match="loading the PTX on Fake H200.*CUDA_ERROR_INVALID_PTX"):
        executor(program)
    assert not drv.memory


def test_a_kernel_fault_surfaces_at_synchronize(fake):
    drv, program = fake
    ex = executor(program)
    ex.set_inputs([np.zeros((6, 256), np.float32)])
    drv.fail["cuStreamSynchronize"] = CUresult.CUDA_ERROR_LAUNCH_FAILED
    with pytest.raises(CUDAError, match="running the program on the GPU failed: "
                       "CUDA_ERROR_LAUNCH_FAILED"):  # fmt: skip
        ex.run()


def test_check_returns_values_or_raises(fake):
    assert check((CUresult.CUDA_SUCCESS, 7), "x") == 7
    assert check((CUresult.CUDA_SUCCESS, 1, 2), "x") == (1, 2)
    assert check((CUresult.CUDA_SUCCESS,), "x") is None
    with pytest.raises(CUDAError, match="cuFoo failed: CUDA_ERROR_INVALID_VALUE"):
        check((CUresult.CUDA_ERROR_INVALID_VALUE, None), "cuFoo")


def test_device_reports_the_arch(fake):
    dev = cuda_driver.device()
    assert (dev.name, dev.capability, dev.arch) == ("Fake H200", (9, 0), "sm_90")
    assert cuda_driver.present_arch() == "sm_90"


@pytest.mark.parametrize(
    ("result", "devices", "message"),
    [
        (
            CUresult.CUDA_ERROR_NO_DEVICE,
            1,
            r"no CUDA GPU found.*--target llvm.*\(cuInit: "
            "CUDA_ERROR_NO_DEVICE\\)",
        ),
        (CUresult.CUDA_ERROR_INSUFFICIENT_DRIVER, 1, "update the driver"),
        (CUresult.CUDA_ERROR_STUB_LIBRARY, 1, "toolkit's stub, not a driver"),
        (CUresult.CUDA_ERROR_INVALID_VALUE, 1, "initialising the CUDA driver failed"),
        (CUresult.CUDA_SUCCESS, 0, "no CUDA GPU found"),
    ],
)
def test_no_gpu_errors(monkeypatch, result, devices, message):
    drv = FakeDriver([], init_result=result, devices=devices)
    monkeypatch.setattr(cuda_driver, "driver", lambda: drv)
    cuda_driver.device.cache_clear()
    try:
        with pytest.raises(CUDAError, match=message):
            cuda_driver.device()
        assert cuda_driver.present_arch() is None
    finally:
        cuda_driver.device.cache_clear()


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(CUDAError, match=r"pip install 'tvmc\[cuda\]'") as info:
        cuda_driver.driver()
    assert isinstance(info.value, TVMCError) and info.value.exit_code == 4


def _real_driver_or_skip():
    try:
        return cuda_driver.driver()
    except CUDAError:
        pytest.skip("cuda-bindings is not installed (make setup installs it)")


def test_the_real_driver_without_a_gpu_is_a_clear_error():
    """On a machine without a GPU (CI), the real cuda-bindings fails in a way users understand."""
    _real_driver_or_skip()
    cuda_driver.device.cache_clear()
    try:
        arch = cuda_driver.present_arch()
        if arch is not None:
            pytest.skip(f"a GPU is present ({arch})")
        with pytest.raises(CUDAError, match="no NVIDIA driver here|no CUDA GPU found"):
            cuda_driver.device()
    finally:
        cuda_driver.device.cache_clear()
