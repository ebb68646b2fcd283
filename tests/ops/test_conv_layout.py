"""The CPU conv input transform (tvmc/ops/conv/cpu_layout.py): strided rows as vector code."""

from __future__ import annotations

import numpy as np
import pytest

from tvmc.codegen import emit_cpu, load_jit
from tvmc.kernel import MAX_SPAN_STRIDE, Buffer, For, Kernel, Load, interpret
from tvmc.kernel.visitor import post_order
from tvmc.ops.conv.cpu import tiled_geometry
from tvmc.ops.conv.cpu_layout import transform_kernel_body
from tvmc.ops.conv.geometry import ConvGeometry


def _transform(stride: int, size: int = 96, channels: int = 2) -> tuple[Kernel, ConvGeometry]:
    geo = ConvGeometry(1, channels, channels, 1, (size, size), (3, 3),
                       ((size - 1) // stride + 1,) * 2, (stride, stride), (1, 1), (1, 1),
                       (1, 1))  # fmt: skip
    x = Buffer("X", (1, channels, size, size))
    dst = Buffer("T", (geo.channels * geo.channel_stride,))
    return Kernel("transform", (dst, x), transform_kernel_body(geo, x, dst, 16, False)), geo


def _vector_reads_of_input(kernel: Kernel) -> int:
    loops = [n for n in post_order(kernel.body) if isinstance(n, For) and n.kind == "vectorized"]
    return sum(
        any(isinstance(e, Load) and e.buffer.name == "X" for e in post_order(f.body)) for f in loops
    )


@pytest.mark.parametrize("stride", [1, 2, 3, 4, 5])
def test_rows_of_small_strides_are_vector_copies_that_match_the_interpreter(stride):
    # A stride-2 row of 16 left scalar was vectorized by LLVM across rows, with gathers and
    # scatters; as a vector it is one span load and a shuffle.
    kernel, _ = _transform(stride)
    assert (_vector_reads_of_input(kernel) > 0) == (stride <= MAX_SPAN_STRIDE)
    x = np.random.default_rng(stride).standard_normal(kernel.params[1].shape).astype(np.float32)
    compiled = np.full(kernel.params[0].shape, np.nan, np.float32)
    interpreted = compiled.copy()
    load_jit(emit_cpu([kernel])).run("transform", compiled, x)
    interpret(kernel, interpreted, x)
    np.testing.assert_array_equal(compiled, interpreted)


def _geometry(kernel: int, stride: int, pad: int, size: tuple[int, ...] = (5, 7)) -> ConvGeometry:
    spatial = len(size)
    out = tuple((s + 2 * pad - kernel) // stride + 1 for s in size)
    return ConvGeometry(2, 8, 16, 1, size, (kernel,) * spatial, out, (stride,) * spatial,
                        (1,) * spatial, (pad,) * spatial, (1,) * spatial)  # fmt: skip


def test_only_a_pointwise_conv_reads_its_planes_as_one_row():
    flat = _geometry(1, 1, 0).flattened()
    assert (flat.in_shape, flat.out_shape, flat.kernel, flat.plane) == ((35,), (35,), (1,), (35,))
    assert flat.channel_stride == 35 and flat.is_identity
    assert _geometry(1, 1, 0, (2, 3, 4)).flattened().out_shape == (24,)  # every plane axis
    for other in (
        _geometry(3, 1, 1),
        _geometry(1, 1, 1),
        _geometry(1, 1, 0, (9,)),
    ):
        assert other.flattened() is other  # 3x3, padded, already one axis
    # strided: the transform's compact planes (the output's shape) as one row
    strided = _geometry(1, 2, 0)
    flat = strided.flattened()
    assert (flat.in_shape, flat.out_shape, flat.plane) == ((12,), (12,), (12,))
    assert flat.transformed_from is strided and not strided.is_identity
    assert flat.channel_stride == strided.channel_stride == 12


def test_an_unphased_geometry_reads_the_padded_input_with_its_pixels_stride_apart():
    """3x3/2 pad 1 on 7x5 planes (out 4x3): four phase planes of 5x4, or one of 9x7, where a
    tap is its kernel position's offset and a row's pixels sit 2 apart (the tiles compute the
    conv so: test_conv_kernels' unphased cases)."""
    phased = _geometry(3, 2, 1, (7, 5))
    unphased = phased.unphased()
    assert (phased.n_phases, phased.plane, phased.pixel_steps) == (4, (5, 4), (1, 1))
    assert (unphased.n_phases, unphased.plane, unphased.pixel_steps) == (1, (9, 7), (2, 2))
    assert [unphased.tap_offset(t) for t in unphased.taps] == [0, 1, 2, 7, 8, 9, 14, 15, 16]
    assert not unphased.is_identity
    # unpadded, a window that ends where the input does: the input as it is
    assert _geometry(2, 2, 0, (6, 4)).unphased().is_identity


@pytest.mark.parametrize("stride,pad,size", [(2, 1, (7, 6)), (3, 0, (8,)), (2, 2, (3, 5, 4))])
def test_the_unphased_transform_pads_the_input(stride, pad, size):
    """Its one plane per channel holds the input at (pad, pad, ...), zeros around it."""
    geo = _geometry(3, stride, pad, size).unphased()
    x = Buffer("X", (2, 8, *size))
    dst = Buffer("T", (geo.batch * geo.channels * geo.channel_stride,))
    kernel = Kernel("transform", (dst, x), transform_kernel_body(geo, x, dst, 8, False))
    values = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    got = np.full(dst.shape, np.nan, np.float32)
    load_jit(emit_cpu([kernel])).run("transform", got, values)
    want = np.zeros((2, 8, *geo.plane), np.float32)
    inside = tuple(slice(pad, min(pad + n, p)) for n, p in zip(size, geo.plane))
    want[(..., *inside)] = values[(..., *(slice(0, s.stop - s.start) for s in inside))]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_the_planes_as_one_row_where_the_default_tile_fills_more_lanes_so():
    """Pixel or channel tiles, whichever the default plan takes: AVX2's channel tile of 4
    pixels on rows of 7 fills 7 of 8 columns, on one row of 49 49 of 52; AVX-512's of 7 pixels
    fills rows of 7 whole, so they stay."""

    def conv(cin: int, cout: int, size: int) -> ConvGeometry:
        return ConvGeometry(1, cin, cout, 1, (size, size), (1, 1), (size, size), (1, 1),
                            (1, 1), (0, 0), (1, 1))  # fmt: skip

    seven = conv(2048, 512, 7)
    assert tiled_geometry(seven, 8, 16).out_shape == (49,)  # AVX2
    assert tiled_geometry(seven, 16, 32) is seven  # AVX-512
    assert tiled_geometry(conv(64, 256, 56), 16, 32).out_shape == (56, 56)  # 2 rows fill 7 vectors
