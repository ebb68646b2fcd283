"""Knob spaces of the tunable templates (Conv, ConvTranspose, MatMul, Gemm).

Every config of a space must build and compute the op: a handful of workloads per op, the first
and last config and 8 random ones each, natively compiled, against the numpy reference
(float32: rtol 1e-4, atol 1e-5; the kernels sum in another order). Weights are constants, as in
models. Also: index <-> entity round trips, and the template's default is one of the configs.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.lowering_helpers import lower_node, run_node
from tvmc.graph import Node, TensorType
from tvmc.kernel import kernel_str
from tvmc.ops import OPS, evaluate_node
from tvmc.ops.conv.cpu import geometry_of, plan, pointwise_reads, tiled_geometry
from tvmc.ops.conv.cpu_tiles import ChannelTiling
from tvmc.ops.conv.cpu_transpose import columns_geometry, uses_columns
from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.lowering import LowerContext, LoweringTarget
from tvmc.ops.schedule.microkernel import accumulator_dtype
from tvmc.ops.space import ConfigSpace

TOL = {"rtol": 1e-4, "atol": 1e-5}
# Winograd F(4x4,3x3)'s rounding, relative to max |y|: up to 2e-5 measured (cpu_winograd)
WINOGRAD_ERROR = 5e-5
TARGET = LoweringTarget(num_threads=2)  # what run_node lowers for
AVX2 = LoweringTarget(vector_bits=256, num_threads=2, vector_registers=16)
RANDOM_CONFIGS = 8


def conv_attrs(kernel: tuple[int, ...], strides=None, pads=None, dilations=None, group=1, **kw):
    n = len(kernel)
    return {"kernel_shape": kernel, "strides": strides or (1,) * n, "pads": pads or (0,) * 2 * n,
            "dilations": dilations or (1,) * n, "group": group, **kw}  # fmt: skip


GEMM = {"transA": False, "transB": False, "alpha": 1.0, "beta": 1.0}

# (op, input shapes, attrs)
WORKLOADS: list[tuple[str, list[tuple[int, ...]], dict[str, Any]]] = [
    ("Conv", [(1, 16, 14, 14), (24, 16, 3, 3), (24,)], conv_attrs((3, 3), pads=(1, 1, 1, 1))),
    ("Conv", [(1, 8, 15, 13), (20, 8, 3, 3)], conv_attrs((3, 3), strides=(2, 2))),
    ("Conv", [(2, 32, 9, 9), (40, 32, 1, 1), (40,)], conv_attrs((1, 1))),
    ("Conv", [(1, 3, 23, 23), (16, 3, 7, 7)], conv_attrs((7, 7), (2, 2), (3, 3, 3, 3))),
    ("Conv", [(1, 12, 16, 16), (12, 1, 3, 3)], conv_attrs((3, 3), pads=(1,) * 4, group=12)),
    ("Conv", [(1, 8, 10, 10), (12, 4, 3, 3)], conv_attrs((3, 3), dilations=(2, 1), group=2)),
    ("Conv", [(1, 6, 30), (10, 6, 5)], conv_attrs((5,), pads=(2, 2))),
    (
        "ConvTranspose",
        [(1, 8, 7, 7), (8, 6, 3, 3)],
        conv_attrs((3, 3), (2, 2), (1,) * 4, output_padding=(1, 1)),
    ),
    (
        "ConvTranspose",
        [(1, 6, 9, 9), (6, 4, 3, 3)],
        conv_attrs((3, 3), pads=(1,) * 4, output_padding=(0, 0)),
    ),
    ("MatMul", [(37, 50), (50, 70)], {}),
    ("MatMul", [(3, 9, 20), (3, 20, 33)], {}),
    ("MatMul", [(1, 100), (100, 200)], {}),
    ("Gemm", [(13, 24), (40, 24), (40,)], {**GEMM, "transB": True, "alpha": 0.5}),
]
IDS = [f"{op}-{'x'.join(map(str, shapes[0]))}" for op, shapes, _ in WORKLOADS]


def space_of(
    op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any], target: LoweringTarget = TARGET
) -> ConfigSpace:
    opdef = OPS[op]
    full = opdef.normalize_attrs(attrs, op)
    return opdef.space(full, [TensorType(s, "float32") for s in shapes], target)


def configs_to_check(space: ConfigSpace, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(space), RANDOM_CONFIGS) if len(space) > 1 else []
    return sorted({0, len(space) - 1, *(int(i) for i in picks)})


@pytest.mark.parametrize("op,shapes,attrs", WORKLOADS, ids=IDS)
def test_space_configs_build_and_match_reference(op, shapes, attrs):
    space = space_of(op, shapes, attrs)
    assert len(space) > 0
    assert {k.name for k in space.knobs} <= KNOBS[op]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    node = Node(op, [f"in{i}" for i in range(len(shapes))], ["out"],
                OPS[op].normalize_attrs(attrs, op))  # fmt: skip
    (want,) = evaluate_node(node, arrays)
    out_types = [TensorType.of(want)]
    constants = {i: a for i, a in enumerate(arrays) if i >= 1}
    for index in configs_to_check(space, seed=len(space)):
        config = space.get(index)
        (got,) = run_node(node, arrays, out_types, constants, config=config.values)
        tol = TOL
        if str(config.values.get("plan", [""])[0]).startswith("winograd"):
            tol = {"rtol": 1e-4, "atol": WINOGRAD_ERROR * float(np.abs(want).max())}
        np.testing.assert_allclose(got, want, **tol, err_msg=f"config {config.values}")


KNOBS = {
    "Conv": {"plan"},
    "MatMul": {"tile_m", "tile_n", "order"},
}
KNOBS["ConvTranspose"] = KNOBS["Conv"]
KNOBS["Gemm"] = KNOBS["MatMul"]


@pytest.mark.parametrize("op,shapes,attrs", WORKLOADS, ids=IDS)
def test_index_entity_round_trip(op, shapes, attrs):
    space = space_of(op, shapes, attrs)
    for index in configs_to_check(space, seed=1):
        config = space.get(index)
        assert config.index == index
        entity = json.loads(json.dumps(config.entity))  # as a record stores it
        back = space.from_entity(entity)
        assert back.index == index and back.values == config.values


CONV_WORKLOADS = [w for w in WORKLOADS if w[0] in ("Conv", "ConvTranspose")]


@pytest.mark.parametrize("op,shapes,attrs", CONV_WORKLOADS, ids=IDS[: len(CONV_WORKLOADS)])
@pytest.mark.parametrize("target", ["avx512", "avx2"])
def test_conv_default_is_in_space(op, shapes, attrs, target):
    """The template's own choice for an empty config is the plan of some config of the space."""
    full = OPS[op].normalize_attrs(attrs, op)
    types = [TensorType(s, "float32") for s in shapes]
    lowering = {"avx512": TARGET, "avx2": AVX2}[target]
    lanes = lowering.lanes(accumulator_dtype("float32"))
    registers = lowering.vector_registers
    geo = geometry_of(op, full, types, lowering)
    out = OPS[op].infer(full, types)[0]
    stated = ConvGeometry.of_node(op, full, shapes[0], shapes[1], out.shape)
    assert stated.transposed == (op == "ConvTranspose")
    # a strided ConvTranspose tiles its columns conv (cpu_transpose), others their conv reading
    # (a pointwise conv's planes as one row where its tiles fill more lanes so)
    assert geo == (columns_geometry(stated) if uses_columns(stated)
                   else tiled_geometry(stated.stuffed(), lanes, registers))  # fmt: skip
    space = space_of(op, shapes, attrs, lowering)
    plans = {plan(space.get(i).values, geo, lanes, registers) for i in range(len(space))}
    assert plan({}, geo, lanes, registers) in plans
    assert space.default_index is not None
    chosen = plan(space.get(space.default_index).values, geo, lanes, registers)
    assert chosen == plan({}, geo, lanes, registers)


@pytest.mark.parametrize("cin, cout, hw", [(32, 128, 2), (96, 16, 2), (48, 192, 2), (128, 128, 2)])
def test_conv_default_of_a_one_tap_flat_tile_is_in_space(cin, cout, hw):
    """An AVX2 flat channels tile defaults to unrolling "all" its taps; of a 1x1 conv that is
    its one tap, which the space names "none" (`offered_unroll`): the default is a config
    (mobilenet_v2's and efficientnet's 1x1 convs over 2x2 planes had none)."""
    shapes = [(1, cin, hw, hw), (cout, cin, 1, 1)]
    attrs = {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0] * 4, "dilations": [1, 1],
             "group": 1}  # fmt: skip
    full = OPS["Conv"].normalize_attrs(attrs, "Conv")
    geo = geometry_of("Conv", full, [TensorType(x, "float32") for x in shapes], AVX2)
    space = space_of("Conv", shapes, attrs, AVX2)
    assert space.default_index is not None
    want = plan({}, geo, 8, 16)
    assert want.unroll_taps == "none"
    assert plan(space.get(space.default_index).values, geo, 8, 16) == want


@pytest.mark.parametrize("op,shapes,attrs", [w for w in WORKLOADS if w[0] in ("MatMul", "Gemm")])
def test_gemm_default_index_builds_the_default_kernels(op, shapes, attrs):
    space = space_of(op, shapes, attrs)
    full = OPS[op].normalize_attrs(attrs, op)
    node = Node(op, [f"in{i}" for i in range(len(shapes))], ["out"], full)
    in_types = [TensorType(s, "float32") for s in shapes]
    out_types = OPS[op].infer(full, in_types)
    rng = np.random.default_rng(0)
    constants = {i: rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes) if i}

    def code(config: dict[str, Any]) -> str:
        kernels, _, _ = lower_node(LowerContext(TARGET, config), node, in_types, out_types,
                                   constants)  # fmt: skip
        return "\n".join(kernel_str(k) for k in kernels)

    assert space.default_index is not None
    assert code(space.get(space.default_index).values) == code({})


@pytest.mark.parametrize(
    "shapes,attrs,size",
    [
        ([(1, 64, 56, 56), (64, 64, 3, 3)], conv_attrs((3, 3), pads=(1,) * 4), 237),  # 51 Winograd
        ([(1, 256, 56, 56), (64, 256, 1, 1)], conv_attrs((1, 1)), 64),
        ([(1, 32, 112, 112), (32, 1, 3, 3)], conv_attrs((3, 3), pads=(1,) * 4, group=32), 54),
    ],
)
def test_resnet_like_space_sizes(shapes, attrs, size):
    """Spaces stay in the hundreds: a config per distinct tiling, order (where read) and unroll."""
    assert len(space_of("Conv", shapes, attrs)) == size


def test_conv_space_offers_channel_tiles_in_rows_and_through_them():
    """Where a channels tile may run on through the output rows (AVX2, 3x3/2 512->512 onto 7x7
    planes), the space offers each such tile that way ("flat") and the row tiles beside it, so
    that tuning can choose; a plan without "flat" builds a row tile (as before flat tiles)."""
    shapes = [(1, 512, 14, 14), (512, 512, 3, 3)]
    attrs = conv_attrs((3, 3), strides=(2, 2), pads=(1,) * 4)
    space = space_of("Conv", shapes, attrs, AVX2)
    geo = geometry_of("Conv", OPS["Conv"].normalize_attrs(attrs, "Conv"),
                      [TensorType(s, "float32") for s in shapes], AVX2)  # fmt: skip
    configs = [space.get(i).values for i in range(len(space))]
    channels = [c for c in configs if c["plan"][0] == "channels"]
    flat = [c for c in channels if "flat" in c["plan"][5:]]
    assert flat and len(flat) < len(channels)
    for config in channels:
        assert plan(config, geo, 8, 16).tiling.flat == (config in flat)
    assert space.get(space.default_index).values in flat
    assert plan({}, geo, 8, 16).tiling.flat


def test_conv_space_offers_each_strided_channels_plan_both_phasings():
    """A strided conv's channels plans come as the default reads the input (no marker) and the
    other way ("phased" / "unphased"), which builds the same tile over the other geometry; the
    default is one of the first; a stride-1 conv's plans have no marker."""
    shapes = [(1, 64, 28, 28), (64, 64, 3, 3)]
    attrs = conv_attrs((3, 3), strides=(2, 2), pads=(1,) * 4)
    space = space_of("Conv", shapes, attrs, AVX2)
    geo = geometry_of("Conv", OPS["Conv"].normalize_attrs(attrs, "Conv"),
                      [TensorType(s, "float32") for s in shapes], AVX2)  # fmt: skip
    plans = [list(space.get(i).values["plan"]) for i in range(len(space))]
    plain = [p for p in plans if p[0] == "channels" and p[-1] not in ("phased", "unphased")]
    flips = [p for p in plans if p[-1] in ("phased", "unphased")]
    assert plain and len(flips) == len(plain)
    phasings = set()
    for base, flip in zip(plain, flips):
        assert flip[:-1] == base
        default, other = plan({"plan": base}, geo, 8, 16), plan({"plan": flip}, geo, 8, 16)
        assert other.phased == (flip[-1] == "phased") != default.phased
        assert other.geometry(geo) != default.geometry(geo)
        assert (other.tiling, other.order, other.unroll_taps) == (
            default.tiling, default.order, default.unroll_taps)  # fmt: skip
        phasings.add(default.phased)
    assert phasings == {False}  # AVX2's default reads this conv padded (`default_phased`)
    assert list(space.get(space.default_index).values["plan"]) in plain
    stride1 = space_of("Conv", [(1, 64, 14, 14), (64, 64, 3, 3)], conv_attrs((3, 3)), AVX2)
    assert not any(stride1.get(i).values["plan"][-1] in ("phased", "unphased")
                   for i in range(len(stride1)))  # fmt: skip


DISTINCT_SAMPLE = 40


@pytest.mark.parametrize(
    "shapes,attrs",
    [
        ([(1, 64, 56, 56), (64, 64, 3, 3)], conv_attrs((3, 3), pads=(1,) * 4)),
        ([(1, 256, 56, 56), (64, 256, 1, 1)], conv_attrs((1, 1))),
        ([(1, 32, 28, 28), (32, 1, 3, 3)], conv_attrs((3, 3), pads=(1,) * 4, group=32)),
    ],
    ids=["3x3", "1x1", "depthwise"],
)
def test_conv_space_configs_build_distinct_kernels(shapes, attrs):
    """No two configs of a sample build the same code: no knob goes unread by its config."""
    space = space_of("Conv", shapes, attrs)
    full = OPS["Conv"].normalize_attrs(attrs, "Conv")
    node = Node("Conv", [f"in{i}" for i in range(len(shapes))], ["out"], full)
    in_types = [TensorType(s, "float32") for s in shapes]
    out_types = OPS["Conv"].infer(full, in_types)
    rng = np.random.default_rng(0)
    constants = {1: rng.standard_normal(shapes[1]).astype(np.float32)}
    picks = rng.choice(len(space), min(DISTINCT_SAMPLE, len(space)), replace=False)
    texts: dict[str, dict[str, Any]] = {}
    for index in sorted(int(i) for i in picks):
        config = space.get(index)
        ctx = LowerContext(TARGET, config.values)
        kernels, _, _ = lower_node(ctx, node, in_types, out_types, constants)
        text = "\n".join(kernel_str(k) for k in kernels)
        assert text not in texts, f"{config.values} builds the code of {texts[text]}"
        texts[text] = config.values


@pytest.mark.parametrize("op,shapes,attrs", CONV_WORKLOADS, ids=IDS[: len(CONV_WORKLOADS)])
@pytest.mark.parametrize("target", [TARGET, AVX2], ids=["avx512", "avx2"])
def test_conv_default_tiles_fit_the_registers(op, shapes, attrs, target):
    """An empty config's register tile (accumulators, loaded vectors, a broadcast) never needs
    more registers than the target has: AVX2's 16 get smaller tiles than AVX-512's 32."""
    full = OPS[op].normalize_attrs(attrs, op)
    geo = geometry_of(op, full, [TensorType(s, "float32") for s in shapes], target)
    lanes = target.lanes("float32")
    tiling = plan({}, geo, lanes, target.vector_registers, constant_weights=False).tiling
    assert tiling.mr * tiling.nv + tiling.nv + 1 <= target.vector_registers


# the convs of resnet50 and vgg19 (input, weights, stride, pad): every heavy conv's shape family
RESNET_VGG_CONVS = [
    ((1, 3, 224, 224), (64, 3, 7, 7), 2, 3), ((1, 3, 224, 224), (64, 3, 3, 3), 1, 1),
    ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1), ((1, 64, 56, 56), (256, 64, 1, 1), 1, 0),
    ((1, 256, 56, 56), (64, 256, 1, 1), 1, 0), ((1, 256, 56, 56), (512, 256, 1, 1), 2, 0),
    ((1, 128, 28, 28), (128, 128, 3, 3), 1, 1), ((1, 512, 28, 28), (128, 512, 1, 1), 1, 0),
    ((1, 256, 14, 14), (256, 256, 3, 3), 1, 1), ((1, 1024, 14, 14), (256, 1024, 1, 1), 1, 0),
    ((1, 512, 7, 7), (512, 512, 3, 3), 1, 1), ((1, 2048, 7, 7), (512, 2048, 1, 1), 1, 0),
    ((1, 64, 224, 224), (64, 64, 3, 3), 1, 1), ((1, 128, 112, 112), (128, 128, 3, 3), 1, 1),
    ((1, 512, 14, 14), (512, 512, 3, 3), 1, 1), ((1, 256, 28, 28), (512, 256, 3, 3), 1, 1),
]  # fmt: skip


# (accumulators, loads per FMA) a tile needs at most / at least: FMA latency 4 x FMAs per cycle
# of cores doing 32 flops a cycle (2 with 8 lanes, 1 with 16), two loads per cycle
CORE_NEEDS = {8: (8, 1), 16: (4, 2)}


def assert_fits_the_core(geo: ConvGeometry, target: LoweringTarget) -> None:
    """The default tile fits the registers, holds enough accumulators to hide the FMA latency
    (8 on AVX2 cores) and loads no more operands per step than the core loads in its FMAs'
    cycles (on AVX2: no more loads than FMAs)."""
    lanes = target.lanes("float32")
    tiling = plan({}, geo, lanes, target.vector_registers, constant_weights=False).tiling
    mr, nv, registers = tiling.mr, tiling.nv, target.vector_registers
    accumulators, loads_per_fma = CORE_NEEDS[lanes]
    assert mr * nv + nv + 1 <= registers, tiling
    assert mr * nv >= accumulators, tiling
    assert mr + nv <= loads_per_fma * mr * nv, tiling


@pytest.mark.parametrize("x_shape,w_shape,stride,pad", RESNET_VGG_CONVS)
@pytest.mark.parametrize("target", [TARGET, AVX2], ids=["avx512", "avx2"])
def test_resnet_vgg_default_tiles_fit_the_core(x_shape, w_shape, stride, pad, target):
    """AVX2's defaults were 1 x 7 (7 accumulators, 8 loads per 7 FMAs) and 14 x 1 (15 loads
    per 14 FMAs, and LLVM spilled its accumulators): now 6 x 2, 5 x 2 or 4 x 3."""
    attrs = conv_attrs(w_shape[2:], (stride, stride), (pad,) * 4)
    full = OPS["Conv"].normalize_attrs(attrs, "Conv")
    types = [TensorType(s, "float32") for s in (x_shape, w_shape)]
    assert_fits_the_core(geo=geometry_of("Conv", full, types, target), target=target)


@settings(max_examples=60, deadline=None)
@given(
    c=st.integers(1, 512), blocks=st.integers(1, 32), h=st.integers(1, 64),
    vectors=st.integers(1, 28), k=st.sampled_from([1, 3, 5]), stride=st.sampled_from([1, 2]),
)  # fmt: skip
# a short first conv whose rows of one vector leave its 8-sum tile 4 sums: the default tile
@example(c=1, blocks=1, h=2, vectors=1, k=3, stride=1)
def test_ungrouped_default_tiles_fit_the_core(c, blocks, h, vectors, k, stride):
    """An ungrouped conv of whole pairs of vectors of output channels (32) and rows of whole
    AVX2 vectors (8 floats) gets a tile that fits the core on AVX2 and
    AVX-512: the channels schedule always has one, 8 x 2 or 4 x 2 then wasting no lane."""
    attrs = conv_attrs((k, k), (stride, stride), (k // 2,) * 4)
    full = OPS["Conv"].normalize_attrs(attrs, "Conv")
    shapes = [(1, c, h * stride, 8 * vectors * stride), (32 * blocks, c, k, k)]
    for target in (TARGET, AVX2):
        geo = geometry_of("Conv", full, [TensorType(s, "float32") for s in shapes], target)
        assert geo.out_shape[-1] % 8 == 0  # a row, or a pointwise conv's planes as one row
        assert_fits_the_core(geo, target)


def test_gemm_default_tile_follows_the_registers():
    from tvmc.ops.linalg.cpu import default_tile

    assert default_tile(32) == (6, 4)  # 24 accumulators + 4 B vectors + 1 broadcast = 29
    assert default_tile(16) == (6, 2)  # 12 + 2 + 1 = 15: BLIS's 6x16 AVX2 kernel shape
    space = OPS["MatMul"].space({}, [TensorType((64, 64), "float32")] * 2, AVX2)
    assert space.get(space.default_index).values["tile_n"] == 2


# (input, weights, attrs, order of the default plan on AVX-512, on AVX2): resnet50/vgg19 convs
DEFAULT_ORDERS = [
    # pixels tiles over 3 input channels (fewer than the lanes): channels_outer
    ((1, 3, 224, 224), (64, 3, 3, 3), conv_attrs((3, 3), pads=(1,) * 4), "channels_outer",
     "channels_outer"),
    # 12 input channels: fewer than AVX-512's 16 lanes, not AVX2's 8 (then the sizes decide)
    ((1, 12, 56, 56), (64, 12, 3, 3), conv_attrs((3, 3), pads=(1,) * 4), "channels_outer",
     "pixels_outer"),
    # grouped, 4 input channels per group: the sizes decide
    ((1, 128, 56, 56), (128, 4, 3, 3), conv_attrs((3, 3), pads=(1,) * 4, group=32),
     "pixels_outer", "pixels_outer"),
    # weights 40x the input (a 7x7 plane): the weights are outer
    ((1, 512, 7, 7), (2048, 512, 1, 1), conv_attrs((1, 1)), "channels_outer", "channels_outer"),
    # weights smaller than the input: the input is outer
    ((1, 64, 56, 56), (256, 64, 1, 1), conv_attrs((1, 1)), "pixels_outer", "pixels_outer"),
    # AVX2's pointwise channels tiles: the order that reads less (densenet121's 992->128 @14:
    # 8 blocks re-read the input, 33 pixel tiles would re-read the weights)
    ((1, 992, 14, 14), (128, 992, 1, 1), conv_attrs((1, 1)), "pixels_outer", "channels_outer"),
]  # fmt: skip


def test_pointwise_reads_count_what_each_order_reads_again():
    """channels_outer reads the weights once and the input once per channel block; pixels_outer
    the input once and the weights once per pixel tile; None where one order has one step."""
    types = [TensorType(s, "float32") for s in ((1, 992, 14, 14), (128, 992, 1, 1))]
    geo = geometry_of("Conv", conv_attrs((1, 1)), types, AVX2)
    weights, inputs = 128 * 992, 992 * 196
    tiles = 196 // 6 + 1  # 6-pixel tiles over the plane as one row
    assert pointwise_reads(geo, ChannelTiling(6, 2, True), 8) == (
        weights + 7 * inputs, inputs + (tiles - 1) * weights)  # fmt: skip
    one_block = geometry_of(
        "Conv", conv_attrs((1, 1)), [types[0], TensorType((16, 992, 1, 1), "float32")], AVX2
    )
    assert pointwise_reads(one_block, ChannelTiling(6, 2, True), 8) is None
    three_by_three = geometry_of(
        "Conv", conv_attrs((3, 3), pads=(1,) * 4),
        [types[0], TensorType((128, 992, 3, 3), "float32")], AVX2)  # fmt: skip
    assert pointwise_reads(three_by_three, ChannelTiling(6, 2, True), 8) is None


def test_avx2_channels_tiles_where_pixel_tiles_leave_lanes_empty():
    """resnet50's 1x1 256->1024 @14: 16-pixel tiles fill 196 of 208 lanes; on AVX2 the
    channels tile's transposing store weighs less than the empty lanes (STORE_COSTS)."""
    types = [TensorType(s, "float32") for s in ((1, 256, 14, 14), (1024, 256, 1, 1))]
    geo = geometry_of("Conv", conv_attrs((1, 1)), types, AVX2)
    chosen = plan({}, geo, 8, 16, constant_weights=False)
    assert (chosen.schedule, chosen.order) == ("channels", "channels_outer")


@pytest.mark.parametrize("x_shape,w_shape,attrs,avx512,avx2", DEFAULT_ORDERS)
def test_conv_default_order(x_shape, w_shape, attrs, avx512, avx2):
    """`default_order`'s rules, per the target's lanes (docs/performance.md)."""
    types = [TensorType(s, "float32") for s in (x_shape, w_shape)]
    for target, order in ((TARGET, avx512), (AVX2, avx2)):
        geo = geometry_of("Conv", attrs, types, target)
        chosen = plan(
            {}, geo, target.lanes("float32"), target.vector_registers, constant_weights=False
        )  # the direct conv's order
        assert chosen.order == order, (target, chosen)


def test_conv_default_index_with_a_known_cache():
    """With a core's cache size known the default may prefetch; the space's default config
    (no prefetch knob) still lowers to the template's default plan."""
    shapes = [(1, 512, 7, 7), (512, 512, 1, 1)]
    attrs = {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0] * 4, "dilations": [1, 1],
             "group": 1}  # fmt: skip
    full = OPS["Conv"].normalize_attrs(attrs, "Conv")
    types = [TensorType(s, "float32") for s in shapes]
    geo = geometry_of("Conv", full, types)
    target = LoweringTarget(num_threads=2, cache_bytes=256 << 10)
    space = OPS["Conv"].space(full, types, target)
    cache = target.cache_bytes // 4
    want = plan({}, geo, target.lanes("float32"), target.vector_registers, cache)
    assert want.prefetch
    got = plan(space.get(space.default_index).values, geo, 16, 32, cache)
    assert got == want
