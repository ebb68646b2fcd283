"""CPU templates for Conv and ConvTranspose (any rank, groups, strides, dilations, pads, bias),
with their knob space and defaults.

Every conv runs as: (1) a transform kernel writing the input zero-padded and split into stride
phases (cpu_layout; skipped when the input is already in that form, e.g. a 1x1 stride-1
unpadded conv), (2) one parallel kernel of register tiles (cpu_tiles), storing each result
through bias and the epilogue into the NCHW output. Weights are packed for the chosen tile at
compile time; runtime weights are packed by a gather kernel into a temp. Depthwise convs fuse
the transform into the tile loop (each channel's planes are built in local scratch, in cache).
A strided ConvTranspose runs as a 1x1 conv making one column per (output channel, tap) and a
gather summing the columns that land on each output (cpu_transpose); one of stride 1 is read
stuffed (`ConvGeometry.stuffed`): a conv with the flipped, transposed weights. Its knobs apply
to that columns or stuffed conv. A 3x3 stride-1 conv may run as Winograd instead
(cpu_winograd: input transform, batched GEMM, output transform).

Knobs (ctx.config; `plan` reads them, with the defaults in `default_limits` and `_estimate`):
- schedule: "pixels", "channels", "depthwise" (direct convs) or "winograd2" / "winograd4"
  (F(2x2,3x3) / F(4x4,3x3): cpu_winograd; 3x3 stride-1 float32 convs with constant weights,
  grouped ones with 16 or more channels a group; others fall back to the direct default).
  Default: the Winograd tile `cpu_winograd.default_tile` picks where it pays (F4 on planes of
  13x13 and more, F2 or F4 by the GEMM's padded multiply-adds below on cores of 32 flops a
  cycle, and for grouped convs on any plane), else the cheapest direct one by `_estimate`.
- tile_vectors / tile_rows: the NV and MR limits the chosen schedule picks its register tile
  under (defaults: 8 / 6 for "pixels" and "depthwise", 4 / 14 for "channels", 2 / 14 on
  16-register targets; for Winograd
  the GEMM's tile, default by cpu_winograd's cycle model).
- band: Winograd only: tile rows a band of one kernel computes through all three steps, with
  its V and M in the caches (`cpu_winograd.blocked_kernel_body`); 0 for the three kernels over
  the whole batch. Default `cpu_winograd.default_band`: bands only where the whole batch's V and
  M exceed the caches (a batch of several images, planes of 112x112 and more).
- plan: [schedule, tile_vectors, tile_rows, order, unroll_taps] for "pixels" and "channels"
  (a "channels" one with an entry "flat" after those where its tile may run on through the
  output rows: flat_rows, without it tiles stay within rows; and "phased" or "unphased" last
  where it sets `phased`, else the default's), [schedule, tile_vectors, tile_rows,
  unroll_taps] for "depthwise", [schedule, tile_vectors, tile_rows, band] for Winograd, in one knob
  (what the tuning space offers, so that no two configs differ only in knobs their schedule
  does not read); the entries after tile_rows may be left out (order, unroll_taps and band
  then take their defaults, and without "flat" a channels tile stays within rows); it
  overrides the separate knobs.
- unroll_taps: "all" kernel taps, one kernel "row" or "none" unrolled per step of the tap
  loop (default: `default_unroll`'s: "all" for flat channel tiles, "row" for AVX2 pixels
  tiles, else "none"). Unrolled taps of a channels tile's stride-1 row read overlapping inputs;
  LLVM then shares those loads across taps and runs out of registers.
- in_place: read an input already in plane form (1x1 stride-1 unpadded) where it is (default
  True); its vectors run across rows through the flat offset, which the kernel IR interpreter's
  per-axis bounds check rejects, so interpreted runs set it False. Where the last tiles run past
  the input's end, only if the lowering allows it (`LowerContext.may_read_past_end`).
- order: "pixels_outer" (consecutive tiles share input rows) or "channels_outer" (they share a
  weight block); the default is `default_order`'s.
- prefetch: whether each tile fetches its share of the operand the tile loop's next outer step
  reads (cpu_tiles.Ahead); the default is `default_prefetch`'s. Not in the knob space yet.
- pack_input: whether a pixels_outer one-tap pixels tile's first channel block copies the input
  it reads into local scratch that the others read (cpu_tiles.PackedInput); the default is
  `default_pack_input`'s. Not in the knob space yet.
- align_planes: whether a pointwise pixels tile over planes read as one row reads its input
  copied into planes padded to whole cache lines (`channel_pad_to_lines`; an input read in
  place is then copied); the default is `default_align_planes`'s. Not in the knob space yet.
- flat_rows: whether a channels tile may run on through the output rows (default True: where
  that fills more lanes, `cpu_tiles.channel_tiling`, and the epilogue can store so). In the
  space as a channels plan's "flat".
- phased: whether a channels tile reads its input split into stride phases (True) or only
  padded, its output pixels `stride` apart (`ConvGeometry.unphased`); the default is
  `default_phased`'s. In the space as a channels plan's "phased" / "unphased" (pixels tiles
  always read phases: their vector loads need contiguous runs).
- split: into how many chunks of input channels the reduction is cut (cpu_tiles.Split: the tile
  loop runs once per chunk, or, channels_outer with enough channel blocks, the chunks run
  inside groups of blocks: `_tile_loop`); the default is `default_split`'s. Not in the knob
  space yet.

The knob space (`conv_space`): one knob, `plan`; every config builds different code and
computes the same result (up to rounding: Winograd's is larger, cpu_winograd).

- Direct schedules: "pixels" and "channels"; "depthwise" and "pixels" when each group reads
  one input channel ("channels" too when a group has over 8 output channels: the template may
  pick it). Many limits give the same tile, so each schedule offers one pair per distinct
  tiling of this workload (the tile's own NV and MR where they give it), the template's
  default tiling and the others with the best modelled throughput (`_estimate`'s model), up to
  KEEP of them, each with every tile loop order (pixels, channels) and every unroll_taps that
  differs ("none", "row", "all"; "all" up to MAX_UNROLLED_TAPS taps). Channels tiles come
  twice: KEEP tilings within rows, and up to KEEP that run through the rows ("flat") where
  `channel_tiling` picks that (a tuner may then find the row tile faster; tuning records of a
  tvmc that read a channels plan either way no longer match the space's hash). A strided
  conv's channels plans come twice: as the default reads the input (`default_phased`; no
  marker) and the other way ("phased" or "unphased": `phase_flips`). The register
  budget MR * NV + NV + 1 <= the target's registers (32 AVX-512, 16 AVX2) holds for every tile:
  the tilings enforce it. The default tilings also prefer tiles that fit the core
  (`cpu_tiles.fits_core`: enough accumulators to hide the FMA latency, and no more loads than
  the core makes in the cycles of its FMAs).
- Winograd (where eligible): F2 and F4, each with its distinct GEMM tiles
  (`cpu_winograd.gemm_tiles`), unblocked and in the bands `cpu_winograd.offered_bands` names.

`in_place` is not a knob of the space: reading an unpadded 1x1 input in place never loses to a
plain copy, so the template's default (True) applies (a copy into planes on lines,
`align_planes`, is another matter: it halves the lines a tile reads).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import (
    Buffer,
    Expr,
    Kernel,
    Stmt,
    allocate,
    const,
    if_then_else,
    loop,
    minimum,
    prefetch,
    select,
    seq,
)
from tvmc.ops.conv.cpu_layout import fill_planes, transform_kernel_body, vector_range
from tvmc.ops.conv.cpu_tiles import (
    FLOPS_PER_CYCLE,
    LINE_BYTES,
    MIN_FLAT_GAIN,
    Ahead,
    ChannelTiling,
    Fetch,
    Operands,
    PackedInput,
    PixelTiling,
    Reduction,
    Split,
    channel_reads_end,
    channel_tile,
    channel_tiling,
    density,
    fits_core,
    flat_unrolled_taps,
    pack_channels,
    pack_pixels,
    per_line,
    pixel_fits,
    pixel_reads_end,
    pixel_tile,
    pixel_tiling,
    tile_registers,
)
from tvmc.ops.conv.cpu_transpose import columns_geometry, columns_lowering, uses_columns
from tvmc.ops.conv.cpu_winograd import (
    SCHEDULES,
    WinogradLayout,
    banded,
    default_band,
    default_tile,
    eligible,
    gemm_tiles,
    layout,
    offered_bands,
    winograd_lowering,
)
from tvmc.ops.conv.definition import (
    CHANNEL_SHUFFLE,
    conv_rule,
    conv_transpose_rule,
    shuffled_channel,
)
from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.lowering import (
    Attrs,
    Epilogue,
    LowerContext,
    LoweringTarget,
    Template,
    TensorRef,
    ref_of_buffer,
)
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import (
    accumulator_dtype,
    ceil_div,
    every_tile,
    lane_index,
    let_all,
    packed_operand,
    unflatten,
)
from tvmc.ops.space import ConfigSpace

PARALLEL_MIN_FLOPS = 1 << 18  # below this a fork/join costs more than the split saves
PARALLEL_MIN_ELEMENTS = 1 << 16  # the same for the input transform (a copy)
# instructions per output element of the channels schedule's transposing store, as they weigh
# against the FMAs, by vector lanes: on AVX2 (Zen 3) the channels tiles beat pixels tiles that
# leave lanes empty where 3.0 judged otherwise (resnet50's 1x1 256->1024 @14: 6x2 channels 93
# GFLOP/s against 88 for 16-pixel tiles filling 94% of their lanes; densenet121's 1x1 256..448
# ->128 @14 5-13%)
STORE_COSTS = {8: 1.5}
STORE_COST = 3.0  # other widths (AVX-512's 16-lane transposes take a stage more; not measured)


def _estimate(
    geo: ConvGeometry, lanes: int, registers: int, pix: PixelTiling, pix_eff: float,
    ch: ChannelTiling, ch_eff: float, pixel_limits: tuple[int, int], core: Core | None = None,
    itemsize: int = 4,
) -> str:  # fmt: skip
    """The schedule with the higher estimated useful multiply-adds per cycle (a model); one
    whose tile fits the core (`fits_core`) before one whose tile does not. A short first conv
    is judged by the pixels tile of `pixel_limits` (the limits without SHORT_FIRST_CONV_TILE):
    its 8 sums are how the pixels schedule runs best there, not a reason to leave it
    (squeezenet's 3x3/2 3->64 went to a channels tile: 505 -> 905 us). A pointwise pixels
    tile that reads its input from L2 faster than the L2 sustains (`pixels_from_l2`: on two
    512-bit FMA pipes) runs at that share of its rate."""
    if short_first_conv(geo, registers, lanes):
        pix, pix_eff = pixel_tiling(geo, lanes, *pixel_limits, registers)
    streamed = max(1.0, pixels_from_l2(geo, pix, lanes, itemsize, core or Core()))
    pixels = (pixel_fits(geo, pix.mr, pix.nv, pix_eff, lanes),
              pix_eff * density(pix.mr, pix.nv) / streamed)  # fmt: skip
    store = 1 + STORE_COSTS.get(lanes, STORE_COST) * lanes / (geo.icg * len(geo.taps))
    channels = (fits_core(ch.mr, ch.nv, lanes, ch_eff), ch_eff * density(ch.mr, ch.nv) / store)
    return "channels" if channels > pixels else "pixels"


@dataclass(frozen=True)
class Core:
    """What the defaults know of a core besides its L2 (LoweringTarget's fields): its L1 data
    cache, the bytes a cycle its L2 sustains into L1 (0: unknown), the runtime's threads and the
    fp32 flops a cycle of its vector FMAs (0: unknown, FLOPS_PER_CYCLE assumed)."""

    l1_bytes: int = 0
    l2_stream_bytes: int = 0
    threads: int = 1
    flops_per_cycle: int = 0

    @classmethod
    def of(cls, target: LoweringTarget) -> Core:
        return cls(target.l1_bytes, target.l2_stream_bytes, target.num_threads,
                   target.flops_per_cycle)  # fmt: skip

    @property
    def fma_flops(self) -> int:
        """fp32 flops a cycle of the vector FMAs: the core's, else FLOPS_PER_CYCLE."""
        return self.flops_per_cycle or FLOPS_PER_CYCLE


@dataclass(frozen=True)
class Plan:
    """The chosen schedule and its tiling (knobs read once, here)."""

    schedule: str
    tiling: PixelTiling | ChannelTiling | WinogradLayout  # by schedule: channels, winograd*
    order: str
    unroll_taps: str
    in_place: bool
    prefetch: bool
    split: int = 1  # chunks of input channels the reduction is cut into (a divisor of geo.icg)
    pack_input: bool = False  # each pixel tile's input packed (`_packed_pixel_loop`)
    channel_pad: int = 0  # elements after each input channel's planes (`channel_pad_to_lines`)
    phased: bool = True  # whether the input transform splits stride phases (`default_phased`)

    def geometry(self, geo: ConvGeometry) -> ConvGeometry:
        """`geo` as this plan's kernels read it: unphased where it says, its input channels
        padded to lines where it says."""
        geo = geo if self.phased else geo.unphased()
        return geo.with_channel_pad(self.channel_pad) if self.channel_pad else geo


def plan(
    cfg: Mapping[str, Any], geo: ConvGeometry, lanes: int, registers: int, cache_elements: int = 0,
    dtype: str = "float32", constant_weights: bool = True, core: Core | None = None,
    flat_rows: bool = True,
) -> Plan:  # fmt: skip
    """The knobs of `cfg`, with defaults chosen for `geo`, tiles that fit `registers` and a
    core's own cache of `cache_elements` input elements (0: unknown) and its L1 (`core`). The
    Winograd schedules need `constant_weights` (transformed at compile time); others fall back
    to the default. `flat_rows`: channel tiles may run through the output's rows (the
    epilogue allows a flat store: `Epilogue.flat_planes`)."""
    cfg = dict(cfg)
    if "plan" in cfg:
        schedule, cfg["tile_vectors"], cfg["tile_rows"], *rest = cfg.pop("plan")
        cfg["schedule"] = schedule
        after = ["order", "unroll_taps"] if schedule in ORDERED else ["unroll_taps"]
        cfg.update(zip(["band"] if schedule in SCHEDULES else after, rest))
        if schedule == "channels":  # through the output's rows only where the plan says "flat"
            cfg["flat_rows"] = FLAT in rest[2:]
            if PHASED in rest[2:] or UNPHASED in rest[2:]:
                cfg["phased"] = PHASED in rest[2:]

    core = core or Core()
    winograd = constant_weights and eligible(geo, dtype)
    cache_bytes = cache_elements * np.dtype(dtype).itemsize
    m = (default_tile(geo, dtype, lanes, registers, core.fma_flops, cache_bytes) if winograd
         else None)  # fmt: skip
    chosen = cfg.get("schedule", f"winograd{m}" if m else None)
    if chosen in SCHEDULES and winograd:
        vectors, rows = int(cfg.get("tile_vectors", 0)), int(cfg.get("tile_rows", 0))
        whole = layout(geo, SCHEDULES[chosen], lanes, registers, vectors, rows)
        band = int(cfg["band"]) if "band" in cfg else default_band(whole, registers, cache_bytes,
                                                                    core.threads)  # fmt: skip
        tiles = banded(whole, band, registers) if band > 0 else whole
        return Plan(chosen, tiles, "", "none", True, False)

    def limits(default: tuple[int, int]) -> tuple[int, int]:
        return int(cfg.get("tile_vectors", default[0])), int(cfg.get("tile_rows", default[1]))

    pix, pix_eff = pixel_tiling(
        geo, lanes, *limits(default_limits("pixels", registers, geo, lanes)), registers
    )
    flat_rows = flat_rows and bool(cfg.get("flat_rows", True))
    chn_limits = limits(default_limits("channels", registers, geo, lanes))
    chn, chn_eff = channel_tiling(geo, lanes, *chn_limits, registers, flat_rows)
    depthwise = geo.depthwise and geo.ocg <= 8
    plain = limits(DEFAULTS["pixels"])  # what a short first conv's schedule is judged by
    itemsize = np.dtype(dtype).itemsize
    direct = "depthwise" if depthwise else _estimate(
        geo, lanes, registers, pix, pix_eff, chn, chn_eff, plain, core, itemsize
    )  # fmt: skip
    # no schedule, or Winograd where it cannot run: the direct default
    schedule = direct if chosen is None or chosen in SCHEDULES else str(chosen)
    if schedule == "depthwise" and geo.icg != 1:
        schedule = "pixels"  # a tile loop builds the planes of one input channel only
    tiling = chn if schedule == "channels" else pix
    order = str(cfg.get("order", default_order(geo, schedule, lanes, tiling, registers)))

    def weights_ahead() -> bool:  # as the phased tile would (`default_prefetch`)
        unroll = str(cfg.get("unroll_taps", default_unroll(geo, schedule, tiling, registers)))
        return order == "channels_outer" and bool(cfg.get("prefetch", default_prefetch(
            geo, schedule, order, cache_elements, registers, tiling, lanes, unroll,
            itemsize)))  # fmt: skip

    phased = schedule != "channels" or bool(
        cfg.get("phased", default_phased(geo, registers, tiling, weights_ahead))
    )  # fmt: skip
    geo = geo if phased else geo.unphased()  # what the defaults below see (`Plan.geometry`)
    pad = channel_pad_to_lines(geo, tiling, lanes, itemsize)
    if not cfg.get("align_planes", default_align_planes(geo, order, core.l1_bytes, itemsize)):
        pad = 0
    geo = geo.with_channel_pad(pad) if pad else geo  # what the defaults below see (`Plan.geometry`)
    unroll = offered_unroll(geo, str(cfg.get("unroll_taps", default_unroll(
        geo, schedule, tiling, registers))))  # fmt: skip
    fetch = cfg.get("prefetch", default_prefetch(
        geo, schedule, order, cache_elements, registers, tiling, lanes, unroll,
        itemsize))  # fmt: skip
    split = int(cfg.get("split", default_split(
        geo, schedule, tiling, order, lanes, cache_elements, core.l1_bytes // itemsize,
        core.l2_stream_bytes, core.threads, itemsize, core.fma_flops)))  # fmt: skip
    if split < 1 or geo.icg % split or schedule == "depthwise":
        split = 1
    packable = schedule == "pixels" and order == "pixels_outer" and len(geo.taps) == 1
    pack = packable and bool(cfg.get("pack_input", default_pack_input(
        geo, tiling, split, lanes, core.l1_bytes, itemsize, core.threads)))  # fmt: skip
    return Plan(
        schedule, tiling, order, unroll,
        bool(cfg.get("in_place", True)), bool(fetch), split, pack, pad, phased,
    )  # fmt: skip


def default_phased(
    geo: ConvGeometry, registers: int, tiling: PixelTiling | ChannelTiling,
    weights_ahead: Callable[[], bool],
) -> bool:  # fmt: skip
    """Whether a channels tile reads its input split into stride phases by default: where the
    taps read one phase, on 32-register (AVX-512) targets, where reading it only padded was not
    measured, and for a flat tile over output rows shorter than two tiles that fetches its
    weights ahead (`weights_ahead()`, asked only then).

    A channels tile broadcasts one input element at a time, so it needs no contiguous runs;
    split, a 3x3/2's taps read each input channel in six rows of four planes, a line or two
    each, where the padded input holds them in three rows, and its transform is a plain copy
    (Zen 3, weights from memory: resnet50's 3x3/2 128 @56 and 256 @28 3-4% faster,
    inception_v2's 3x3/2 96 @28 9%, alexnet's 11x11/4 3->96 7%, zfnet512's 5x5/2 2.5%; tiles in
    rows over 5x5 and 10x10 outputs 7-10%). Flat 5x2 tiles over 7x7 outputs, which fetch their
    weights ahead, ran 3-10% slower padded (30 rounds: resnet50's 3x3/2 512 @14 87.0 -> 90.6
    GFLOP/s phased, inception_v2's 256 @14 85.1 -> 87.3; 640 @14 and 1024->512 @14 6-10%), the
    same code reading other addresses; without the prefetch they ran alike, and inception_v2's
    4x3 tile (no spare register: no prefetch) over its 128->192 @14 ran 2.6% faster padded.
    Why the prefetch gains less beside the padded input is not understood (docs/performance.md,
    "Strided channels tiles read the padded input")."""
    if geo.n_phases == 1 or registers > 16:
        return True
    short_rows = isinstance(tiling, ChannelTiling) and tiling.flat and (
        geo.out_shape[-1] < 2 * tiling.mr
    )  # fmt: skip
    return short_rows and weights_ahead()


def channel_pad_to_lines(
    geo: ConvGeometry, tiling: PixelTiling | ChannelTiling, lanes: int, itemsize: int
) -> int:  # fmt: skip
    """Elements after each channel's plane that make every channel start on a cache line, for
    a pointwise conv over planes as one row whose pixel tiles span whole lines (0 where they
    start on lines already, or the conv is not one such)."""
    if not isinstance(tiling, PixelTiling) or len(geo.plane) != 1 or len(geo.taps) != 1:
        return 0
    line = per_line(itemsize)
    if tiling.nv * lanes % line or geo.n_phases != 1:
        return 0
    return -geo.planes_size % line


def default_align_planes(geo: ConvGeometry, order: str, l1_bytes: int, itemsize: int = 4) -> bool:
    """Whether a pointwise conv's pixel tiles read an input copied into planes that start on
    lines (`channel_pad_to_lines`; an input read in place is then copied), by default: where
    every channel block reads the whole input again (channels_outer) and it does not fit in
    L1, so that each block streams it from L2: a 16-pixel AVX2 tile's two straddling lines a
    channel (planes of 676-784 B) ask ~21 bytes a cycle, one line 11, the Zen 3's L2 gives
    ~17. Zen 3, one thread: resnet50's 1x1 256->1024 @14 83% -> 88% of the peak, inception_v1's
    480->192 @13 73% -> 83%, squeezenet's 512->1000 @13 76% -> 86%; 48->192 @13 (its input
    in L1 nearly) 0.97x; pixels_outer tiles, which read their input from L2 once a pixel tile,
    0.84-1.16x with the copy: not taken (docs/performance.md, "Planes that start on lines")."""
    if order != "channels_outer" or l1_bytes <= 0:
        return False
    return geo.icg * geo.channel_stride * itemsize > l1_bytes


PACK_LINES = 2  # lines a step reads, at most, for a default packed input (AVX-512: not measured)
PACK_MIN_CHANNELS = 64  # input channels a chunk, at least (fewer stay in L1 unpacked)
PAGE_BYTES = 4096


def default_pack_input(
    geo: ConvGeometry, tiling: PixelTiling | ChannelTiling, split: int, lanes: int,
    l1_bytes: int, itemsize: int = 4, threads: int = 1,
) -> bool:  # fmt: skip
    """Whether a pixels_outer one-tap pixels tile (`plan` checks that) packs its input by
    default (`PackedInput`): where two or more channel blocks read it, the planes lie half a
    page apart or more, a step reads at most PACK_LINES lines of it and one reduction chunk
    of PACK_MIN_CHANNELS or more fits in L1 packed; and only where there are pixel tiles
    enough to share among `threads` (BLOCKS_PER_THREAD each, at least: the packed loop runs
    in parallel over pixel tiles alone, not over their channel blocks too). Zen 3, one
    thread, cold weights:
    resnet50's 1x1 256->64 @56 82% of the peak -> 91%, 512->128 @28 89% -> 92%, densenet121's
    256-448->128 @28 58-86% -> 85-90%, squeezenet's 128->16 @55 57% -> 70%; on planes of
    676-784 B (@13, @14) 0.94-1.10x, 32->128 @27 0.94x: not taken (docs/performance.md,
    "Pixel tiles pack their input")."""
    if not isinstance(tiling, PixelTiling) or l1_bytes <= 0 or ceil_div(geo.ocg, tiling.mr) < 2:
        return False
    if geo.channel_stride * itemsize < PAGE_BYTES // 2:  # planes near: no gain measured
        return False
    width = tiling.nv * lanes * itemsize
    if ceil_div(width, LINE_BYTES) > PACK_LINES:
        return False
    blocks, _, outer = tiling.cover(geo)
    if geo.batch * outer * blocks * tiling.chunks < BLOCKS_PER_THREAD * max(threads, 1):
        return False
    chunk = geo.icg // max(split, 1)
    return PACK_MIN_CHANNELS <= chunk and chunk * width <= l1_bytes


def default_unroll(
    geo: ConvGeometry, schedule: str, tiling: PixelTiling | ChannelTiling, registers: int = 32
) -> str:  # fmt: skip
    """The taps a config without unroll_taps unrolls per step.

    - a flat channels tile: all of them (up to `flat_unrolled_taps` for its registers, else a
      kernel row), whose pixels' inputs LLVM cannot tell apart, so it shares no loads across
      taps (3x3 512->512 @7, AVX2 5x2: 93% of the peak against 74% with a step per tap, whose
      tap table LLVM unrolled and spilled);
    - a pixels tile on a 16-register (AVX2) target: a kernel row, whose taps' vectors start an
      element or a phase apart, loads LLVM cannot share, and which halves the steps of a short
      reduction (Zen 3, weights from memory: vgg19's 3x3 3->64 90.7 -> 93.6 GFLOP/s, resnet50's
      7x7/2 3->64 92.4 -> 94.3, squeezenet's 3x3/2 3->64 80.7 -> 82.6, deeplab_head's 3x3/2
      16->24 @32 45.1 -> 50.6, U-Net's 3x3 24->8 @64 78.8 -> 81.7; all taps gained less or
      lost: zfnet512's 7x7/2 3->96 92.2 -> 88.4). Not measured on AVX-512;
    - none otherwise: unrolled taps of a channels tile's row read overlapping inputs, which
      LLVM shares across taps until it runs out of registers (4x3 tiles in rows: 67% against
      82%).
    """
    if isinstance(tiling, ChannelTiling) and tiling.flat:
        return "all" if len(geo.taps) <= flat_unrolled_taps(registers) else "row"
    row = schedule == "pixels" and registers <= 16 and "row" in offered_unrolls(geo)
    return "row" if row else "none"  # "row" only where a step holds more than one tap


def default_order(
    geo: ConvGeometry, schedule: str, lanes: int, tiling: PixelTiling | ChannelTiling,
    registers: int,
) -> str:  # fmt: skip
    """The tile loop order a config without one gets (docs/performance.md, "Heavy convs").

    - pixels tiles of an ungrouped conv over fewer input channels than a vector has lanes (a
      first conv of 3 colour channels): channels_outer. Both orders then read from cache (the
      weights and a pixel tile's input are tens of KB); the stores differ, to MR output planes
      in sequence against every output plane at one position per pixel tile.
    - otherwise the operand read once sits in the outer loop, the other is read again per
      outer step: channels_outer where the weights outweigh the input (every stride phase
      plane the taps read: a 3x3/2 conv's four). (pixels_outer, which
      holds a pixel tile's input in cache across all channel blocks, wins on 7x7 planes while
      the weights stay in the caches between runs, not when they come from memory as in a
      model: docs/performance.md.)
    - an ungrouped pointwise conv's channels tiles on a 16-register (AVX2) core: the order
      that reads fewer elements (`pointwise_reads`). Its input, read again per channel block,
      is read whole, lines the next tile shares; pixels_outer re-reads the weights per pixel
      tile, 33 of 6 pixels on a 14x14 plane: densenet121's 992->128 @14 ran 72 -> 88 GFLOP/s
      channels_outer (Zen 3, weights from memory). Not measured on AVX-512.
    """
    if schedule == "pixels" and first_conv(geo, lanes):
        return "channels_outer"
    if isinstance(tiling, ChannelTiling) and registers <= 16:
        moved = pointwise_reads(geo, tiling, lanes)
        if moved:
            return "channels_outer" if moved[0] < moved[1] else "pixels_outer"
    weights, inputs = operand_elements(geo)
    return "channels_outer" if weights > inputs else "pixels_outer"


def operand_elements(geo: ConvGeometry) -> tuple[int, int]:
    """Elements of the weights and of the input (every stride phase plane the taps read)."""
    return geo.out_channels * geo.icg * len(geo.taps), geo.channels * geo.channel_stride


def pointwise_reads(geo: ConvGeometry, tiling: ChannelTiling, lanes: int) -> tuple[int, int] | None:
    """Elements an ungrouped pointwise conv's channels tiles read, in the order channels_outer
    and pixels_outer: the outer operand once, the inner one again for each outer step after the
    first. None where either order reads each operand once (one block or one pixel tile: the
    orders differ in what they fetch ahead)."""
    if len(geo.taps) != 1 or geo.group != 1:
        return None
    blocks = ceil_div(geo.ocg, tiling.nv * lanes)
    tiles = tiling.rows(geo) * tiling.chunks(geo)
    if blocks == 1 or tiles == 1:
        return None
    weights, inputs = operand_elements(geo)
    return weights + (blocks - 1) * inputs, inputs + (tiles - 1) * weights


# tiles of one outer step, at most, per line a reduction step reads of the weights, for a
# multi-tap channels tile to fetch the next block's weights ahead by default: each tile fetches
# a line a step at least, and where a block's weights outgrow L1 each re-fetch moves the line
# from L2 again (Zen 3: 10-33 tiles a 9-line step, or 6-24 a 1-line one, gained 0-12 points;
# 162-338 tiles a 1-2-line step lost 8-19)
MAX_TILES_PER_AHEAD_LINE = 32
# taps a step of a tile with a single spare register may unroll and still fetch ahead: LLVM's
# schedule of a 25-tap step with its prefetch spilled an AVX2 6x2 tile's accumulators (5x5
# 96->256 @26: 95% -> 44% of the peak), not a 5x2 one's (5x5 512 @7: 86% -> 92%)
MAX_AHEAD_TAPS_ONE_SPARE = 9


def default_prefetch(
    geo: ConvGeometry, schedule: str, order: str, cache_elements: int, registers: int = 32,
    tiling: PixelTiling | ChannelTiling | None = None, lanes: int = 16, unroll: str = "none",
    itemsize: int = 4,
) -> bool:  # fmt: skip
    """Whether tiles fetch the next outer step's operand ahead by default: where that operand
    (the weights, channels_outer; the input, pixels_outer) outgrows a core's own cache, so
    that it comes from L3 or memory even in a loop of runs (docs/performance.md, "Prefetch").

    On 16-register targets (AVX2), a channels tile of a multi-tap kernel fetches the weights
    ahead only where it leaves a register spare (the 4x3 tile takes all 16: its prefetches'
    address arithmetic halved 3x3 512->512 @7, docs, "Split reductions"; a 5x2 tile gained
    84% -> 92% of the Zen 3's peak, "Weights ahead of multi-tap channels tiles"), two where a
    step unrolls more than MAX_AHEAD_TAPS_ONE_SPARE taps, and where an outer step's tiles share
    the fetches out (at most MAX_TILES_PER_AHEAD_LINE tiles a line a step reads); never the
    input ahead of a pixels_outer loop (3x3/2 128 @56, 11x11/4 3->96: no gain). AVX-512 tiles
    of 21-28 FMAs a step keep the cache rule alone."""
    if schedule == "depthwise" or cache_elements <= 0:
        return False
    if isinstance(tiling, ChannelTiling) and len(geo.taps) > 1 and registers <= 16:
        per_step = Reduction.taps_per_step(geo).get(unroll, 1)
        spare = registers - tile_registers(tiling.mr, tiling.nv)
        if spare < (1 if per_step <= MAX_AHEAD_TAPS_ONE_SPARE else 2):
            return False
        if order != "channels_outer":
            return False
        lines = ceil_div(per_step * tiling.nv * lanes * itemsize, LINE_BYTES)
        if geo.batch * tiling.rows(geo) * tiling.chunks(geo) > MAX_TILES_PER_AHEAD_LINE * lines:
            return False
    if order == "channels_outer":
        return geo.out_channels * geo.icg * len(geo.taps) > cache_elements
    return geo.channels * geo.channel_stride > cache_elements


# multiply-add steps per chunk of a split reduction, at least: each chunk stores and reloads an
# output-sized temp of partial sums (1.6 MB for 1x1 128->512 @28, which lost 15-25% at 64 steps)
MIN_CHUNK_STEPS = 128
# the same for a chunk kept in L1, whose loop runs inside a channel block (`_tile_loop`): the
# partial sums stay in cache (Zen 3, 1x1 512->2048 @7: 32 steps 91% of the peak, 64 95%)
MIN_L1_CHUNK_STEPS = 32
# the same where the chunk's input is to stay in L1 too (over a group of blocks: `_tile_loop`)
MIN_L1_INPUT_CHUNK_STEPS = 2 * MIN_L1_CHUNK_STEPS


def default_split(
    geo: ConvGeometry, schedule: str, tiling: PixelTiling | ChannelTiling, order: str,
    lanes: int, cache_elements: int, l1_elements: int = 0, l2_stream_bytes: int = 0,
    threads: int = 1, itemsize: int = 4, flops_per_cycle: int = FLOPS_PER_CYCLE,
) -> int:  # fmt: skip
    """Chunks of input channels to cut the reduction into by default: the fewest whose inner
    operand (what each outer step reads again: the input, channels_outer; all the weights,
    pixels_outer) and one outer step's operand (a channel block's weights; a pixel tile's
    input) fit in half a core's own cache, so that a chunk reads them from there, not from
    L3 or memory (docs/performance.md, "Split reductions"). 1 where the whole reduction fits,
    where no chunk of at least MIN_CHUNK_STEPS steps does, where the cache is unknown, or for
    a pointwise conv's pixels tiles (pixels_outer) whose operands fit the whole cache.

    Where a channels_outer channel tile of a pointwise (one-tap) conv would stream its weights
    from L2 faster than the L2 refills L1 (`streams_from_l2`), also: a chunk of a channel
    block's weights fits in a quarter of L1 (of `l1_elements`), so that the block's pixel
    tiles read it from there; chunks then run inside groups of blocks (`_tile_loop`: at least
    BLOCKS_PER_THREAD blocks per thread) and may be as short as MIN_L1_CHUNK_STEPS. Cut further
    where that lets a chunk's input stay in L1 beside two blocks' weight chunks (one
    prefetched) over the group's blocks, in chunks of MIN_L1_INPUT_CHUNK_STEPS at least
    (resnet50's 2048->512 @7: split 32, 97% of the Zen 3's peak, against 85% at split 16,
    whose 25 KB input chunk and 8 KB of weights overflowed L1). (Not for 3x3 tiles: on the
    Zen 3 no split moved resnet50's 3x3 channels convs beyond the noise.) A channels tile's
    input per channel is what its taps read, not the range they span (3x3/2 128 @56,
    pixels_outer: split 4, 87% of the Zen 3's peak, against 8 from the range, 82-85%)."""
    if schedule == "depthwise" or cache_elements <= 0:
        return 1
    taps = len(geo.taps)
    if isinstance(tiling, ChannelTiling):
        # a channel's input the tile reads: MR positions (`stride` apart where unphased; two
        # runs where flat) at each tap, not the whole range between its first and last tap (a
        # 3x3/2's four phase planes)
        block, pixels = tiling.nv * lanes, (tiling.mr - 1) * geo.pixel_steps[-1] + 1
        span = min(pixels + geo.max_tap_offset, taps * (pixels + 2 * per_line(itemsize)))
    else:
        width = tiling.nv * lanes  # a chunk of a row (or of the planes read as one row)
        block, span = tiling.mr, (width + geo.max_tap_offset if tiling.chunks > 1
                                  else tiling.rows * geo.plane[-1] + width)  # fmt: skip
    count = geo.group * ceil_div(geo.ocg, block)  # channel blocks
    in_l1 = (isinstance(tiling, ChannelTiling) and order == "channels_outer" and taps == 1
             and l1_elements > 0 and chunks_inside_blocks(count, threads)
             and streams_from_l2(tiling, lanes, itemsize, l2_stream_bytes,
                                 flops_per_cycle))  # fmt: skip
    input_, weights = geo.batch * geo.channel_stride, taps * block  # per input channel
    if order != "channels_outer":
        input_, weights = geo.group * span, taps * count * block
    fits_l2 = weights_in_l1 = None
    # A pointwise conv's pixels tiles, pixels_outer, stream all the weights in one order for
    # every tile beside the tile's input (counted with a row's slack: an upper bound): where
    # the whole fits the core's cache, unsplit. Zen 4 (1 MB L2), one thread, weights from
    # memory: resnet50's such convs of 706-964 KB so counted 95-98% of the peak unsplit
    # against 91-96% in two chunks, densenet121's 1x1 ->128 @28 (529-706 KB) 97% against 95%
    streamed = isinstance(tiling, PixelTiling) and order == "pixels_outer" and taps == 1
    if streamed and geo.icg * (input_ + weights) <= cache_elements:
        return 1
    for split in (d for d in range(1, geo.icg + 1) if geo.icg % d == 0):
        channels = geo.icg // split
        if channels * taps < (MIN_L1_CHUNK_STEPS if in_l1 else MIN_CHUNK_STEPS):
            break
        if channels * (input_ + weights) > cache_elements // 2:
            continue
        fits_l2 = fits_l2 or split
        if not in_l1:
            return split
        if channels * weights > l1_elements // 4:
            continue
        weights_in_l1 = weights_in_l1 or split
        if channels * taps < MIN_L1_INPUT_CHUNK_STEPS:
            break
        if channels * (input_ + 2 * weights) <= l1_elements:
            return split
    return weights_in_l1 or fits_l2 or 1


def streams_from_l2(
    tiling: ChannelTiling, lanes: int, itemsize: int, l2_stream_bytes: int,
    flops_per_cycle: int = FLOPS_PER_CYCLE,
) -> bool:  # fmt: skip
    """Whether a pointwise conv's channels tile reading its weights from L2 needs more bytes a
    cycle than the L2 sustains into L1 (`l2_demand`). A step reads NV weight vectors and a
    line of input (the MR pixels of the next input channel) in the cycles of its MR x NV FMAs
    (at `flops_per_cycle`)."""
    step_bytes = tiling.nv * lanes * itemsize + LINE_BYTES
    fmas = tiling.mr * tiling.nv
    return l2_demand(step_bytes, fmas, lanes, flops_per_cycle, l2_stream_bytes) > 1


def l2_demand(
    step_bytes: int, fmas: int, lanes: int, flops_per_cycle: int, l2_stream_bytes: int
) -> float:  # fmt: skip
    """The bytes a cycle a reduction step reads from L2 (`step_bytes` in the cycles of its
    `fmas` vector FMAs of `lanes` lanes at `flops_per_cycle`, the core's: `Core.fma_flops`)
    over what the L2 sustains into L1 (`l2_stream_bytes`: tvmc.codegen.target's
    L2_STREAM_BYTES_PER_CYCLE; docs/performance.md, "Pointwise pixel tiles on two 512-bit FMA
    pipes"). 0 where that is unknown."""
    if l2_stream_bytes <= 0:
        return 0.0
    cycles = fmas * 2 * lanes / flops_per_cycle
    return step_bytes / cycles / l2_stream_bytes


def pixels_from_l2(
    geo: ConvGeometry, tiling: PixelTiling, lanes: int, itemsize: int, core: Core
) -> float:  # fmt: skip
    """`l2_demand` of a pointwise conv's pixels tile whose input panel (every input channel's
    NV vectors, which each channel block reads again) outgrows L1: a step reads NV vectors of
    one channel; 0 where the panel stays in L1, the conv has taps or the core is unknown."""
    width = tiling.nv * lanes * itemsize
    if len(geo.taps) != 1 or core.l1_bytes <= 0 or geo.icg * width <= core.l1_bytes:
        return 0.0
    return l2_demand(width, tiling.mr * tiling.nv, lanes, core.fma_flops, core.l2_stream_bytes)


def conv_lowering(
    ctx: LowerContext,
    geo: ConvGeometry,
    x: TensorRef,
    w: TensorRef,
    weight_fn: Callable[[np.ndarray], np.ndarray],
    bias: TensorRef | None,
    out: Buffer,
    epilogue: Epilogue | None,
    shuffle: int = 1,
) -> list[Kernel]:
    """Kernels computing `out` = conv(x, weight_fn(w)) + bias, then the epilogue; `shuffle` > 1:
    x's channels read through a channel shuffle of that many groups (`CHANNEL_SHUFFLE`), where
    the depthwise schedule builds each channel's planes, else from a shuffled copy."""
    acc = accumulator_dtype(out.dtype)
    lanes = ctx.target.lanes(acc)
    cache = ctx.target.cache_bytes // np.dtype(x.type.dtype).itemsize
    registers, constant = ctx.target.vector_registers, w.value is not None
    core = Core.of(ctx.target)
    flat_rows = epilogue is None or epilogue.flat_planes
    p = plan(ctx.config, geo, lanes, registers, cache, x.dtype, constant, core, flat_rows)
    geo = p.geometry(geo)
    parallel = 2 * math.prod(out.shape) * geo.icg * len(geo.taps) >= PARALLEL_MIN_FLOPS
    copies: list[Kernel] = []
    if shuffle > 1 and p.schedule != "depthwise":
        x, copy = _shuffled_copy(ctx, x, shuffle, lanes)
        copies = [copy]
    if isinstance(p.tiling, WinogradLayout):
        assert x.buffer is not None and w.value is not None, "plan checked both"
        weights = weight_fn(np.asarray(w.value, np.float32))
        return copies + winograd_lowering(ctx, p.tiling, x.buffer, weights, bias, out, epilogue,
                                          parallel)  # fmt: skip

    def pack(v: np.ndarray) -> np.ndarray:
        if isinstance(p.tiling, ChannelTiling):
            return pack_channels(weight_fn(v), geo, p.tiling.nv * lanes)
        return pack_pixels(weight_fn(v), geo, p.tiling.mr)

    weights, kernels = packed_operand(ctx, w, pack, "w")
    kernels = copies + kernels
    per_step = Reduction.taps_per_step(geo)[p.unroll_taps]
    steps = Reduction.offsets(geo, per_step)
    table = ctx.param(np.array(steps, np.int32), "taps") if len(steps) > 1 else None
    x_buf = x.buffer
    assert x_buf is not None, "a conv input is a buffer"

    def operands(
        load: Callable[[Expr, int], Expr], fetch: Fetch | None,
        base: Callable[[Expr, Expr], Expr], stride: int,
    ) -> Operands:  # fmt: skip
        red = Reduction(geo, per_step, table, geo.icg // p.split)
        return Operands(
            geo, load, fetch, base, stride, weights, red, bias, out, epilogue, acc, lanes
        )  # fmt: skip

    if p.schedule == "depthwise":
        assert isinstance(p.tiling, PixelTiling)
        body = _depthwise(geo, p.tiling, x_buf, operands, lanes, parallel, shuffle)
        return [*kernels, make_kernel(ctx.name("conv_dw"), body)]

    if isinstance(p.tiling, ChannelTiling):
        reads_end = channel_reads_end(geo)
    else:
        reads_end = pixel_reads_end(geo, p.tiling, lanes)
    cs, planes = geo.channel_stride, geo.batch * geo.channels

    def base(n: Expr, c: Expr) -> Expr:
        return (n * geo.channels + c) * cs

    # in place, the last plane's last tiles read past the input's end: where the lowering allows
    past_end = (reads_end - cs) * x_buf.itemsize
    readable = past_end <= 0 or ctx.may_read_past_end(x_buf, past_end)
    source = geo.transformed_from or geo  # the conv the input transform reads
    assert source.channel_stride == cs, "a flat conv reads its source's planes as they are"
    if source.is_identity and p.in_place and readable and not p.channel_pad:

        def load(off: Expr, w: int) -> Expr:
            return x_buf[_flat(x_buf, lane_index(off, w))]

        def fetch(off: Expr) -> Stmt:
            return prefetch(x_buf, _flat(x_buf, minimum(off, x_buf.size - 1)))

        ops = operands(load, fetch, base, cs)
    else:
        size = (planes - 1) * cs + max(cs, reads_end)
        xt = ctx.temp((size,), x_buf.dtype, "x")
        slack = vector_range(planes * cs, size, lanes, lambda i: xt.store(i, const(0, xt.dtype)))
        split = parallel and planes * cs >= PARALLEL_MIN_ELEMENTS
        body = seq(transform_kernel_body(source, x_buf, xt, lanes, split), slack)
        kernels.append(make_kernel(ctx.name("conv_input"), body))
        ops = operands(lambda off, w: xt[lane_index(off, w)],
                       lambda off: prefetch(xt, minimum(off, size - 1)), base, cs)  # fmt: skip

    loop_ = TileLoop(p.order, parallel, p.prefetch, p.split, lambda tiles, cells:
                     ctx.temp((tiles * cells,), acc, "partial"), core.threads,
                     p.pack_input)  # fmt: skip
    if isinstance(p.tiling, ChannelTiling):
        main = _channel_loop(geo, p.tiling, ops, loop_)
    else:
        main = _pixel_loop(geo, p.tiling, ops, loop_)
    return [*kernels, make_kernel(ctx.name("conv"), main)]


@dataclass(frozen=True)
class TileLoop:
    """How the tile loop runs: its order, in parallel or not, fetching ahead or not, once per
    chunk of a reduction cut into `split` (`partial(tiles, cells)`: the temp keeping sums), for
    a runtime of `threads` threads."""

    order: str
    parallel: bool
    fetch_ahead: bool
    split: int
    partial: Callable[[int, int], Buffer]
    threads: int = 1
    pack_input: bool = False  # pixels_outer one-tap pixels tiles: each pixel tile's input packed


TileBody = Callable[[tuple[Expr, ...], Expr, Expr, Ahead | None, Split | None], Stmt]

# channel blocks per thread, at least, for a split channels_outer loop to run its chunks inside
# groups of blocks (one parallel loop over the groups) rather than the tile loop once per chunk
BLOCKS_PER_THREAD = 4
GROUPS_PER_THREAD = 4  # groups of channel blocks a thread's share is cut into (`_tile_loop`)


def chunks_inside_blocks(blocks: int, threads: int) -> bool:
    """Whether a split channels_outer loop over `blocks` channel blocks runs its chunks inside
    each block (`_tile_loop`): enough blocks to share among `threads`."""
    return blocks >= BLOCKS_PER_THREAD * max(threads, 1)


def _tile_loop(
    pixel_dims: tuple[int, ...], channel_dims: tuple[int, int], how: TileLoop, cells: int,
    body: TileBody,
) -> Stmt:  # fmt: skip
    """One loop over all tiles (of `cells` accumulators each), once per chunk of a split
    reduction: body(pixel coordinates, group, channel block, what the tile prefetches of the
    next outer step (None unless `fetch_ahead` and there is one), its chunk (None unsplit)).

    A split channels_outer loop with enough channel blocks runs the chunks inside groups of
    blocks instead (group, chunk, block, pixel tile; GROUPS_PER_THREAD groups a thread): a
    chunk's input stays in L1 over the group's blocks and a chunk's weights over a block's
    pixel tiles, the group's partial sums stay in cache, and the pool forks once, not per chunk.
    (A group of one block read the whole input from L2 for each block while the weights
    streamed through it: resnet50's 2048->512 @7 82% of the Zen 3's peak, in groups 88%.)
    """
    outer_pixels = how.order != "channels_outer"
    shape = (*pixel_dims, *channel_dims) if outer_pixels else (*channel_dims, *pixel_dims)
    np_ = len(pixel_dims)
    inner = math.prod(channel_dims if outer_pixels else pixel_dims)
    total = math.prod(shape)
    fetch_ahead = how.fetch_ahead and total > inner  # there is a next outer step
    kind = "parallel" if how.parallel and total > 1 else "serial"
    partial = how.partial(total, cells) if how.split > 1 else None

    def tile(
        t: Expr, part: Expr | None, idx: tuple[Expr, ...] | None = None,
        next_step: tuple[Expr, Expr] | None = None,
    ) -> Stmt:  # fmt: skip
        def coordinates(idx: tuple[Expr, ...]) -> Stmt:
            pix, chans = (idx[:np_], idx[np_:]) if outer_pixels else (idx[2:], idx[:2])
            operand = "input" if outer_pixels else "weights"
            ahead = Ahead(operand, t % inner, inner, next_step) if fetch_ahead else None
            split = None if part is None else Split(part, how.split, partial, t, cells)
            return body(pix, chans[0], chans[1], ahead, split)

        return let_all("c", unflatten(t, shape) if idx is None else idx, coordinates)

    def all_tiles(part: Expr | None) -> Stmt:
        # Channels_outer: the pixel tiles of a channel block in a loop inside each step
        # (`every_tile`). Pixels_outer keeps one flat loop: with a pixel tile's channel blocks
        # in an inner loop, LLVM hoisted the tile's input out of it where the reduction
        # unrolled fully, and spilled it beside a SiLU epilogue (Zen 3, efficientnet's 1x1
        # 8->48 @32x32: 0.80x; the same conv with a clamp, mobilenet_v2's, ran 2.25x faster)
        if outer_pixels:
            return loop("t", total, lambda t: tile(t, part), kind)
        return every_tile(shape, kind, how.threads, lambda t, idx: tile(t, part, idx))

    if partial is None:
        return all_tiles(None)
    blocks = total // inner
    if outer_pixels or not chunks_inside_blocks(blocks, how.threads):
        return loop("part", how.split, all_tiles)
    size = ceil_div(blocks, GROUPS_PER_THREAD * max(how.threads, 1))  # blocks a group

    def group(g: Expr) -> Stmt:
        def block(part: Expr, k: Expr) -> Stmt:
            b = g * size + k
            step = next_outer_step(b, k, part, size, blocks, how.split)
            tiles = loop("i", inner, lambda i: tile(b * inner + i, part, next_step=step))
            return tiles if blocks % size == 0 else if_then_else(b < blocks, tiles)

        return loop("part", how.split, lambda part: loop("k", size, lambda k: block(part, k)))

    return loop("g", ceil_div(blocks, size), group, kind)


def next_outer_step(
    b: Expr, k: Expr, part: Expr, size: int, blocks: int, parts: int
) -> tuple[Expr, Expr]:  # fmt: skip
    """(channel blocks, chunks) from block `b` (the group's k-th of `size`) in chunk `part` to
    the block and chunk `_tile_loop`'s groups run next: the group's next block, else its first
    block in the next chunk, else the next group's first block in the first chunk; (0, 0)
    after the last. Fetching the next block of the same chunk instead, a group's last block
    fetched what the loop reads a whole group later (in a group of one block, every fetch;
    Zen 3, resnet50's 1x1 1024->256 @14 built for two threads, groups of two: 1.01-1.07x)."""
    in_group = (k < size - 1) & (b + 1 < blocks)
    next_chunk = part < parts - 1
    next_group = b + (size - k) < blocks
    blocks_on = select(in_group, const(1), select(next_chunk, -k, select(
        next_group, size - k, const(0))))  # fmt: skip
    chunks_on = select(in_group, const(0), select(next_chunk, const(1), select(
        next_group, const(1 - parts), const(0))))  # fmt: skip
    return blocks_on, chunks_on


def _pixel_loop(geo: ConvGeometry, tiling: PixelTiling, ops: Operands, how: TileLoop) -> Stmt:
    if how.pack_input:
        return _packed_pixel_loop(geo, tiling, ops, how)
    blocks, _, outer = tiling.cover(geo)
    dims = (geo.batch, outer, blocks, tiling.chunks)

    def body(
        p: tuple[Expr, ...], g: Expr, ob: Expr, ahead: Ahead | None, split: Split | None
    ) -> Stmt:  # fmt: skip
        n, o, rb, ch = p
        lead = unflatten(o, geo.out_shape[:-2]) if len(geo.out_shape) > 2 else ()
        return pixel_tile(ops, tiling, n, g, ob, lead, rb, ch, ahead, split)

    channels = (geo.group, ceil_div(geo.ocg, tiling.mr))
    cells = tiling.mr * tiling.nv * ops.lanes
    return _tile_loop(dims, channels, how, cells, body)


def _packed_pixel_loop(
    geo: ConvGeometry, tiling: PixelTiling, ops: Operands, how: TileLoop
) -> Stmt:  # fmt: skip
    """The pixels_outer loop of a one-tap conv whose pixel tiles pack their input: per pixel
    tile (and group), the first channel block copies the input it reads into local scratch,
    which the other blocks then read (`PackedInput`); that first block fetches the next pixel
    tile's input where `fetch_ahead`. One parallel loop over pixel tiles (per chunk where
    split; `Split`'s tiles are numbered as `_tile_loop`'s, pixel tile major)."""
    blocks, _, outer = tiling.cover(geo)
    dims = (geo.batch, outer, blocks, tiling.chunks)
    pixels, oblocks = math.prod(dims), ceil_div(geo.ocg, tiling.mr)
    width = tiling.nv * ops.lanes
    cells = tiling.mr * width
    partial = how.partial(pixels * geo.group * oblocks, cells) if how.split > 1 else None
    # positions to the next pixel tile: the next chunk of the row, or the next block of rows
    span = width if tiling.chunks > 1 else tiling.rows * geo.plane[-1]
    next_tile = span if how.fetch_ahead and pixels > 1 else 0

    def pixel_tile_of(p: Expr, part: Expr | None) -> Stmt:
        def at(idx: tuple[Expr, ...]) -> Stmt:
            n, o, rb, ch = idx
            lead = unflatten(o, geo.out_shape[:-2]) if len(geo.out_shape) > 2 else ()

            def group(g: Expr) -> Stmt:
                def tiles(scratch: Buffer) -> Stmt:
                    def block(ob: Expr, packed: PackedInput) -> Stmt:
                        t = (p * geo.group + g) * oblocks + ob
                        split = None if part is None else Split(part, how.split, partial, t,
                                                                cells)  # fmt: skip
                        return pixel_tile(ops, tiling, n, g, ob, lead, rb, ch, None, split,
                                          packed=packed)  # fmt: skip

                    first = block(const(0), PackedInput(scratch, True, next_tile))
                    rest = loop("ob", oblocks - 1, lambda k: block(k + 1, PackedInput(scratch)))
                    return seq(first, rest) if oblocks > 1 else first

                chunk = geo.icg // how.split
                return allocate("tile_input", (chunk * width,), tiles, ops.weights.dtype)

            return loop("g", geo.group, group) if geo.group > 1 else group(const(0))

        return let_all("c", unflatten(p, dims), at)

    kind = "parallel" if how.parallel and pixels > 1 else "serial"
    if partial is None:
        return loop("p", pixels, lambda p: pixel_tile_of(p, None), kind)
    return loop("part", how.split,
                lambda part: loop("p", pixels, lambda p: pixel_tile_of(p, part), kind))  # fmt: skip


def _channel_loop(geo: ConvGeometry, tiling: ChannelTiling, ops: Operands, how: TileLoop) -> Stmt:
    dims = (geo.batch, tiling.rows(geo), tiling.chunks(geo))
    width = tiling.nv * ops.lanes

    def body(
        p: tuple[Expr, ...], g: Expr, ob: Expr, ahead: Ahead | None, split: Split | None
    ) -> Stmt:  # fmt: skip
        n, row, pc = p
        lead = () if tiling.flat else unflatten(row, geo.out_shape[:-1])
        return channel_tile(ops, tiling, n, g, ob, lead, pc, ahead, split)

    channels = (geo.group, ceil_div(geo.ocg, width))
    return _tile_loop(dims, channels, how, tiling.mr * width, body)


def _depthwise(
    geo: ConvGeometry, tiling: PixelTiling, x: Buffer,
    operands: Callable[..., Operands], lanes: int, parallel: bool, shuffle: int = 1,
) -> Stmt:  # fmt: skip
    """Per (n, group): build the channel's planes in local scratch, then every pixel tile; the
    planes of the channel a shuffle of `shuffle` groups would have put there (1: none)."""
    size = max(geo.channel_stride, pixel_reads_end(geo, tiling, lanes))
    blocks, _, outer = tiling.cover(geo)
    oblocks = ceil_div(geo.ocg, tiling.mr)

    def body(s: Buffer, n: Expr, g: Expr) -> Stmt:
        # planes in scratch, built per channel: nothing to fetch ahead
        ops = operands(lambda off, w: s[lane_index(off, w)], None, lambda n_, c_: const(0), 0)

        def at(idx: tuple[Expr, ...]) -> Stmt:
            o, rb, ch, ob = idx
            lead = unflatten(o, geo.out_shape[:-2]) if len(geo.out_shape) > 2 else ()
            return pixel_tile(ops, tiling, n, g, ob, lead, rb, ch)

        zero = const(0, s.dtype)
        tiles = (outer, blocks, tiling.chunks, oblocks)
        return seq(
            fill_planes(geo, x, n, source(g), s, const(0), lanes),
            vector_range(geo.channel_stride, size, lanes, lambda i: s.store(i, zero)),
            every_tile(tiles, "serial", 1, lambda t, idx: let_all("c", idx, at)),
        )

    def source(g: Expr) -> Expr:  # one input channel a group
        return shuffled_channel(g, shuffle, geo.channels) if shuffle > 1 else g

    def channel(ng: Expr) -> Stmt:
        def scratch(ids: tuple[Expr, ...]) -> Stmt:
            return allocate("planes", (size,), lambda s: body(s, *ids), x.dtype)

        return let_all("c", (ng // geo.group, ng % geo.group), scratch)

    count = geo.batch * geo.group
    return loop("ng", count, channel, "parallel" if parallel and count > 1 else "serial")


def _flat(buf: Buffer, offset: Expr) -> tuple[Expr, ...]:
    """The index of `buf` that reaches `offset` elements in (row-major) through its last axis."""
    return (*(const(0),) * (buf.ndim - 1), offset)


def _shuffled_copy(
    ctx: LowerContext, x: TensorRef, groups: int, lanes: int
) -> tuple[TensorRef, Kernel]:  # fmt: skip
    """x with its channels shuffled (`CHANNEL_SHUFFLE`) in scratch, for schedules that read the
    input in place or through their own transform: the tensor and the kernel that copies it."""
    assert x.buffer is not None, "a conv input is a buffer"
    src = x.buffer
    batch, channels, *spatial = x.shape
    plane = math.prod(spatial)
    dst = ctx.temp(x.shape, src.dtype, "shuffled")

    def channel(nc: Expr) -> Stmt:
        n, c = nc // channels, nc % channels
        start = (n * channels + shuffled_channel(c, groups, channels)) * plane
        return vector_range(
            0,
            plane,
            lanes,
            lambda i: dst.store(_flat(dst, nc * plane + i), src[_flat(src, start + i)]),
        )

    count = batch * channels
    parallel = count > 1 and count * plane >= PARALLEL_MIN_ELEMENTS
    body = loop("nc", count, channel, "parallel" if parallel else "serial")
    return ref_of_buffer(x.name, x.type, dst), make_kernel(ctx.name("shuffle"), body)


MAX_VECTORS = 15  # NV with MR = 1 still fits: 1 * 15 + 15 + 1 <= 32
ROW_LIMITS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 30)  # MR limits tried
MAX_UNROLLED_TAPS = 49  # "all" beyond a 7x7 kernel only grows the code
KEEP = {"pixels": 16, "channels": 12}  # distinct tilings kept per schedule
# (tile_vectors, tile_rows) `plan` uses when a config has none ("depthwise": pixels)
DEFAULTS = {"pixels": (8, 6), "channels": (4, 14)}
NARROW_CHANNEL_VECTORS = 2  # a 16-register target's channels tiles: vectors, at most, by default
SHORT_FIRST_CONV_TILE = (2, 4)  # a 16-register target's short first convs: (vectors, rows)


def default_limits(
    schedule: str, registers: int, geo: ConvGeometry, lanes: int
) -> tuple[int, int]:  # fmt: skip
    """The (tile_vectors, tile_rows) limits a config without them gets: DEFAULTS, but on
    16-register (AVX2) targets:

    - a pointwise conv's channels tiles of NARROW_CHANNEL_VECTORS, whose 4x3 tile takes every
      register (12 sums, 3 weight vectors, a broadcast): Zen 3, one thread, every tile of the
      space timed, 1x1 512->2048 @7 4x3 80% of the peak against 5x2 85%, 1024->2048/2 @14 79%
      against 84%, 512->1024/2 @28 85% against 6x2 88% (docs/performance.md, "AVX2 channels
      tiles of two vectors"). (Not for larger kernels: the limit also moves their choice
      between tiles in rows and through the rows, and from there to pixels tiles, not
      measured.)
    - a first conv's pixels tiles (`first_conv`) whose reduction is short (under
      MIN_CHUNK_STEPS steps): SHORT_FIRST_CONV_TILE, 8 sums, two FMA pipes' latency, not 12,
      where the tile holds all 8 (not on rows of one vector, nor for fewer than 4 channels).
      Zen 3, one thread, weights from memory: vgg19's 3x3 3->64 @224 82% of the peak ->
      90%, mobilenet_v2's 3x3/2 3->32 63% -> 70%, 5x5 3->64 @112 90% -> 94%; not resnet50's
      7x7/2 3->64 (147 steps: 89% against 87%) nor 3x3 8->64 (72 steps, pixels_outer: 82%
      against 79%). Not understood beyond the 6-row tile's padded channels (64 in 11 blocks
      of 6: 3%; 60 channels in 10 still gained 3%)."""
    vectors, rows = DEFAULTS[schedule]
    if registers <= 16 and schedule == "channels" and len(geo.taps) == 1:
        vectors = min(vectors, NARROW_CHANNEL_VECTORS)
    if schedule == "pixels" and short_first_conv(geo, registers, lanes):
        # not where the rows (narrower than two vectors) or the channels leave it fewer sums
        tile, _ = pixel_tiling(geo, lanes, *SHORT_FIRST_CONV_TILE, registers)
        if tile.mr * tile.nv == math.prod(SHORT_FIRST_CONV_TILE):
            vectors, rows = SHORT_FIRST_CONV_TILE
    return vectors, rows


def short_first_conv(geo: ConvGeometry, registers: int, lanes: int) -> bool:
    """A first conv (`first_conv`) of a reduction under MIN_CHUNK_STEPS steps on a 16-register
    target: its pixels tiles take SHORT_FIRST_CONV_TILE (`default_limits`)."""
    short = geo.icg * len(geo.taps) < MIN_CHUNK_STEPS
    return registers <= 16 and first_conv(geo, lanes) and short


def first_conv(geo: ConvGeometry, lanes: int) -> bool:
    """An ungrouped conv over fewer input channels than a vector has lanes (a first conv of 3
    colour channels): its pixels tiles run channels_outer (`default_order`)."""
    return geo.group == 1 and geo.icg < lanes


ORDERS = ("pixels_outer", "channels_outer")  # tile loop orders of "pixels" and "channels"
ORDERED = ("pixels", "channels")  # the schedules with a tile loop order
FLAT = "flat"  # a channels plan's entry after unroll_taps where its tile may run through the rows
PHASED, UNPHASED = "phased", "unphased"  # a channels plan's last entry where it sets `phased`


# ---- the knob space ------------------------------------------------------------------------------
RULES = {"Conv": conv_rule, "ConvTranspose": conv_transpose_rule}


DEFAULT_TARGET = LoweringTarget()  # what a lowering is told by default (AVX-512's lanes)


def geometry_of(
    op: str, attrs: Attrs, input_types: Sequence[TensorType],
    target: LoweringTarget = DEFAULT_TARGET,
) -> ConvGeometry:  # fmt: skip
    """The geometry of the conv the template tiles for this workload on `target`, from types
    alone: a strided ConvTranspose's columns conv, or its stuffed reading, or `tiled_geometry`."""
    x, w = input_types[0], input_types[1]
    out = RULES[op](attrs, list(input_types))[0]
    geo = ConvGeometry.of_node(op, attrs, x.shape, w.shape, out.shape)
    if uses_columns(geo):
        return columns_geometry(geo)
    lanes = target.lanes(accumulator_dtype(x.dtype))
    return tiled_geometry(geo.stuffed(), lanes, target.vector_registers, Core.of(target))


def tiled_geometry(
    geo: ConvGeometry, lanes: int, registers: int, core: Core | None = None
) -> ConvGeometry:  # fmt: skip
    """The geometry a conv's tiles run over: a pointwise conv's planes as one row (`flattened`)
    where the default plan's tile (pixels or channels) fills more of its lanes so, by
    MIN_FLAT_GAIN (AVX2's 16-wide pixel tiles on rows of 56: 14 of 16 lanes, resnet50's 1x1
    convs 1.14x as one row; its 4-pixel channel tiles on rows of 7: 7 of 8; AVX-512's 2 rows of
    56 fill 7 vectors whole either way), not a depthwise conv, whose loop reads planes row by
    row."""
    flat = geo.flattened()
    if flat is geo or geo.depthwise:
        return geo
    filled = [_default_fill(g, lanes, registers, core) for g in (geo, flat)]
    return flat if filled[1] > filled[0] * MIN_FLAT_GAIN else geo


def _default_fill(geo: ConvGeometry, lanes: int, registers: int, core: Core | None) -> float:
    """The useful share of the lanes of the tile the default plan takes (pixels or channels)."""
    pix, pix_eff = pixel_tiling(
        geo, lanes, *default_limits("pixels", registers, geo, lanes), registers
    )
    chn, chn_eff = channel_tiling(
        geo, lanes, *default_limits("channels", registers, geo, lanes), registers
    )
    schedule = _estimate(
        geo, lanes, registers, pix, pix_eff, chn, chn_eff, DEFAULTS["pixels"], core
    )  # fmt: skip
    return pix_eff if schedule == "pixels" else chn_eff


def conv_space(op: str) -> Callable[[Attrs, list[TensorType], LoweringTarget], ConfigSpace]:
    """The knob space of `op` workloads; `default_index` is the config whose plan `{}` gets."""

    def space(attrs: Attrs, input_types: list[TensorType], target: LoweringTarget) -> ConfigSpace:
        geo = geometry_of(op, attrs, input_types, target)
        lanes = target.lanes(accumulator_dtype(input_types[0].dtype))
        registers = target.vector_registers
        dtype = input_types[0].dtype
        cache = target.cache_bytes // np.dtype(dtype).itemsize
        configs = _space(geo, lanes, registers, eligible(geo, dtype))
        core = Core.of(target)

        def planned(cfg: Mapping[str, Any]) -> Plan:
            return plan(cfg, geo, lanes, registers, cache, dtype, core=core)

        if geo.n_phases > 1:
            configs = phase_flips(configs, lambda entry: planned({"plan": entry}).phased)

        want = planned({})
        configs.default_index = next(
            (i for i in range(len(configs)) if planned(configs.get(i).values) == want),
            None,
        )  # fmt: skip
        return configs if configs.default_index is not None else with_default_band(
            configs, want, planned)  # fmt: skip

    space.__doc__ = f"The knob space of a {op} workload."
    return space


def with_default_band(
    configs: ConfigSpace, want: Plan, planned: Callable[[Mapping[str, Any]], Plan]
) -> ConfigSpace:  # fmt: skip
    """`configs`, which hold no config of the default plan `want`, with its Winograd band where
    the space's bands, chosen by the geometry alone (`offered_bands`), miss the one the default
    chose for this core's caches and threads (`default_band`): the unblocked plan of its GEMM
    tile, in that band, as the default config. Unchanged for any other plan."""
    if not isinstance(want.tiling, WinogradLayout) or not want.tiling.band:
        return configs
    (knob,) = configs.knobs
    plans = list(knob.candidates)
    whole = replace(want, tiling=replace(want.tiling, band=0))
    entry = next((p for p in plans if len(p) == 4 and not p[3] and planned({"plan": p}) == whole),
                 None)  # fmt: skip
    if entry is None:  # no config of the space is the default's tile: no default config
        return configs
    extended = ConfigSpace().other(knob.name, [*plans, [*entry[:3], want.tiling.band]])
    extended.default_index = len(plans)
    return extended


def offered_unroll(geo: ConvGeometry, unroll: str) -> str:
    """The unroll_taps value of the same taps a step as `unroll` that the space names
    (`offered_unrolls`): "none" for one tap a step, "row" for a kernel of one row. A 1x1 conv's
    "all" builds the code of its "none"; said one way, the default plan is a config's plan (an
    AVX2 flat channels tile over mobilenet_v2's 1x1 32->128 @2x2 defaulted to "all", which
    no config of the space named: its space had no default config)."""
    steps = Reduction.taps_per_step(geo)
    if unroll not in steps:
        return unroll
    return next(u for u in ("none", "row", "all") if steps[u] == steps[unroll])


def offered_unrolls(geo: ConvGeometry) -> list[str]:
    """The unroll_taps values the space offers: "none", and "row" and "all" where a step of
    them holds more than one tap and at most MAX_UNROLLED_TAPS ("all" not where one kernel
    row is the whole kernel)."""
    steps = Reduction.taps_per_step(geo)
    unroll = [u for u in ("none", "row", "all") if u == "none" or 1 < steps[u] <= MAX_UNROLLED_TAPS]
    if steps["row"] == steps["all"] and "row" in unroll and "all" in unroll:
        unroll.remove("all")  # one kernel row is the whole kernel
    return unroll


def phase_flips(configs: ConfigSpace, phased: Callable[[list[Any]], bool]) -> ConfigSpace:
    """`configs` with each channels plan also reading the input the other way than its default
    (`phased(plan)`): the plan with "unphased" or "phased" after it. The default rule was
    measured on one core (`default_phased`: a Zen 3; AVX-512 not at all), and the two layouts
    run the same tile 3-10% apart either way, so tuning may choose."""
    (knob,) = configs.knobs
    plans = list(knob.candidates)
    plans += [[*p, UNPHASED if phased(p) else PHASED] for p in plans if p[0] == "channels"]
    return ConfigSpace().other(knob.name, plans)


def _space(geo: ConvGeometry, lanes: int, registers: int, winograd: bool) -> ConfigSpace:
    with_channels = not geo.depthwise or geo.ocg > 8  # the template's default may pick it then

    def pixels(nv: int, mr: int) -> tuple[Hashable, float, tuple[int, int]]:
        tiling, eff = pixel_tiling(geo, lanes, nv, mr, registers)
        used = geo.ocg / (ceil_div(geo.ocg, tiling.mr) * tiling.mr)
        return tiling, eff * used * density(tiling.mr, tiling.nv), (tiling.nv, tiling.mr)

    unroll = offered_unrolls(geo)
    rows = [r for r in ROW_LIMITS if r <= geo.ocg] or [1]
    pixel_tiles = _tiles(
        pixels,
        range(1, MAX_VECTORS + 1),
        rows,
        default_limits("pixels", registers, geo, lanes),
        "pixels",
    )
    plans = [["pixels", nv, mr, order, u] for nv, mr in pixel_tiles for order in ORDERS
             for u in unroll]  # fmt: skip
    if geo.depthwise:
        plans = [["depthwise", nv, mr, u] for nv, mr in pixel_tiles for u in unroll] + plans
    if with_channels:
        vectors = range(1, min(MAX_VECTORS, ceil_div(geo.ocg, lanes)) + 1)
        pixels_ = [r for r in ROW_LIMITS if r <= geo.out_shape[-1]] or [1]
        for flat in (False, True):  # tiles in rows, then those that run through the rows
            tile = _channel_tile(geo, lanes, registers, flat)
            default = default_limits("channels", registers, geo, lanes)
            tiles = [t for t in _tiles(tile, vectors, pixels_, default, "channels")
                     if tile(*t)[0].flat == flat]  # fmt: skip
            plans += [["channels", nv, mr, order, u, *[FLAT] * flat] for nv, mr in tiles
                      for order in ORDERS for u in unroll]  # fmt: skip
    if winograd:
        for name, m in SCHEDULES.items():
            for nv, mr in gemm_tiles(geo, m, lanes, registers):
                whole = layout(geo, m, lanes, registers, nv, mr)
                plans += [[name, nv, mr, band] for band in offered_bands(whole, registers)]
    return ConfigSpace().other("plan", plans)


def _channel_tile(
    geo: ConvGeometry, lanes: int, registers: int, flat_rows: bool
) -> Callable[[int, int], tuple[Hashable, float, tuple[int, int]]]:  # fmt: skip
    """`_tiles`' tile function of channels tiles (through the rows where `flat_rows` lets
    `channel_tiling` pick that)."""

    def tile(nv: int, mr: int) -> tuple[Hashable, float, tuple[int, int]]:
        tiling, useful = channel_tiling(geo, lanes, nv, mr, registers, flat_rows)
        return tiling, useful * density(tiling.mr, tiling.nv), (tiling.nv, tiling.mr)

    return tile


def _tiles(
    tile: Callable[[int, int], tuple[Hashable, float, tuple[int, int]]],
    vectors: Sequence[int],
    rows: Sequence[int],
    default: tuple[int, int],
    schedule: str,
) -> list[tuple[int, int]]:
    """(NV, MR) limit pairs of a schedule, one per distinct tiling, the best KEEP by the model.

    `tile(nv, mr)` is (tiling, modelled throughput, the tiling's own (NV, MR)). A class of
    pairs giving one tiling is named by the tiling's own pair where it is one of them, else by
    its least pair. The class of the template's default (the `default` pair) always stays.
    """
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


# ---- templates -----------------------------------------------------------------------------------
def conv_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Conv of any rank through the transform + register-tile kernels."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    geo = ConvGeometry.of_node("Conv", attrs, x.shape, w.shape, outputs[0].shape)
    geo = _tiled_for(ctx, geo, x.dtype, epilogue)
    shuffle = attrs.get(CHANNEL_SHUFFLE, 1)
    return conv_lowering(ctx, geo, x, w, lambda v: v, bias, outputs[0], epilogue, shuffle)


def _tiled_for(
    ctx: LowerContext, geo: ConvGeometry, dtype: str, epilogue: Epilogue | None
) -> ConvGeometry:  # fmt: skip
    """`tiled_geometry` on the context's target, where the epilogue allows (its reads may need
    each position's own indices: `Epilogue.flat_planes`)."""
    if epilogue is not None and not epilogue.flat_planes:
        return geo
    lanes = ctx.target.lanes(accumulator_dtype(dtype))
    return tiled_geometry(geo, lanes, ctx.target.vector_registers, Core.of(ctx.target))


def conv_transpose_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """A strided ConvTranspose as columns + gather (cpu_transpose), others as a stride-1 conv
    of the zero-stuffed input with flipped weights."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    geo = ConvGeometry.of_node("ConvTranspose", attrs, x.shape, w.shape, outputs[0].shape)
    if uses_columns(geo):
        return columns_lowering(conv_lowering, ctx, geo, x, w, bias, outputs[0], epilogue)
    group, (c, mg, *kernel) = attrs["group"], w.shape
    spatial = len(kernel)

    def flip(v: np.ndarray) -> np.ndarray:
        # (C, M/g, *K) -> (M, C/g, *K) per group, spatially flipped
        t = v.reshape(group, c // group, mg, *kernel).swapaxes(1, 2)
        t = t.reshape(group * mg, c // group, *kernel)
        return t[(slice(None), slice(None), *(slice(None, None, -1),) * spatial)]

    stuffed = _tiled_for(ctx, geo.stuffed(), x.dtype, epilogue)  # a 1x1 one is pointwise
    return conv_lowering(ctx, stuffed, x, w, flip, bias, outputs[0], epilogue)


CONV = Template(conv_template, conv_space("Conv"), epilogue=True)
CONV_TRANSPOSE = Template(conv_transpose_template, conv_space("ConvTranspose"), epilogue=True)
