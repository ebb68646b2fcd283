"""Knob spaces of the Conv and ConvTranspose templates: the names `conv_kernels.plan` reads.

Every config of a space builds and computes the same result; knobs only change the speed.

- plan: [schedule, tile_vectors, tile_rows(, order)], the schedule with the NV and MR limits it
  chooses its register tile under, and for "pixels"/"channels" the tile loop order
  ("pixels_outer" or "channels_outer"; "depthwise" has one tile loop and no order).
  Schedules: "pixels" and "channels"; "depthwise" and "pixels" when each group reads one input
  channel ("channels" too when a group has over 8 output channels: the template may pick it).
  Many limits give the same tile, so each schedule offers one pair per distinct tiling of this
  workload (the tile's own NV and MR where they give it), the template's default tiling and
  the others with the best modelled throughput (`conv_kernels._estimate`'s model), up to KEEP
  of them. Folding the schedule into the tile
  knob keeps the space free of configs that differ only in limits their schedule never reads.
  The register budget MR * NV + NV + 1 <= 32 holds for every tile: the tilings enforce it.
- unroll_taps: "none", "row", "all" where they differ ("all" up to MAX_UNROLLED_TAPS taps).

`in_place` is not a knob of the space: reading an unpadded 1x1 input in place never loses to a
copy, so the template's default (True) applies.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from tvmc.graph import TensorType
from tvmc.ops.conv_layout import ConvGeometry
from tvmc.ops.conv_schedules import channel_tiling, density, pixel_tiling
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.microkernel import accumulator_dtype, ceil_div
from tvmc.ops.registry import OPS, Attrs
from tvmc.ops.space import ConfigSpace

MAX_VECTORS = 15  # NV with MR = 1 still fits: 1 * 15 + 15 + 1 <= 32
ROW_LIMITS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 30)  # MR limits tried
MAX_UNROLLED_TAPS = 49  # "all" beyond a 7x7 kernel only grows the code
KEEP = {"pixels": 16, "channels": 12}  # distinct tilings kept per schedule
# (tile_vectors, tile_rows) `conv_kernels.plan` uses when a config has none ("depthwise": pixels)
DEFAULTS = {"pixels": (8, 6), "channels": (4, 14)}
ORDERS = ("pixels_outer", "channels_outer")  # tile loop orders of "pixels" and "channels"


def conv_geometry(attrs: Attrs, input_types: Sequence[TensorType], op: str) -> ConvGeometry:
    """The geometry `conv_kernels._geometry` builds for this workload, from types alone."""
    x, w = input_types[0], input_types[1]
    out = OPS[op].infer(attrs, list(input_types))[0]
    spatial = x.ndim - 2
    kernel, dil = tuple(attrs["kernel_shape"]), tuple(attrs["dilations"])
    strides, pads = tuple(attrs["strides"]), tuple(attrs["pads"])[:spatial]
    group, out_shape = attrs["group"], tuple(out.shape[2:])
    if op == "Conv":
        return ConvGeometry(x.shape[0], x.shape[1], w.shape[0], group, tuple(x.shape[2:]),
                            kernel, strides, dil, pads, out_shape, (1,) * spatial)  # fmt: skip
    begin = tuple(d * (k - 1) - p for k, d, p in zip(kernel, dil, pads))
    return ConvGeometry(x.shape[0], x.shape[1], group * w.shape[1], group, tuple(x.shape[2:]),
                        kernel, (1,) * spatial, dil, begin, out_shape, strides)  # fmt: skip


def conv_space(attrs: Attrs, input_types: list[TensorType], target: LoweringTarget) -> ConfigSpace:
    """The knob space of a Conv workload."""
    return _space(conv_geometry(attrs, input_types, "Conv"), input_types[0].dtype, target)


def conv_transpose_space(
    attrs: Attrs, input_types: list[TensorType], target: LoweringTarget
) -> ConfigSpace:
    """The knob space of a ConvTranspose workload (the same kernels over the stuffed input)."""
    return _space(conv_geometry(attrs, input_types, "ConvTranspose"), input_types[0].dtype, target)


def _space(geo: ConvGeometry, dtype: str, target: LoweringTarget) -> ConfigSpace:
    lanes = target.lanes(accumulator_dtype(dtype))
    depthwise = geo.icg == 1 and geo.group > 1
    with_channels = not depthwise or geo.ocg > 8  # the template's default may pick it then

    def pixels(nv: int, mr: int) -> tuple[Hashable, float, tuple[int, int]]:
        tiling, eff = pixel_tiling(geo, lanes, nv, mr)
        used = geo.ocg / (ceil_div(geo.ocg, tiling.mr) * tiling.mr)
        return tiling, eff * used * density(tiling.mr, tiling.nv), (tiling.nv, tiling.mr)

    rows = [r for r in ROW_LIMITS if r <= geo.ocg] or [1]
    pixel_tiles = _tiles(pixels, range(1, MAX_VECTORS + 1), rows, "pixels")
    plans = [["pixels", nv, mr, order] for nv, mr in pixel_tiles for order in ORDERS]
    if depthwise:
        plans = [["depthwise", nv, mr] for nv, mr in pixel_tiles] + plans
    if with_channels:

        def channels(nv: int, mr: int) -> tuple[Hashable, float, tuple[int, int]]:
            tiling, useful = channel_tiling(geo, lanes, nv, mr)
            return tiling, useful * density(tiling.mr, tiling.nv), (tiling.nv, tiling.mr)

        vectors = range(1, min(MAX_VECTORS, ceil_div(geo.ocg, lanes)) + 1)
        pixels_ = [r for r in ROW_LIMITS if r <= geo.out_shape[-1]] or [1]
        tiles = _tiles(channels, vectors, pixels_, "channels")
        plans += [["channels", nv, mr, order] for nv, mr in tiles for order in ORDERS]
    space = ConfigSpace()
    space.other("plan", plans)

    taps = len(geo.taps)
    steps = {"none": 1, "row": geo.kernel[-1], "all": taps}
    unroll = [u for u, n in steps.items() if u == "none" or (1 < n <= MAX_UNROLLED_TAPS)]
    if steps["row"] == taps and "row" in unroll and "all" in unroll:
        unroll.remove("all")  # one kernel row is the whole kernel
    space.annotate("unroll_taps", unroll)
    return space


def _tiles(
    tile: Callable[[int, int], tuple[Hashable, float, tuple[int, int]]],
    vectors: Sequence[int],
    rows: Sequence[int],
    schedule: str,
) -> list[tuple[int, int]]:
    """(NV, MR) limit pairs of a schedule, one per distinct tiling, the best KEEP by the model.

    `tile(nv, mr)` is (tiling, modelled throughput, the tiling's own (NV, MR)). A class of
    pairs giving one tiling is named by the tiling's own pair where it is one of them, else by
    its least pair. The class of the template's default always stays.
    """
    default = DEFAULTS[schedule]
    pairs = sorted({*((v, r) for v in vectors for r in rows), default})
    table = {p: tile(*p) for p in pairs}
    classes: dict[Hashable, tuple[int, int]] = {}
    for p in pairs:
        tiling, _, own = table[p]
        if tiling not in classes or p == own:
            classes[tiling] = p
    default_tiling = table[default][0]
    ranked = sorted(classes.items(), key=lambda c: (c[0] != default_tiling, -table[c[1]][1], c[1]))
    return sorted(p for _, p in ranked[: KEEP[schedule]])
