"""The GPU GEMM's float4 tile loads and double buffering: numerics through the GPU-semantics
interpreter against onnxruntime (edges in M, N and K, split-K, pointwise convs), and the PTX they
become (128-bit global and shared accesses, twice the shared memory, no local-memory spills)."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.ops.gpu.test_gpu_lowering import gpu, randn
from tests.ops.gpu.test_gpu_ptx import CONV, T, kernels_of
from tvmc.autotune.measure_cuda import ptxas_report
from tvmc.codegen.nvptx import emit_ptx
from tvmc.ops.schedule.gemm_gpu import BANK_PAD, gemm_tile, vector_width
from tvmc.ops.schedule.gpu_launch import GPUConfigError

DOUBLE = {"double_buffer": True}
CONFIGS = [
    {},
    DOUBLE,
    {"tile_m": (16, 4), "tile_n": (32, 4), "tile_k": 8, **DOUBLE},
    {"tile_m": (32, 4), "tile_n": (16, 2), "tile_k": 16, "unroll_k": True, **DOUBLE},
]
SPLIT = {"tile_m": (16, 2), "tile_n": (16, 4), "tile_k": 8, "split_k": 2, **DOUBLE}


@pytest.mark.parametrize("config", CONFIGS)
def test_matmul_vector_loads_with_edges(config, rng):
    # k = 36: float4 chunks, and a last k step that is partly outside; n = 44: a partial tile
    gpu("MatMul", {"a": randn(rng, 3, 5, 36), "b": randn(rng, 36, 44)}, config=config)
    gpu("MatMul", {"a": randn(rng, 2, 7, 24), "b": randn(rng, 2, 24, 10)}, config=config)


def test_matmul_split_k_double_buffered(rng):
    # k = 36 in 5 steps of 8, the last partly outside; split 2 needs an even count: k = 32
    gpu("MatMul", {"a": randn(rng, 3, 5, 32), "b": randn(rng, 32, 44)}, config=SPLIT)


@pytest.mark.parametrize("config", CONFIGS[:3])
def test_gemm_transposed_operands_fall_back_to_scalar_loads(config, rng):
    attrs = {"transA": 1, "transB": 1}
    gpu("Gemm", {"a": randn(rng, 32, 12), "b": randn(rng, 20, 32)}, attrs, config=config)


POINTWISE = [
    ((1, 8, 4, 8), (12, 8, 1, 1), 1),  # a row of 8: float4
    ((2, 6, 3, 6), (4, 3, 1, 1), 2),  # rows of 6: float2, two batches, two groups
    ((1, 5, 3, 5), (4, 5, 1, 1), 1),  # rows of 5: scalar
]


@pytest.mark.parametrize("x,w,group", POINTWISE)
@pytest.mark.parametrize("config", [{}, {"tile_m": (16, 2), "tile_n": (16, 4), **DOUBLE}])
def test_pointwise_conv_reads_pixel_runs(x, w, group, config, rng):
    constants = {"w": randn(rng, *w), "b": randn(rng, w[0])}
    gpu("Conv", {"x": randn(rng, *x)}, {"kernel_shape": [1, 1], "group": group}, constants,
        config=config)  # fmt: skip


@pytest.mark.parametrize("config", [DOUBLE, {"tile_k": 8, "split_k": 3, **DOUBLE}])
def test_conv_double_buffered(config, rng):
    constants = {"w": randn(rng, 8, 8, 3, 3), "b": randn(rng, 8)}  # K = 72: float4 weights
    gpu("Conv", {"x": randn(rng, 1, 8, 7, 7)}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        constants, config=config)  # fmt: skip


def test_vector_width_divides_every_extent():
    assert vector_width(4, 36, 16) == 4
    assert vector_width(4, 14) == 2
    assert vector_width(4, 7) == 1
    assert vector_width(1, 8) == 1


def test_double_buffering_doubles_shared_memory_and_caps_staging():
    plain = gemm_tile({"tile_m": (64, 4), "tile_n": (64, 4)}, 1, 256, 256, 256, 4)
    double = gemm_tile({"tile_m": (64, 4), "tile_n": (64, 4), **DOUBLE}, 1, 256, 256, 256, 4)
    assert double.shared_bytes(4) == 2 * plain.shared_bytes(4)
    with pytest.raises(GPUConfigError, match="stage"):  # 16 threads fetching 64x32 + 32x64 tiles
        gemm_tile({"tile_m": (64, 8), "tile_n": (16, 8), "tile_k": 32, **DOUBLE}, 1, 64, 64, 64, 4)


def _counts(ptx: str) -> dict[str, int]:
    return {op: len(re.findall(rf"\b{re.escape(op)}\s", ptx))
            for op in ("ld.global.nc.v4.b32", "ld.shared.v4.b32", "st.shared.v4.b32")}  # fmt: skip


CONV3 = CONV  # 3x3, pads 1
POINT = {**CONV, "kernel_shape": [1, 1], "pads": [0, 0, 0, 0]}
TILE = {"tile_m": (64, 4), "tile_n": (64, 4), "tile_k": 16, "split_k": 1}


def test_ptx_uses_128_bit_accesses():
    conv = emit_ptx(kernels_of("Conv", [T(1, 64, 14, 14), T(64, 64, 3, 3)], CONV3, TILE)).ptx
    counts = _counts(conv)
    assert counts["ld.global.nc.v4.b32"] >= 1  # packed weights, 4 k at a time
    assert counts["ld.shared.v4.b32"] >= 2  # each thread's 4-wide A and B operand rows
    pw = emit_ptx(kernels_of("Conv", [T(1, 64, 28, 28), T(64, 64, 1, 1)], POINT, TILE)).ptx
    assert _counts(pw)["ld.global.nc.v4.b32"] >= 2  # weights and pixel runs
    assert _counts(pw)["st.shared.v4.b32"] >= 1  # a pixel run lands as one 128-bit store


def test_unprovable_alignment_stays_scalar():
    # rows of 7 pixels and K = 63: a run could start anywhere, so no vector access at all
    kernels = kernels_of("Conv", [T(1, 63, 7, 7), T(64, 63, 1, 1)], POINT, TILE)
    pw = emit_ptx(kernels).ptx
    assert _counts(pw)["ld.global.nc.v4.b32"] == 0
    assert _counts(pw)["st.shared.v4.b32"] == 0


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_double_buffered_ptx_assembles_without_spills():
    config = {**TILE, **DOUBLE}
    art = emit_ptx(kernels_of("Conv", [T(1, 256, 14, 14), T(256, 256, 3, 3)], CONV3, config))
    assert max(d.shared_bytes for d in art.launch.values()) == 2 * (64 + BANK_PAD + 64) * 16 * 4
    report = ptxas_report(art.ptx, "sm_90")  # PTX ptxas refuses raises
    assert report and all(r.spill_bytes == 0 for r in report.values()), report
