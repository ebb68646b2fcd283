"""The CUDA runtime against a fake driver (memory plan, arguments, graph, timing) and its errors."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from tests.cli.test_compile_run_cli import error, ok
from tests.cli.test_compile_run_cli import tvmc as tvmc_cli
from tests.codegen.cuda_examples import (
    bias_rowsum_params,
    bias_rowsum_program,
    bias_rowsum_reference,
)
from tests.driver.test_compile_run import write_tiny_model
from tests.runtime.fake_cuda import CUjit_option, CUresult, FakeDriver
from tvmc.codegen.cuda_program import emit_cuda_program
from tvmc.codegen.target import CUDATarget
from tvmc.errors import InputError, TVMCError
from tvmc.runtime import cuda_driver
from tvmc.runtime.cuda import CUDAExecutor
from tvmc.runtime.cuda_driver import CUDAError, check
from tvmc.runtime.cuda_jit import (
    ERROR_LOG_BYTES,
    INFO_LOG_BYTES,
    MAX_LOG_CHARS,
    JitLogs,
    load_module,
    log_excerpt,
    older_arch,
    ptx_version_fix,
)
from tvmc.runtime.executor import ProgramInfo


def info_of(program) -> ProgramInfo:
    return ProgramInfo.of(program)


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


JIT_LOG = """
ptxas application ptx input, line 42; error   : Unknown symbol 'bias_add_smem'

ptxas fatal   : Ptx assembly aborted due to errors
"""


def test_failed_module_load_shows_the_jit_log_and_frees_memory(fake):
    drv, program = fake
    drv.fail["cuModuleLoadDataEx"] = CUresult.CUDA_ERROR_INVALID_PTX
    drv.jit_error_log = JIT_LOG
    with pytest.raises(CUDAError) as info:
        executor(program)
    first, *log = str(info.value).splitlines()
    assert first == ("loading the PTX on Fake H200 (cuModuleLoadDataEx: the driver's JIT) failed: "
                     "CUDA_ERROR_INVALID_PTX; `ptxas -arch=sm_90` on the --dump-code ptx file "
                     "shows why")  # fmt: skip
    assert log == ["the JIT's error log (its line numbers are the --dump-code ptx file's):",
                   "  ptxas application ptx input, line 42; error   : Unknown symbol "
                   "'bias_add_smem'",
                   "  ptxas fatal   : Ptx assembly aborted due to errors"]  # fmt: skip
    assert not drv.memory


def test_a_successful_load_asks_for_both_logs_and_logs_the_info_at_debug(fake, caplog):
    drv, program = fake
    drv.jit_info_log = "ptxas info    : Used 12 registers, 380 bytes cmem[0]"
    with caplog.at_level(logging.DEBUG, logger="tvmc"):
        ex = executor(program)
    options = drv.jit_options
    assert options[CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES] == ERROR_LOG_BYTES
    assert options[CUjit_option.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES] == INFO_LOG_BYTES
    assert options[CUjit_option.CU_JIT_LOG_VERBOSE] == 1
    assert "Used 12 registers" in caplog.text
    ex.set_inputs([np.ones((6, 256), np.float32)])
    assert ex.run()[0].shape == (6,)


def test_a_long_log_is_cut_to_its_first_lines():
    lines = [f"ptxas error {i}: {'x' * 30}" for i in range(40)]
    kept = log_excerpt("\n\n".join(lines))
    assert kept[:10] == lines[:10] and kept[10] == "... (30 more lines)"
    wide = log_excerpt("y" * 5000 + "\nz")
    assert (
        len(wide[0]) == MAX_LOG_CHARS
        and wide[0].endswith("...")
        and wide[1:] == ["... (1 more lines)"]
    )


@pytest.mark.parametrize("how", ["missing", "TypeError"])
def test_bindings_without_the_ex_call_load_with_cuModuleLoadData(fake, monkeypatch, how):
    drv, program = fake
    if how == "missing":
        monkeypatch.delattr(FakeDriver, "cuModuleLoadDataEx")
    else:  # bindings that convert the option values otherwise

        def refuse(*args):
            raise TypeError("expected bytes, int found")

        drv.cuModuleLoadDataEx = refuse
    ex = executor(program)
    x = np.random.default_rng(2).standard_normal((6, 256)).astype(np.float32)
    ex.set_inputs([x])
    np.testing.assert_allclose(ex.run()[0], bias_rowsum_reference(x, bias_rowsum_params()["b"]),
                               rtol=1e-5, atol=1e-4)  # fmt: skip
    ex.close()
    drv.fail["cuModuleLoadData"] = CUresult.CUDA_ERROR_INVALID_PTX
    with pytest.raises(CUDAError, match=r"^loading the PTX on Fake H200 \(cuModuleLoadData: "
                       r"the driver's JIT\) failed: CUDA_ERROR_INVALID_PTX; `ptxas -arch=sm_90` "
                       r"[^\n]*$"):  # fmt: skip
        executor(program)


def test_a_driver_older_than_the_ptx_isa_names_the_fix(fake):
    drv, program = fake
    drv.fail["cuModuleLoadDataEx"] = CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    drv.driver_version = 12040
    drv.jit_error_log = ("ptxas application ptx input, line 5; fatal   : Unsupported .version "
                         "8.6; current version is '8.4'")  # fmt: skip
    with pytest.raises(CUDAError) as info:
        executor(program)
    first, *log = str(info.value).splitlines()
    assert first == ("loading the PTX on Fake H200 (cuModuleLoadDataEx: the driver's JIT) failed: "
                     "CUDA_ERROR_UNSUPPORTED_PTX_VERSION; the PTX declares ISA 8.6, newer than "
                     "this NVIDIA driver (CUDA 12.4) compiles: update the NVIDIA driver to one "
                     "for CUDA 12.8 or newer")  # fmt: skip
    assert "current version is '8.4'" in log[1]


def test_a_newer_isa_than_the_base_one_also_suggests_an_older_arch(fake):
    drv, _ = fake
    drv.driver_version = 12080
    gpu = cuda_driver.Device(0, "Fake RTX 5090", (12, 0), 0, "context")
    fix = ptx_version_fix(drv, ".version 8.7\n.target sm_120\n", gpu)
    assert fix == (
        "the PTX declares ISA 8.7, newer than this NVIDIA driver (CUDA 12.8) compiles: "
        "update the NVIDIA driver to one for CUDA 12.8 or newer, or compile for an "
        'older arch, whose PTX declares an older ISA (--target "cuda -arch=sm_100")'
    )
    assert older_arch((9, 0), "8.6") is None
    assert older_arch((11, 0), "9.0") == "sm_103"


def test_the_real_bindings_take_our_jit_option_values():
    """cuda-bindings converts each option value by its option: no TypeError for ours."""
    drv = _real_driver_or_skip()
    if not hasattr(drv, "cuModuleLoadDataEx"):
        pytest.skip("these cuda-bindings have no cuModuleLoadDataEx")
    options, values = JitLogs().options(drv)
    try:
        drv.cuModuleLoadDataEx(b"not ptx\0", len(options), options, values)
    except TypeError as exc:
        pytest.fail(f"cuda-bindings refused our JIT option values: {exc}")
    except Exception:  # no libcuda here: raised after the values were converted
        pass
    with pytest.raises(TypeError):  # an address instead of a buffer is what the bindings refuse
        drv.cuModuleLoadDataEx(b"x\0", 1, options[:1], [id(values[0])])


def test_a_real_gpu_jit_refuses_bad_ptx_with_its_log():
    """On a GPU (skipped without one): the real driver writes its log into our buffer."""
    cuda_driver.device.cache_clear()
    if cuda_driver.present_arch() is None:
        pytest.skip("no CUDA GPU (or driver, or cuda-bindings)")
    gpu = cuda_driver.device()
    version = CUDATarget(gpu.arch).ptx_version[3:]
    ptx = (f".version {version[:-1]}.{version[-1]}\n.target {gpu.arch}\n.address_size 64\n"
           ".visible .entry broken()\n{\n  no_such_instruction;\n  ret;\n}\n")  # fmt: skip
    with pytest.raises(CUDAError, match=r"CUDA_ERROR_INVALID_PTX.*\nthe JIT's error log .*:\n  \S"):
        load_module(cuda_driver.driver(), ptx, gpu)


def test_cli_run_on_cuda_prints_the_jit_log(fake, tmp_path):
    drv, _ = fake
    write_tiny_model(tmp_path)
    package = tmp_path / "tiny.tar"
    ok(tvmc_cli("compile", tmp_path / "tiny.onnx", "-o", package, "--target", "cuda -arch=sm_90"))
    drv.fail["cuModuleLoadDataEx"] = CUresult.CUDA_ERROR_INVALID_PTX
    drv.jit_error_log = JIT_LOG
    result = tvmc_cli("run", package, "--device", "cuda")
    error(result, 4, r"^Error: loading the PTX on Fake H200 \(cuModuleLoadDataEx.*"
          "CUDA_ERROR_INVALID_PTX")  # fmt: skip
    assert "  ptxas application ptx input, line 42; error   : Unknown symbol" in result.stderr


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
