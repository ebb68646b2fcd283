"""NVPTX: PTX text, launch dimensions, shared memory and barriers; ptxas when installed."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

import numpy as np
import onnx
import pytest

from tests.kernel.examples import gpu_elementwise, gpu_row_sum
from tvmc.autotune.measure_cuda import ptxas_registers
from tvmc.codegen.nvptx import LaunchDims, emit_ptx
from tvmc.errors import UnsupportedModelError
from tvmc.kernel import Barrier, Buffer, Kernel, KernelIRError, allocate, exp, loop, seq


@functools.cache
def _artifact():
    return emit_ptx([gpu_elementwise().kernel, gpu_row_sum().kernel])


def test_ptx_has_entries_and_launch_dims():
    art = _artifact()
    assert ".target sm_90" in art.ptx and ".version 8.6" in art.ptx
    assert ".visible .entry gpu_ew(" in art.ptx and ".visible .entry gpu_rowsum(" in art.ptx
    assert art.launch["gpu_ew"] == LaunchDims((8, 1, 1), (128, 1, 1), 0)
    assert art.launch["gpu_rowsum"] == LaunchDims((6, 1, 1), (64, 1, 1), 256)
    assert art.launch["gpu_rowsum"].to_json() == {
        "grid": [6, 1, 1],
        "block": [64, 1, 1],
        "shared": 256,
    }


def test_gpu_loops_read_special_registers_and_sync():
    art = _artifact()
    assert "%tid.x" in art.ptx and "%ctaid.x" in art.ptx
    assert "bar.sync" in art.ptx and ".shared .align 16" in art.ptx
    assert "llvm.nvvm.read.ptx.sreg.tid.x" in art.llvm_ir


def test_each_kernel_declares_its_block_size():
    ptx = _artifact().ptx
    bounds = dict(re.findall(r"\.entry (\w+)\(.*?\.maxntid (\d+), 1, 1", ptx, re.S))
    assert bounds == {"gpu_ew": "128", "gpu_rowsum": "64"}


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_a_1024_thread_kernel_fits_its_registers_to_the_block():
    # 64 live accumulators per thread: without .maxntid ptxas could use more than the 64
    # registers a 1024-thread block allows, and the launch would fail
    x, y = Buffer("x", (1024, 64)), Buffer("y", (1024,))

    def mix(acc, t, r):
        step = lambda i: acc.store(i, acc[i] * acc[(i + 1) % 64] + x[t, (i + r) % 64])  # noqa: E731
        return loop("i", 64, step, kind="unrolled")

    def thread(t):
        def body(acc):
            return seq(
                loop("i", 64, lambda i: acc.store(i, x[t, i]), kind="unrolled"),
                loop("r", 8, lambda r: mix(acc, t, r)),
                y.store(t, sum((acc[i] for i in range(1, 64)), acc[0])),
            )

        return allocate("acc", (64,), body)

    kernel = Kernel("hot", (x, y), loop("t", 1024, thread, kind="threadIdx.x"))
    assert ptxas_registers(emit_ptx([kernel]).ptx, "sm_90")["hot"] <= 64


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptx_assembles_with_ptxas(tmp_path):
    src = tmp_path / "k.ptx"
    src.write_text(_artifact().ptx)
    done = subprocess.run(
        ["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_smaller_thread_loops_get_a_guard():
    y = Buffer("Y", (128,))
    k = Kernel(
        "two",
        (y,),
        seq(
            loop("a", 128, lambda a: y.store(a, 1.0), kind="threadIdx.x"),
            loop("b", 32, lambda b: y.store(b, 2.0), kind="threadIdx.x"),
        ),
    )
    art = emit_ptx([k])
    assert art.launch["two"].block == (128, 1, 1)
    assert "setp" in art.ptx  # the 32-wide loop is guarded by tid.x < 32


def test_a_barrier_under_a_guard_is_rejected():
    y = Buffer("Y", (128,))
    k = Kernel(
        "bad",
        (y,),
        seq(
            loop("a", 128, lambda a: y.store(a, 1.0), kind="threadIdx.x"),
            loop("b", 32, lambda b: seq(Barrier(), y.store(b, 2.0)), kind="threadIdx.x"),
        ),
    )
    with pytest.raises(KernelIRError, match="barrier under a guard"):
        emit_ptx([k])


def test_parallel_loops_must_be_bound_on_gpus():
    y = Buffer("Y", (4,))
    k = Kernel("par", (y,), loop("i", 4, lambda i: y.store(i, 0.0), kind="parallel"))
    with pytest.raises(KernelIRError, match="bind it to blockIdx/threadIdx"):
        emit_ptx([k])


def test_float64_transcendentals_are_an_unsupported_model_not_a_bug(tmp_path):
    """No libm on the GPU: a float64 exp is the model's limit (exit 5), not an internal error."""
    from tests.cli.runners import run_in_process
    from tests.onnx_helpers import single_node_model

    model = single_node_model("Softmax", {"x": np.zeros((2, 8), np.float64)}, {"axis": -1})
    onnx.save(model, tmp_path / "f64.onnx")
    code, _, stderr = run_in_process(
        ["compile", "f64.onnx", "--target", "cuda -arch=sm_90", "-o", "f.tar"], tmp_path
    )
    assert code == 5 and "no CUDA lowering" in stderr and "Traceback" not in stderr


def test_a_float64_exp_is_an_unsupported_model_error():
    """tvmc's exp is float32 code and the GPU has no libm: the model's to change, not a bug."""
    x, y = Buffer("X", (64,), "float64"), Buffer("Y", (64,), "float64")
    k = Kernel("e64", (x, y), loop("t", 64, lambda t: y.store(t, exp(x[t])), kind="threadIdx.x"))
    with pytest.raises(UnsupportedModelError, match="exp on float64 has no CUDA lowering"):
        emit_ptx([k])
