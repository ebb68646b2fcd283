"""Knob spaces of the Conv and ConvTranspose templates: the names `conv_kernels.plan` reads.

Every config of a space builds and computes the same result; knobs only change the speed.

- schedule: "pixels" and "channels"; "depthwise" and "pixels" when each group reads one input
  channel ("channels" too when a group has over 8 output channels: the template may pick it).
- pixel_vectors / pixel_channels, channel_vectors / channel_pixels: the NV and MR limits each
  schedule chooses its register tile under. Many limits give the same tile, so the candidates
  are one limit per distinct tiling of this workload (the template's default where it is one
  of them), the few with the best modelled throughput (`conv_kernels._estimate`'s model).
  The register budget MR * NV + NV + 1 <= 32 holds for every tile: the tilings enforce it.
- unroll_taps: "none", "row", "all" where they differ ("all" up to MAX_UNROLLED_TAPS taps).
- order: "pixels_outer" or "channels_outer".
- in_place: True only (reading an unpadded 1x1 input in place never loses to a copy).

The space is a product, so a pixels config also carries channel_* values it does not read;
that multiplies the space by the unread knobs' sizes (kept small for that reason).
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
PIXEL_KEEP = (4, 5)  # candidates kept for (pixel_vectors, pixel_channels)
CHANNEL_KEEP = (3, 4)  # and for (channel_vectors, channel_pixels)
DEFAULTS = {"pixel_vectors": 8, "pixel_channels": 6, "channel_vectors": 4, "channel_pixels": 14}


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
    schedules = ["depthwise", "pixels"] if depthwise else ["pixels"]
    space = ConfigSpace()
    space.other("schedule", schedules + (["channels"] if with_channels else []))

    def pixels(nv: int, mr: int) -> tuple[Hashable, float]:
        tiling, eff = pixel_tiling(geo, lanes, nv, mr)
        used = geo.ocg / (ceil_div(geo.ocg, tiling.mr) * tiling.mr)
        return tiling, eff * used * density(tiling.mr, tiling.nv)

    rows = [r for r in ROW_LIMITS if r <= geo.ocg] or [1]
    nvs, mrs = _limits(pixels, range(1, MAX_VECTORS + 1), rows, PIXEL_KEEP, "pixel")
    space.other("pixel_vectors", nvs).other("pixel_channels", mrs)

    if not with_channels:  # the channels schedule is not a candidate: its limits stay default
        nvs, mrs = [DEFAULTS["channel_vectors"]], [DEFAULTS["channel_pixels"]]
    else:

        def channels(nv: int, mr: int) -> tuple[Hashable, float]:
            tiling, useful = channel_tiling(geo, lanes, nv, mr)
            return tiling, useful * density(tiling.mr, tiling.nv)

        vectors = range(1, min(MAX_VECTORS, ceil_div(geo.ocg, lanes)) + 1)
        pixels_ = [r for r in ROW_LIMITS if r <= geo.out_shape[-1]] or [1]
        nvs, mrs = _limits(channels, vectors, pixels_, CHANNEL_KEEP, "channel")
    space.other("channel_vectors", nvs).other("channel_pixels", mrs)

    taps = len(geo.taps)
    steps = {"none": 1, "row": geo.kernel[-1], "all": taps}
    unroll = [u for u, n in steps.items() if u == "none" or (1 < n <= MAX_UNROLLED_TAPS)]
    if steps["row"] == taps and "row" in unroll and "all" in unroll:
        unroll.remove("all")  # one kernel row is the whole kernel
    space.annotate("unroll_taps", unroll)
    space.other("order", ["pixels_outer", "channels_outer"])
    space.other("in_place", [True])
    return space


def _limits(
    tile: Callable[[int, int], tuple[Hashable, float]],
    vectors: Sequence[int],
    rows: Sequence[int],
    keep: tuple[int, int],
    prefix: str,
) -> tuple[list[int], list[int]]:
    """(NV limits, MR limits) giving distinct tilings, about the best `keep` by the model.

    `tile(nv, mr)` is (tiling, modelled throughput). A limit whose row (or column) of tilings
    equals another's is dropped; the template's default always stays, standing for its class.
    """
    dv, dr = DEFAULTS[f"{prefix}_vectors"], DEFAULTS[f"{prefix}_{_ROWS[prefix]}"]
    vectors, rows = sorted({*vectors, dv}), sorted({*rows, dr})
    table = {(v, r): tile(v, r) for v in vectors for r in rows}
    vs = _distinct(vectors, lambda v: tuple(table[v, r][0] for r in rows), dv)
    rs = _distinct(rows, lambda r: tuple(table[v, r][0] for v in vs), dr)
    return _best(table, vs, rs, keep, (dv, dr))


_ROWS = {"pixel": "channels", "channel": "pixels"}


def _distinct(values: Sequence[int], signature: Callable[[int], Hashable], default: int) -> list:
    """One value per distinct signature: the default where it is in the class, else the least."""
    chosen: dict[Hashable, int] = {}
    for v in values:
        sig = signature(v)
        if sig not in chosen or v == default:
            chosen[sig] = v
    return sorted(chosen.values())


def _best(
    table: dict[tuple[int, int], tuple[Hashable, float]],
    vs: Sequence[int],
    rs: Sequence[int],
    keep: tuple[int, int],
    defaults: tuple[int, int],
) -> tuple[list[int], list[int]]:
    """The defaults, then the limits of the best-scoring (NV, MR) pairs until `keep` are full."""
    chosen_v, chosen_r = {defaults[0]}, {defaults[1]}
    pairs = sorted(((v, r) for v in vs for r in rs), key=lambda p: (-table[p][1], p))
    for v, r in pairs:
        if len(chosen_v) < keep[0]:
            chosen_v.add(v)
        if len(chosen_r) < keep[1]:
            chosen_r.add(r)
    return sorted(chosen_v), sorted(chosen_r)
