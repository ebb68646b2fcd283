"""GPU measurement: invalid configs rejected before building, PTX builds, the run step on a fake
GPU, and the clear failure without one."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import numpy as np
import pytest

from tests.codegen.cuda_examples import bias_rowsum_program
from tests.runtime.fake_cuda import FakeDriver
from tvmc.autotune import measure_cuda
from tvmc.autotune.backends import BACKENDS, measure_backend
from tvmc.autotune.local import LocalMeasurer
from tvmc.autotune.measure import MeasureInput, MeasureOptions
from tvmc.autotune.measure_cpu import build
from tvmc.autotune.measure_cuda import (
    CUDA_MIN_REPEAT_MS,
    CUDABuildResult,
    build_cuda,
    cuda_options,
    ptxas_registers,
    ptxas_report,
    run_cuda,
)
from tvmc.autotune.task import Task, task_name
from tvmc.codegen.cuda_program import emit_cuda_program
from tvmc.codegen.nvptx import emit_ptx
from tvmc.errors import UsageError
from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Kernel, allocate, loop, nest, seq
from tvmc.ops import OPS
from tvmc.ops.lowering import LowerContext, LoweringTarget, Template, TensorRef, ref_of_buffer
from tvmc.ops.registry import OPAQUE, Attrs, OpDef, register
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.space import ConfigSpace
from tvmc.runtime import cuda_driver
from tvmc.runtime.cuda_driver import CUDAError

PROBE = "CUDAMeasureProbe"
N = 512
CONFIGS = ("ok64", "ok256", "wide", "shared")  # y = x with 64/256 threads; 2048; 64 KiB shared
TARGET = "cuda -arch=sm_90"


def _space(attrs: Attrs, types: list[TensorType], target: LoweringTarget) -> ConfigSpace:
    return ConfigSpace().other("shape", CONFIGS)


def _template(ctx: LowerContext, attrs: Attrs, inputs: list[TensorRef], outputs: list[Buffer],
              epilogue) -> list[Kernel]:  # fmt: skip
    x, y = inputs[0], outputs[0]
    shape = ctx.config.get("shape", "ok64")
    threads = {"ok64": 64, "ok256": 256, "wide": 2048, "shared": 64}[shape]
    axes = [("b", -(-N // threads), "blockIdx.x"), ("t", threads, "threadIdx.x")]

    def copy(b, t):
        i = b * threads + t
        return y.store((i,), x.read((i,)))

    body = nest(axes, copy) if threads <= N else loop("t", threads, lambda t: seq(
        y.store((t % N,), x.read((t % N,)))), kind="threadIdx.x")  # fmt: skip
    if shape == "shared":
        body = allocate("sm", (16 * 1024,), lambda sm: body, scope="shared")
    return [make_kernel(ctx.name("cuda_probe"), body)]


if PROBE not in OPS:  # worker processes import this module to learn the op
    _lowering = Template(_template, _space)
    register(OpDef(PROBE, lambda attrs, types: [types[0]], lambda attrs, x: x,
                   {"cpu": _lowering, "cuda": _lowering}, kind=OPAQUE))  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _unregister_probe() -> Iterator[None]:
    yield
    OPS.pop(PROBE, None)


def probe_task() -> Task:
    args = [["TENSOR", [N], "float32"], ["ATTRS", {}]]
    return Task(task_name(PROBE, "cuda"), PROBE, args, TARGET, _space({}, [], None), ["y"])


def probe(name: str) -> MeasureInput:
    task = probe_task()
    return MeasureInput(task, task.space.get(CONFIGS.index(name)))


def test_valid_configs_build_ptx_and_launches():
    built = build_cuda(probe("ok256"))
    assert isinstance(built, CUDABuildResult) and built.error_no == 0, built.error_msg
    assert ".target sm_90" in built.ptx and built.object_code == b""
    (launch,) = built.launches
    assert (launch.grid, launch.block, launch.args) == ((2, 1, 1), (256, 1, 1), ("out0", "in0"))
    assert built.program["inputs"] == ["in0"] and built.program["outputs"] == ["out0"]
    if shutil.which("ptxas"):
        assert set(built.registers) == {launch.kernel} and built.registers[launch.kernel] > 0
    else:
        assert built.registers is None


@pytest.mark.parametrize(
    ("config", "message"),
    [("wide", "threads per block"), ("shared", "65536 bytes of static shared memory")],
)
def test_invalid_configs_are_rejected_before_building(config, message):
    built = build_cuda(probe(config))
    assert built.error_no == 1 and built.ptx == ""
    assert "invalid config for the GPU" in built.error_msg and message in built.error_msg


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptxas_counts_registers_and_refuses_bad_ptx():
    ptx = emit_cuda_program(bias_rowsum_program()).ptx
    registers = ptxas_registers(ptx, "sm_90")
    assert set(registers) == {"bias_add", "gpu_rowsum"}
    with pytest.raises(RuntimeError, match="ptxas refused the PTX"):
        ptxas_registers(ptx.replace("ret;", "bogus;"), "sm_90")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptxas_report_counts_spills():
    # 160 values live at once in each of 1024 threads (at most 64 registers each): some spill
    x, y = Buffer("x", (1024, 160)), Buffer("y", (1024,))

    def thread(t):
        def body(acc):
            mix = loop("i", 160, lambda i: acc.store(i, acc[i] * acc[(i + 7) % 160]), "unrolled")
            total = acc[0]
            for i in range(1, 160):
                total = total + acc[i]
            return seq(loop("i", 160, lambda i: acc.store(i, x[t, i]), "unrolled"), mix,
                       y.store(t, total))  # fmt: skip

        return allocate("acc", (160,), body)

    kernel = Kernel("spilly", (x, y), loop("t", 1024, thread, kind="threadIdx.x"))
    ptx = emit_cuda_program(bias_rowsum_program()).ptx
    calm = ptxas_report(ptx, "sm_90")
    assert {k: r.spill_bytes for k, r in calm.items()} == {"bias_add": 0, "gpu_rowsum": 0}
    (spilly,) = ptxas_report(emit_ptx([kernel]).ptx, "sm_90").values()
    assert spilly.registers <= 64 and spilly.spill_bytes > 0


def test_run_on_a_fake_gpu_checks_and_times(monkeypatch):
    built = build_cuda(probe("ok64"))
    ctx = LowerContext(LoweringTarget(kind="cuda"), {"shape": "ok64"}, "k")
    x = Buffer("in0", (N,), "float32")
    refs = [ref_of_buffer("in0", TensorType((N,), "float32"), x)]
    drv = FakeDriver(OPS[PROBE].build(ctx, {}, refs, [Buffer("out0", (N,))], None))
    monkeypatch.setattr(cuda_driver, "driver", lambda: drv)
    cuda_driver.device.cache_clear()
    try:
        result = run_cuda(built, MeasureOptions(repeat=3, min_repeat_ms=0.5))
        assert result.error_no == 0 and len(result.costs) == 3
        assert all(c == pytest.approx(1e-4, rel=0.05) for c in result.costs)  # the fake clock
        wrong = CUDABuildResult(**{**vars(built), "reference": [np.full(N, 7, np.float32)]})
        result = run_cuda(wrong, MeasureOptions(repeat=1))
        assert result.error_no == 5 and "differ from the reference" in result.error_msg
        assert not drv.memory  # freed after each measurement
    finally:
        cuda_driver.device.cache_clear()


def test_without_a_gpu_the_run_step_fails_clearly():
    cuda_driver.device.cache_clear()
    if cuda_driver.present_arch() is not None:
        pytest.skip("a GPU is present")
    with pytest.raises(CUDAError, match="no NVIDIA driver here|no CUDA GPU|pip install"):
        run_cuda(build_cuda(probe("ok64")), MeasureOptions(repeat=1))


def test_local_measurer_records_errors_per_config_without_a_gpu():
    cuda_driver.device.cache_clear()
    if cuda_driver.present_arch() is not None:
        pytest.skip("a GPU is present")
    options = MeasureOptions(repeat=1, timeout=20.0, build_timeout=20.0, n_parallel=1)
    with LocalMeasurer(options, TARGET) as measurer:
        assert measurer.options.min_repeat_ms == CUDA_MIN_REPEAT_MS
        inputs = [probe("ok64"), probe("wide")]
        results = measurer.measure(inputs)
    assert [r.error_no for r in results] == [4, 1]
    assert "no NVIDIA driver here" in results[0].error_msg or "no CUDA GPU" in results[0].error_msg


def test_options_and_targets():
    assert measure_backend("cuda -arch=sm_90") is BACKENDS["cuda"] is measure_cuda.BACKEND
    assert measure_backend("llvm -mcpu=znver4").build is build and BACKENDS["llvm"].exclusive_runs
    with pytest.raises(UsageError, match="unknown target 'rocm'; valid: llvm, cuda"):
        measure_backend("rocm")
    assert cuda_options(MeasureOptions()).min_repeat_ms == CUDA_MIN_REPEAT_MS
    assert cuda_options(MeasureOptions(min_repeat_ms=5)).min_repeat_ms == 5
    with pytest.raises(UsageError, match="unknown CUDA architecture"):
        LocalMeasurer(MeasureOptions(n_parallel=1), "cuda -arch=sm_1")
