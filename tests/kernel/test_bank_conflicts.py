"""Bank-conflict counting in the interpreter: synthetic access patterns with known answers, and
what the GPU GEMM and tiled conv templates' shared tiles measure (their padding and pitch
choices are what keep these factors low)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ops.gpu.test_gpu_ptx import CONV, T, kernels_of
from tvmc.kernel import Barrier, Buffer, Kernel, allocate, loop, ramp, seq
from tvmc.kernel.bank_conflicts import bank_conflicts, worst


def pattern_kernel(index, lanes: int = 1) -> Kernel:
    """32 threads each store then read shared element(s) `index(t)` (4 x 32 x 32 floats)."""
    y = Buffer("Y", (32, lanes))

    def thread(s, t):
        at = index(t) if lanes == 1 else ramp(index(t), lanes)
        out = (t, 0) if lanes == 1 else (t, ramp(0, lanes))
        return seq(s.store(at, 1.0), Barrier(), y.store(out, s[at]), Barrier())

    body = allocate("s", (4096,), lambda s: loop("t", 32, lambda t: thread(s, t), "threadIdx.x"),
                    "float32", "shared")  # fmt: skip
    return Kernel("pattern", (y,), body)


@pytest.mark.parametrize(
    "index,lanes,factor",
    [
        (lambda t: t, 1, 1.0),  # consecutive words: one wavefront
        (lambda t: t * 2, 1, 2.0),  # stride 2: two threads per bank
        (lambda t: t * 32, 1, 32.0),  # one column: all in bank 0
        (lambda t: t * 33, 1, 1.0),  # a padded column: all banks
        (lambda t: t * 4, 4, 1.0),  # float4 per thread: four quarter-warp wavefronts, ideal
        (lambda t: t * 8, 4, 2.0),  # float4 with gaps: each quarter warp spans 64 words
    ],
)
def test_known_patterns(index, lanes, factor):
    sites = bank_conflicts(pattern_kernel(index, lanes), np.zeros((32, lanes), np.float32))
    assert [s.site for s in sites] == ["s store 0", "s load 1"]
    assert all(s.factor == factor for s in sites), sites


def test_a_broadcast_costs_nothing_extra():
    y = Buffer("Y", (32,))

    def thread(s, t):
        return seq(s.store(t, 2.0), Barrier(), y.store(t, s[0] + s[5]), Barrier())

    body = allocate("s", (32,), lambda s: loop("t", 32, lambda t: thread(s, t), "threadIdx.x"),
                    "float32", "shared")  # fmt: skip
    sites = bank_conflicts(Kernel("bcast", (y,), body), np.zeros(32, np.float32))
    assert worst(sites) == 1.0


def _measure(op, types, attrs, config, constant_from=1):
    (kernel, *_) = kernels_of(op, types, attrs, config, constant_from)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(b.shape).astype(b.dtype) for b in kernel.params]
    return {s.site: s.factor for s in bank_conflicts(kernel, *arrays)}


TILES = {"tile_m": (64, 4), "tile_n": (64, 4), "tile_k": 16, "split_k": 1}


def test_gemm_tiles_read_conflict_free_and_store_a_at_most_two_way():
    for k_channels in (8, 7):  # float4 A chunks (K = 72), and scalar ones (K = 63)
        f = _measure("Conv", [T(1, k_channels, 8, 8), T(64, k_channels, 3, 3)], CONV, TILES)
        assert all(v == 1.0 for s, v in f.items() if s.startswith("a_tile load")), f
        assert all(v == 1.0 for s, v in f.items() if s.startswith("b_tile store")), f
        assert max(v for s, v in f.items() if s.startswith("a_tile store")) <= 2.0, f
        # a thread's 4 B reads are scalar in the IR (4 words apart: 2-way); LLVM merges them
        # into one ld.shared.v4 (test_gpu_gemm_vector), which quarter warps read conflict-free
        assert max(v for s, v in f.items() if s.startswith("b_tile load")) <= 2.0, f


@pytest.mark.parametrize("strides", [[1, 1], [2, 2]])
def test_tiled_conv_is_conflict_free(strides):
    config = {"schedule": "tiled", "tile_m": (32, 4), "tile_n": (32, 2), "tile_k": 8}
    size = 8 * strides[0]  # 8 x 8 outputs: two blocks of 4 x 8
    f = _measure(
        "Conv", [T(1, 8, size, size), T(32, 8, 3, 3)], {**CONV, "strides": strides}, config
    )
    assert set(f.values()) == {1.0}, f
