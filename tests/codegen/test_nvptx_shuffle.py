"""Warp shuffles in NVPTX: shfl.sync.bfly over the full warp, assembled by ptxas when present."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.kernel.test_warp_shuffle import warp_sum_kernel
from tvmc.codegen.nvptx import emit_ptx
from tvmc.kernel import Buffer, Kernel, KernelIRError, allocate, loop, seq, shuffle_xor


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_shuffle_lowers_to_shfl_sync_bfly(dtype, tmp_path):
    art = emit_ptx([warp_sum_kernel(dtype=dtype)])
    kind = "f32" if dtype == "float32" else "i32"
    assert f"llvm.nvvm.shfl.sync.bfly.{kind}" in art.llvm_ir
    assert art.ptx.count("shfl.sync.bfly.b32") == 5
    if shutil.which("ptxas"):
        src = tmp_path / "k.ptx"
        src.write_text(art.ptx)
        done = subprocess.run(
            ["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr


def test_shuffle_needs_whole_warps_and_no_guard():
    x = Buffer("X", (48,))

    def body(t):
        return allocate("o", (1,), lambda o: shuffle_xor(o, 0, x[t], 1))

    partial = Kernel("partial", (x,), loop("t", 48, body, kind="threadIdx.x"))
    with pytest.raises(KernelIRError, match="multiple of 32"):
        emit_ptx([partial])
    y = Buffer("Y", (64,))
    guarded = Kernel(
        "guarded",
        (x, y),
        seq(
            loop("a", 64, lambda a: y.store(a, 0.0), kind="threadIdx.x"),
            loop("b", 32, body, kind="threadIdx.x"),  # runs under `if (tid.x < 32)`
        ),
    )
    with pytest.raises(KernelIRError, match="warp shuffle"):
        emit_ptx([guarded])
