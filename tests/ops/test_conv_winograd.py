"""Winograd convs (tvmc.ops.conv.cpu_winograd), compiled natively, against onnxruntime.

Shapes hit the layout's edges: planes not a multiple of the tile m (the last tiles half
outside), one tile in all, a strip row's last tile reading the next strip's first columns,
batches whose tiles share the GEMM's columns, asymmetric and zero pads, a stride-1
ConvTranspose (a conv of flipped weights). Temps start as NaN (`lower_and_run`), so a GEMM
column or strip element the kernels forget to write shows. Tolerance: F(4x4,3x3)'s rounding
is up to ~2e-5 of max |y| (coefficients up to 8 and 1/24), so atol is relative to that.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.ops.test_conv_kernels import AVX2, check_conv, randn
from tvmc.codegen import CPUTarget
from tvmc.graph import TensorType
from tvmc.kernel import Buffer, const, ramp, seq
from tvmc.kernel.expr import Broadcast, Load, Ramp
from tvmc.kernel.interpret import interpret
from tvmc.kernel.visitor import children
from tvmc.ops import OPS
from tvmc.ops.conv.cpu import Core, geometry_of, plan
from tvmc.ops.conv.cpu_tiles import fits_core
from tvmc.ops.conv.cpu_winograd import (
    BAND_CACHE_FACTOR,
    F4_MIN_TILES,
    FAR_WEIGHTS_FACTOR,
    MATRICES,
    MIN_GAIN,
    WinogradLayout,
    apply_matrix,
    default_band,
    default_tile,
    eligible,
    gain,
    grouped_plane,
    layout,
    offered_bands,
    plane_rows,
    transposed_columns,
    two_sided,
    weight_bytes,
    working_set,
)
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.schedule.injective import make_kernel

TARGET = LoweringTarget(num_threads=2)
LANES, REGISTERS = TARGET.lanes("float32"), TARGET.vector_registers
PAD1 = {"pads": [1, 1, 1, 1]}


def tolerance(x: np.ndarray, w: np.ndarray) -> dict[str, float]:
    """rtol 1e-4, atol 5e-5 of the output's scale (sqrt of the sum's terms, |y| ~ that)."""
    scale = float(np.sqrt(w[0].size)) * float(np.abs(x).max()) * float(np.abs(w).max())
    return {"rtol": 1e-4, "atol": 5e-5 * scale}


def attrs_of(w_shape, attrs, op="Conv"):
    """`attrs` with ONNX's defaults for a conv of weights `w_shape`, normalized for `op`."""
    n = len(w_shape) - 2
    defaults = {"kernel_shape": list(w_shape[2:]), "strides": [1] * n, "pads": [0] * 2 * n,
                "dilations": [1] * n, "group": 1}  # fmt: skip
    if op == "ConvTranspose":
        defaults["output_padding"] = [0] * n
    return OPS[op].normalize_attrs({**defaults, **attrs}, op)


def geometry(x_shape, w_shape, attrs, op="Conv"):
    types = [TensorType(s, "float32") for s in (x_shape, w_shape)]
    return geometry_of(op, attrs_of(w_shape, attrs, op), types)


CASES = [
    ((1, 8, 10, 10), (6, 8, 3, 3), PAD1),  # 10 = 2 F4 tiles + 2 of a third
    ((2, 5, 9, 13), (7, 5, 3, 3), {"pads": [0, 1, 2, 0]}),  # batch 2, asymmetric pads
    ((1, 16, 14, 14), (16, 16, 3, 3), PAD1),  # 16 tiles: one full vector
    ((1, 3, 5, 4), (2, 3, 3, 3), {}),  # unpadded: a 3x2 output, one F4 tile
    ((1, 4, 3, 3), (5, 4, 3, 3), PAD1),  # a 3x3 plane: tiles wider than the plane
    ((3, 6, 7, 30), (9, 6, 3, 3), PAD1),  # long rows: several vectors per image, 3 images
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CASES)
@pytest.mark.parametrize("schedule", ["winograd2", "winograd4"])
def test_winograd_matches_onnxruntime(x_shape, w_shape, attrs, schedule, rng):
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    assert plan({"schedule": schedule}, geometry(x_shape, w_shape, attrs), LANES,
                REGISTERS).schedule == schedule  # fmt: skip
    tol = tolerance(x, w)
    check_conv("Conv", x, w, attrs, b, config={"schedule": schedule}, tol=tol)
    check_conv("Conv", x, w, attrs, None, config={"schedule": schedule}, epilogue=True, tol=tol)


# (schedule, band): bands of one tile row, of two (the last band past the plane's last tile row
# where the rows are odd), of three for F2's shorter tiles
BANDS = [("winograd4", 1), ("winograd4", 2), ("winograd2", 3)]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CASES)
@pytest.mark.parametrize("schedule,band", BANDS)
def test_blocked_winograd_matches_onnxruntime(x_shape, w_shape, attrs, schedule, band, rng):
    """One kernel band by band (its V and M local, not NaN-filled temps: a column the GEMM
    reads unwritten would show as a wrong output only by chance, so the interpreted test
    below checks every access)."""
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    config = {"schedule": schedule, "band": band}
    lay = plan(config, geometry(x_shape, w_shape, attrs), LANES, REGISTERS).tiling
    assert isinstance(lay, WinogradLayout) and lay.band == min(band, lay.tiles_h)
    tol = tolerance(x, w)
    check_conv("Conv", x, w, attrs, b, config=config, tol=tol)
    check_conv("Conv", x, w, attrs, None, config=config, epilogue=True, tol=tol)


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs,band",
    [
        ((2, 5, 9, 13), (7, 5, 3, 3), {"pads": [0, 1, 2, 0]}, 2),  # 3 tile rows: 2 bands an image
        ((1, 32, 6, 6), (48, 16, 3, 3), {"group": 2, **PAD1}, 1),  # groups
    ],
)
def test_blocked_winograd_interpreted(x_shape, w_shape, attrs, band, rng):
    """Every load and store of the blocked kernel within its buffer (the kernel interpreter
    checks each), the last band's rows past the output never stored."""
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    config = {"plan": ["winograd4", 0, 0, band]}
    check_conv("Conv", x, w, attrs, b, config=config, tol=tolerance(x, w), interpreted=True)


L2 = 512 * 1024


def test_default_band_where_v_and_m_outgrow_the_caches():
    """Bands where the whole batch's V and M exceed BAND_CACHE_FACTOR L2s and a band's V and M
    with U (which each band reads whole) fit in them, keeping the GEMM's tile and most of its
    columns; none where the cache is unknown."""

    def band(x_shape, w_shape, threads=1, cache=L2):
        whole = layout(geometry(x_shape, w_shape, PAD1), 4, 8, 16)
        return whole, default_band(whole, 16, cache, threads)

    vgg, r = band((1, 64, 224, 224), (64, 64, 3, 3))  # V and M 59 MB
    assert r > 0 and band((1, 64, 224, 224), (64, 64, 3, 3), threads=2)[1] > 0
    chosen = layout(vgg.geo, 4, 8, 16, vgg.gemm_vectors, vgg.gemm_rows, r)
    u_bytes = 36 * 64 * 64 * 4
    assert working_set(chosen) + u_bytes <= BAND_CACHE_FACTOR * L2 < working_set(vgg)
    assert (chosen.gemm_vectors, chosen.gemm_rows) == (vgg.gemm_vectors, vgg.gemm_rows)
    assert band((1, 64, 224, 224), (64, 64, 3, 3), cache=0)[1] == 0
    # densenet121's 3x3 128->32 @56 at batch 4 (measured best: 8 tile rows, 120 tiles, 5 panels)
    assert band((4, 128, 56, 56), (32, 128, 3, 3))[1] == 8
    # resnet50's 3x3 64 @56: V and M 4 MB at batch 1, within the caches; at batch 4 an image's
    # with U past them, 8 tile rows (120 tiles, 5 panels) not
    assert band((1, 64, 56, 56), (64, 64, 3, 3))[1] == 0
    assert band((4, 64, 56, 56), (64, 64, 3, 3))[1] == 8
    # densenet121's at batch 1: V and M 1.2x the budget, where bands must keep nearly every
    # useful column (1.6x slower in bands of 8 tile rows, 2 threads)
    assert band((1, 128, 56, 56), (32, 128, 3, 3))[1] == 0
    # vgg19's 3x3 256 @56: U alone 9.4 MB
    assert band((1, 256, 56, 56), (256, 256, 3, 3))[1] == 0


def test_space_offers_bands_and_the_default_band():
    """The space's Winograd plans come unblocked and in bands of a few sizes (by geometry);
    the band the default picks for this core is a config of the space, its default."""
    geo = geometry((4, 128, 56, 56), (32, 128, 3, 3), PAD1)
    whole = layout(geo, 4, 8, 16)
    bands = offered_bands(whole, 16)
    assert bands[0] == 0 and len(bands) == len(set(bands)) > 1
    assert all(layout(geo, 4, 8, 16, whole.gemm_vectors, whole.gemm_rows, b).gemm_vectors
               == whole.gemm_vectors for b in bands)  # fmt: skip
    target = LoweringTarget(vector_bits=256, num_threads=2, vector_registers=16, cache_bytes=L2)
    types = [TensorType(s, "float32") for s in ((4, 128, 56, 56), (32, 128, 3, 3))]
    space = OPS["Conv"].space(attrs_of((32, 128, 3, 3), PAD1), types, target)
    default = space.get(space.default_index).values["plan"]
    assert default[0] == "winograd4" and default[3] == default_band(whole, 16, L2, 2) > 0
    plans = [space.get(i).values["plan"] for i in range(len(space))]
    assert any(p[0] == "winograd4" and p[3] == 0 for p in plans)


GROUPED = [
    ((1, 32, 10, 10), (48, 16, 3, 3), {"group": 2, **PAD1}),  # 2 groups of 16 -> 24
    ((2, 64, 9, 7), (64, 16, 3, 3), {"group": 4, "pads": [0, 1, 2, 0]}),  # batch 2, 4 groups
    ((1, 48, 12, 12), (54, 16, 3, 3), {"group": 3, **PAD1}),  # 18 a group: MR divides that
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", GROUPED)
@pytest.mark.parametrize("schedule,band", [("winograd2", 0), ("winograd4", 0), *BANDS])
def test_grouped_winograd_matches_onnxruntime(x_shape, w_shape, attrs, schedule, band, rng):
    """A GEMM per (position, group): each group's outputs read only its own channels (random
    weights would show one group's channels leaking into another's), unblocked and in bands."""
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    geo = geometry(x_shape, w_shape, attrs)
    config = {"schedule": schedule, "band": band}
    lay = plan(config, geo, LANES, REGISTERS).tiling
    assert isinstance(lay, WinogradLayout) and geo.group > 1
    assert geo.ocg % lay.gemm_rows == 0, "MR divides a group's output channels"
    tol = tolerance(x, w)
    check_conv("Conv", x, w, attrs, b, config=config, tol=tol)
    check_conv("Conv", x, w, attrs, None, config=config, epilogue=True, tol=tol)


def test_grouped_planes_keep_off_whole_pages():
    """A group's rows are padded alike (the planes stay the GEMM's batches in memory), by as
    many as spread a plane's groups together over the L1's sets; ungrouped planes index as
    before."""
    assert grouped_plane(5, const(3), 16, 1) == (5, const(3))
    # 2 groups of 128 channels x 216 columns: a plane of 256 rows is 54 pages
    rows = plane_rows(128, 216, 36, 2)
    assert rows > 128
    assert len({(t * 2 * rows * 216 * 4 // 64) % 64 for t in range(36)}) == 36


def test_grouped_winograd_default_by_channels_a_group():
    """alexnet's grouped 3x3 convs (2 groups of 192 on 12x12 planes) take Winograd by the
    small-plane rule, counting a group's channels in the GEMM and every channel in the
    transforms; groups of fewer than MIN_CHANNELS (ResNeXt's 4, depthwise 1) stay direct."""
    alexnet = geometry((1, 384, 12, 12), (384, 192, 3, 3), {"group": 2, **PAD1})
    assert eligible(alexnet, "float32")
    assert default_tile(alexnet, "float32", 8, 16) == 4
    ungrouped = geometry((1, 192, 12, 12), (192, 192, 3, 3), PAD1)
    # each group is that conv: the same gain, the transforms and GEMMs twice over
    assert gain(layout(alexnet, 4, 8, 16)) == pytest.approx(gain(layout(ungrouped, 4, 8, 16)))
    # on large planes too, groups take Winograd only by the gain rule: 3 groups of 16 (a
    # RegNet's width) are modelled at 0.8-0.9x, 4 groups of 56 at 1.8x
    sixteen = geometry((1, 48, 28, 28), (48, 16, 3, 3), {"group": 3, **PAD1})
    assert eligible(sixteen, "float32") and default_tile(sixteen, "float32", 8, 16) is None
    wide = geometry((1, 224, 14, 14), (224, 56, 3, 3), {"group": 4, **PAD1})
    assert default_tile(wide, "float32", 8, 16) == 4
    resnext = geometry((1, 128, 28, 28), (128, 4, 3, 3), {"group": 32, **PAD1})
    depthwise = geometry((1, 32, 28, 28), (32, 1, 3, 3), {"group": 32, **PAD1})
    for geo in (resnext, depthwise):
        assert not eligible(geo, "float32")
        assert not isinstance(plan({}, geo, LANES, REGISTERS).tiling, WinogradLayout)


@pytest.mark.parametrize("schedule", ["winograd2", "winograd4"])
def test_winograd_strips_beyond_the_stack_limit(schedule, rng):
    """A 300x310 plane's strips (F4: 6 x 75 x 312 floats, 560 KB) come from the heap."""
    x_shape, w_shape = (1, 4, 300, 310), (8, 4, 3, 3)
    lay = plan({"schedule": schedule}, geometry(x_shape, w_shape, PAD1), LANES, REGISTERS).tiling
    assert lay.strips_size * 4 > 256 * 1024  # codegen's stack_limit
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    check_conv("Conv", x, w, PAD1, b, config={"schedule": schedule}, epilogue=True,
               tol=tolerance(x, w))  # fmt: skip


@pytest.mark.parametrize("tile", [(1, 4), (2, 6), (3, 8)])
def test_winograd_gemm_tiles(tile, rng):
    """Every GEMM tile of the space computes the conv (MR not dividing K included)."""
    x_shape, w_shape = (1, 24, 20, 20), (20, 24, 3, 3)
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    config = {"plan": ["winograd4", *tile]}
    check_conv("Conv", x, w, PAD1, b, config=config, tol=tolerance(x, w))


@pytest.mark.skipif(CPUTarget.host().vector_bits < 256, reason="AVX2 code does not run here")
def test_winograd_on_avx2(rng):
    """8-lane vectors and 16 registers: the GEMM's default tile shrinks, the result stays."""
    x_shape, w_shape = (1, 16, 13, 11), (24, 16, 3, 3)
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    lay = plan({"schedule": "winograd4"}, geometry(x_shape, w_shape, PAD1), 8, 16).tiling
    assert isinstance(lay, WinogradLayout)
    assert lay.gemm_rows * lay.gemm_vectors + lay.gemm_vectors + 1 <= 16
    check_conv("Conv", x, w, PAD1, b, config={"schedule": "winograd4"}, target=AVX2,
               tol=tolerance(x, w))  # fmt: skip


def test_winograd_conv_transpose_of_stride_1(rng):
    """A stride-1 ConvTranspose is a conv of flipped, transposed weights: Winograd applies."""
    x_shape, w_shape = (1, 6, 9, 9), (6, 4, 3, 3)
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, 4)
    attrs = {"pads": [1, 1, 1, 1]}
    geo = geometry(x_shape, w_shape, attrs, "ConvTranspose")
    assert plan({"schedule": "winograd2"}, geo, LANES, REGISTERS).schedule == "winograd2"
    check_conv("ConvTranspose", x, w, attrs, b, config={"schedule": "winograd2"},
               tol=tolerance(x, w))  # fmt: skip


def test_grouped_conv_transpose_of_stride_1(rng):
    """A grouped stride-1 ConvTranspose: the stuffed conv's weights are regrouped, then
    transformed per group."""
    x_shape, w_shape = (1, 32, 9, 9), (32, 24, 3, 3)  # 2 groups: 16 in, 24 out each
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, 48)
    attrs = {"group": 2, **PAD1}
    geo = geometry(x_shape, w_shape, attrs, "ConvTranspose")
    assert plan({"schedule": "winograd4"}, geo, LANES, REGISTERS).schedule == "winograd4"
    check_conv("ConvTranspose", x, w, attrs, b, config={"schedule": "winograd4"},
               tol=tolerance(x, w))  # fmt: skip


def test_runtime_weights_fall_back_to_the_direct_conv(rng):
    """Winograd transforms the weights at compile time: a runtime weight runs the direct conv."""
    x_shape, w_shape = (1, 16, 14, 14), (16, 16, 3, 3)
    geo = geometry(x_shape, w_shape, PAD1)
    chosen = plan({"schedule": "winograd4"}, geo, LANES, REGISTERS, constant_weights=False)
    assert chosen.schedule in ("pixels", "channels")
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    check_conv("Conv", x, w, PAD1, b, config={"schedule": "winograd4"}, runtime_weight=True)


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs,dtype,why",
    [
        ((1, 16, 14, 14), (16, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, "float32",
         "strided"),
        ((1, 16, 14, 14), (16, 16, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
         "float32", "dilated"),
        ((1, 16, 14, 14), (16, 8, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, "float32",
         "groups of 8 channels"),
        ((1, 16, 14, 14), (16, 16, 5, 5), {"pads": [2, 2, 2, 2]}, "float32", "5x5"),
        ((1, 16, 14, 14), (16, 16, 3, 3), PAD1, "float16", "float16"),
        ((1, 16, 14), (16, 16, 3), {"pads": [1, 1]}, "float32", "1-D"),
    ],
)  # fmt: skip
def test_winograd_not_eligible(x_shape, w_shape, attrs, dtype, why):
    geo = geometry(x_shape, w_shape, attrs)
    assert not eligible(geo, dtype), why
    chosen = plan({"schedule": "winograd4"}, geo, LANES, REGISTERS, dtype=dtype)
    assert not isinstance(chosen.tiling, WinogradLayout), why


@pytest.mark.parametrize(
    "x_shape,w_shape,m",
    [
        ((1, 64, 56, 56), (64, 64, 3, 3), 4),  # resnet50's: F4 2.2x the direct conv
        ((1, 16, 55, 55), (64, 16, 3, 3), 4),  # squeezenet's expand3x3
        ((1, 512, 14, 14), (512, 512, 3, 3), 4),
        ((1, 192, 13, 13), (384, 192, 3, 3), 4),
        ((1, 192, 12, 12), (384, 192, 3, 3), 4),  # zfnet512's 12x12 planes: F4 1.7-1.9x
        ((1, 128, 11, 11), (128, 128, 3, 3), 4),
        ((1, 256, 10, 10), (256, 256, 3, 3), 2),  # F2 1.7x, F4 1.3-1.4x
        ((1, 32, 10, 10), (32, 32, 3, 3), None),  # few channels for the transforms: F2 0.98x
        ((1, 512, 7, 7), (512, 512, 3, 3), None),  # 7x7 planes: F4 0.4x, F2 1.07x, direct
        ((1, 3, 224, 224), (64, 3, 3, 3), None),  # 3 input channels: 0.2x, direct
    ],
)
def test_default_tile_follows_the_measured_table(x_shape, w_shape, m):
    geo = geometry(x_shape, w_shape, PAD1)
    assert default_tile(geo, "float32", LANES, REGISTERS) == m
    chosen = plan({}, geo, LANES, REGISTERS)
    assert chosen.schedule == (f"winograd{m}" if m else chosen.schedule)
    assert isinstance(chosen.tiling, WinogradLayout) == (m is not None)


def test_small_planes_take_the_tile_of_the_best_gain_whose_gemm_fits_the_core():
    """Below MIN_PLANE the tile whose GEMM does the fewest multiply-adds (padding and transforms
    counted) wins, but never through a GEMM tile that cannot keep the FMA pipes fed: on an 8x8
    plane F4's 6 tiles make an AVX2 GEMM of one vector a row (9 loads for 8 FMAs), so AVX2
    takes F2, whose GEMM is wider, though F4's gain is the larger."""
    geo = geometry((1, 256, 8, 8), (256, 256, 3, 3), PAD1)
    f2, f4 = (layout(geo, m, 8, 16) for m in (2, 4))
    assert gain(f4) > gain(f2) >= MIN_GAIN
    assert not fits_core(f4.gemm_rows, f4.gemm_vectors, 8)
    assert default_tile(geo, "float32", 8, 16) == 2
    # the padded columns count: 20 F2 tiles on 24 columns do 9 * 64 / (16 * 24) of the direct
    # conv's multiply-adds before the transforms, and the transforms cost on top
    assert f2.columns == 24
    assert gain(f2) < 9 * 64 / (16 * 24)
    # fewer channels weigh the transforms more (per channel and tile, against the GEMM's per
    # channel pair and tile)
    few = layout(geometry((1, 32, 8, 8), (32, 32, 3, 3), PAD1), 2, 8, 16)
    assert gain(few) < gain(f2)


def test_small_planes_keep_the_direct_conv_on_cores_of_more_flops_a_cycle():
    """Below MIN_PLANE the rule was measured to pay on a core of 32 flops a cycle; on the Zen 5
    (64) zfnet512's 12x12 F4 convs lost to the direct conv (the GEMM streams its transformed
    weights from memory), so a core of more flops a cycle keeps the direct conv there; planes
    of MIN_PLANE and more take F4 on any core."""
    twelve = geometry((1, 512, 12, 12), (512, 512, 3, 3), PAD1)
    fourteen = geometry((1, 512, 14, 14), (512, 512, 3, 3), PAD1)
    assert default_tile(twelve, "float32", LANES, REGISTERS, 32) == 4
    assert default_tile(twelve, "float32", LANES, REGISTERS, 64) is None
    assert default_tile(fourteen, "float32", LANES, REGISTERS, 64) == 4
    zen5 = Core(48 << 10, 32, 2, 64)
    assert not isinstance(plan({}, twelve, LANES, REGISTERS, core=zen5).tiling, WinogradLayout)
    assert isinstance(plan({}, twelve, LANES, REGISTERS, core=Core()).tiling, WinogradLayout)


def test_fast_cores_take_f2_where_f4_weights_come_from_memory_for_few_tiles():
    """On a core of 64 flops a cycle resnet50's 3x3 256 @14 at batch 1 reads 9.4 MB of F4
    weights for 16 tiles each; F2's 4.2 MB serve 56 (Intel Xeon, 2 MB L2: 1.04x end to end).
    F4 stays where its weights are within FAR_WEIGHTS_FACTOR times the L2, where enough tiles
    share them (batch 4: 64), on a core of 32 flops a cycle, and where the cache is unknown."""
    geo = geometry((1, 256, 14, 14), (256, 256, 3, 3), PAD1)
    l2 = 2 << 20
    f4 = layout(geo, 4, LANES, REGISTERS)
    assert weight_bytes(f4, 4) == 36 * 256 * 256 * 4 > FAR_WEIGHTS_FACTOR * l2
    assert f4.tiles == 16 < F4_MIN_TILES
    assert default_tile(geo, "float32", LANES, REGISTERS, 64, l2) == 2
    assert default_tile(geo, "float32", LANES, REGISTERS, 64, 4 * l2) == 4
    assert default_tile(geo, "float32", LANES, REGISTERS, 32, l2) == 4
    assert default_tile(geo, "float32", LANES, REGISTERS, 64, 0) == 4
    batch4 = geometry((4, 256, 14, 14), (256, 256, 3, 3), PAD1)
    assert default_tile(batch4, "float32", LANES, REGISTERS, 64, l2) == 4
    small = geometry((1, 128, 14, 14), (128, 128, 3, 3), PAD1)  # 2.4 MB of F4 weights
    assert default_tile(small, "float32", LANES, REGISTERS, 64, l2) == 4
    xeon = Core(48 << 10, 64, 2, 64)
    assert plan({}, geo, LANES, REGISTERS, l2 // 4, core=xeon).schedule == "winograd2"
    assert plan({}, geo, LANES, REGISTERS, l2 // 4, core=Core()).schedule == "winograd4"


def test_space_offers_winograd_and_its_default(rng):
    """Eligible convs get F2 and F4 plans beside the direct ones, and the space's default
    config is the template's default plan (Winograd's F4 with its default GEMM tile)."""
    shapes = [(1, 64, 28, 28), (64, 64, 3, 3)]
    full = attrs_of((64, 64, 3, 3), PAD1)
    types = [TensorType(s, "float32") for s in shapes]
    space = OPS["Conv"].space(full, types, TARGET)
    names = {p[0] for p in space.knobs[0].candidates}
    assert {"winograd2", "winograd4", "pixels", "channels"} <= names
    geo = geometry_of("Conv", full, types)
    default = plan(space.get(space.default_index).values, geo, LANES, REGISTERS)
    assert default == plan({}, geo, LANES, REGISTERS) and default.schedule == "winograd4"
    strided = attrs_of((64, 64, 3, 3), {**PAD1, "strides": [2, 2]})
    other = OPS["Conv"].space(strided, types, TARGET)
    assert not {p[0] for p in other.knobs[0].candidates} & {"winograd2", "winograd4"}


@pytest.mark.parametrize("channels, plane", [(128, 28), (64, 56), (512, 28), (32, 27)])
def test_default_gemm_tile_fits_an_avx2_core(channels, plane):
    """On 8 lanes and 16 registers the default GEMM tile keeps the FMA pipes fed: not 8 x 1
    (9 loads for 8 FMAs, which the cycle count alone preferred; 1.3-1.5x slower measured)."""
    geo = geometry((1, channels, plane, plane), (channels, channels, 3, 3), PAD1)
    lay = layout(geo, 4, 8, 16)
    useful = lay.tiles / lay.columns
    assert (lay.gemm_rows, lay.gemm_vectors) != (8, 1)
    assert fits_core(lay.gemm_rows, lay.gemm_vectors, 8, useful)


def test_layout_covers_the_plane_and_the_strip_overrun():
    """tiles_w * m leaves the 2 columns the last tile of a strip row reads past the output
    width; the GEMM's columns are whole panels of every image's tiles."""
    for width in range(1, 40):
        geo = geometry((2, 8, 9, width), (8, 8, 3, 3), PAD1)
        for m in (2, 4):
            lay = layout(geo, m, LANES, REGISTERS)
            assert lay.pitch >= width + 2 and lay.pitch - m < width + 2
            assert lay.tiles_h * m >= 9 and lay.columns % (lay.gemm_vectors * LANES) == 0
            assert lay.columns >= 2 * lay.tiles


def _distinct_ops(exprs) -> int:
    """Arithmetic nodes (binary ops and multiply-adds) of the expressions' DAG, each once."""
    seen: set[int] = set()

    def visit(node) -> None:
        if id(node) in seen or isinstance(node, (Load, Broadcast, Ramp)):
            return
        seen.add(id(node))
        for child in children(node):
            visit(child)

    for e in exprs:
        visit(e)
    return len(seen)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("which", [0, 2], ids=["input B^T d B", "output A^T M A"])
def test_two_sided_transforms_compute_the_matrix_products(m, which, rng):
    """The factored transforms (shared sums, differences and even/odd halves, multiply-adds)
    give matrix @ d @ matrix^T, run by the interpreter."""
    matrix = np.array(MATRICES[m][which], dtype=np.float64)
    rows, cols = matrix.shape
    src = Buffer("d", (cols * cols * LANES,))
    dst = Buffer("out", (rows * rows * LANES,))
    d = [[src[ramp((i * cols + j) * LANES, LANES)] for j in range(cols)] for i in range(cols)]
    out = two_sided(matrix.tolist(), d, LANES)
    body = seq(*(dst.store(ramp((i * rows + j) * LANES, LANES), out[i][j])
                 for i in range(rows) for j in range(rows)))  # fmt: skip
    data = rng.standard_normal((cols, cols, LANES)).astype(np.float32)
    result = np.zeros((rows, rows, LANES), np.float32)
    kernel = make_kernel("t", body)
    arrays = {"d": data.reshape(-1), "out": result.reshape(-1)}
    interpret(kernel, *(arrays[b.name] for b in kernel.params))
    expected = np.einsum("ai,ijl,bj->abl", matrix, data.astype(np.float64), matrix)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_f4_transforms_take_fewer_operations_than_row_by_row():
    """F4's B^T on one column: 13 operations (30 row by row, without multiply-adds); A^T: 10."""
    src = Buffer("d", (6 * LANES,))
    column = [src[ramp(i * LANES, LANES)] for i in range(6)]
    bt, _, at = MATRICES[4]
    assert _distinct_ops(apply_matrix(bt, column, LANES)) == 13
    assert _distinct_ops(apply_matrix(at, column, LANES)) == 10


@pytest.mark.parametrize("m,n", [(2, 4), (2, 8), (4, 4), (4, 8), (4, 16)])
def test_transposed_columns_pick_each_tiles_column(m, n, rng):
    """Column j of n consecutive tiles (m apart in a strip row, alpha = m + 2 wide), by
    transposes within 4-lane groups: lane t holds position start + j + m * t."""
    alpha, start = m + 2, 3
    src = Buffer("s", (start + n * m + 2,))
    dst = Buffer("out", (alpha * n,))
    columns = transposed_columns(src, const(start), m, n, alpha)
    body = seq(*(dst.store(ramp(j * n, n), c) for j, c in enumerate(columns)))
    data = rng.standard_normal(src.shape).astype(np.float32)
    result = np.zeros(dst.shape, np.float32)
    kernel = make_kernel("t", body)
    arrays = {"s": data, "out": result}
    interpret(kernel, *(arrays[b.name] for b in kernel.params))
    expected = [data[start + j + m * np.arange(n)] for j in range(alpha)]
    np.testing.assert_array_equal(result.reshape(alpha, n), np.array(expected))
