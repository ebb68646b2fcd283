"""The two register-tiled conv schedules over transformed input planes (see cpu_layout).

- pixels: a tile is MR output channels x NV vectors of consecutive plane positions (whole
  output rows, or a chunk of one row). Broadcast operand: packed weights
  `[group][oc block][icg][tap][MR]`; vector operand: input plane rows at each tap's offset.
  Lanes falling on the planes' padding columns are computed and dropped at the store, so this
  suits 1x1 convs (no padding columns) and wide rows.
- channels: a tile is MR consecutive output pixels (of a row, or of the planes read as one
  row: `ChannelTiling.flat`) x NV vectors of output channels. Broadcast operand: one input
  element per pixel and tap; vector operand: packed weights `[group][oc block][icg][tap][NV*16]`.
  No lane is wasted on padding, but the tile leaves through a transposing store (pixels are
  contiguous in NCHW, channels are not), which only pays when the reduction (icg x taps) is
  long: 3x3 convs, small images.

Either schedule may split its reduction (`Split`): the tile loop runs once per chunk of input
channels, each run adding its sums to the last one's, so that what a chunk's inner loop reads
again and again fits a core's own cache where the whole reduction's would not.

Either schedule may fetch ahead (`Ahead`): each step of a tile's reduction prefetches the tile's
share of what the tile loop's next outer step will read in that step, so that the operand read
once (the outer one) comes from memory spread over all the tiles of an outer step instead of in
a burst at its first tile.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tvmc.kernel import (
    Buffer,
    Expr,
    IntImm,
    Stmt,
    const,
    if_then_else,
    loop,
    minimum,
    prefetch,
    ramp,
    select,
    seq,
)
from tvmc.ops.conv.geometry import ConvGeometry, through_last_axis
from tvmc.ops.lowering import Epilogue, TensorRef
from tvmc.ops.schedule.microkernel import (
    ceil_div,
    finalize,
    lane_index,
    let_all,
    pad_axis,
    pieces,
    register_tile,
    unflatten,
)

Load = Callable[[Expr, int], Expr]  # (flat offset into the transformed input, lanes) -> value
Fetch = Callable[[Expr], Stmt]  # flat offset into the transformed input -> its prefetch
LINE_BYTES = 64  # the cache line of x86-64 and of the usual AArch64 cores


def per_line(itemsize: int) -> int:
    """Elements of `itemsize` bytes a cache line holds (1 for elements wider than a line)."""
    return max(1, LINE_BYTES // itemsize)


def density(mr: int, nv: int) -> float:
    """How well a tile hides its loads and loop overhead behind its MR x NV fmas (a model)."""
    return mr * nv / (mr * nv + 4)


# What the default tilings assume of a core (documented by Intel and AMD, not measured): the
# x86 cores with FMA since Haswell do 32 fp32 flops per cycle (two 256-bit FMA pipes; Zen 4 runs
# a 512-bit FMA on both, Zen 5 and Intel's two-unit AVX-512 Xeons do 64), at a latency of 4
# cycles (Haswell 5), and load two vectors or broadcasts per cycle (Zen 3/4 three of up to 256
# bits). The L2 rules take a named CPU's own rate (`CPUTarget.fma_flops_per_cycle`); the
# register tiles' fit (`fits_core`) keeps 32 (the heavy convs' AVX-512 tiles have 8 accumulators
# or more; not revisited for Zen 5).
FLOPS_PER_CYCLE = 32
FMA_LATENCY = 4
LOADS_PER_CYCLE = 2


def fits_core(mr: int, nv: int, lanes: int, useful: float = 1.0) -> bool:
    """Whether an MR x NV tile of `lanes`-float vectors can keep the FMA pipes busy
    (docs/performance.md, "AVX2 builds: tiles that fit the core"); the tilings prefer them.

    - latency: FMA_LATENCY x FMAs per cycle independent accumulators, of useful lanes (`useful`:
      the share not spent on padding): 8 with AVX2's 8 lanes (2 FMAs a cycle), 4 with
      AVX-512's 16 (1 a cycle on Zen 4; Intel's 2-unit Xeons need 8, which the heavy convs'
      AVX-512 tiles have: 14 to 28).
    - loads: a reduction step's NV vector loads and MR broadcasts take no more cycles than its
      MR x NV FMAs: with 8 lanes no more loads than FMAs (1 x 7 and 14 x 1 have more).
    """
    fmas, per_cycle = mr * nv, FLOPS_PER_CYCLE / (2 * lanes)
    cycles = fmas / per_cycle
    return fmas * useful >= FMA_LATENCY * per_cycle and mr + nv <= LOADS_PER_CYCLE * cycles


def tile_registers(mr: int, nv: int) -> int:
    """Vector registers an MR x NV tile holds through a step: its accumulators, the NV loaded
    vectors and a broadcast (LLVM loads a k step's vectors once and reuses them across rows)."""
    return mr * nv + nv + 1


def max_rows(nv: int, registers: int) -> int:
    """Most tile rows whose registers (`tile_registers`) fit in `registers`."""
    return max(1, (registers - 1 - nv) // nv)


def max_vectors(registers: int) -> int:
    """Most vectors per tile row: one row of NV accumulators, NV loaded vectors and a broadcast."""
    return max(1, (registers - 1) // 2)


@dataclass(frozen=True)
class Reduction:
    """The sum over (input channel, kernel taps): serial loops over the channels (`channels`
    of them per run of the tile loop: all, or a chunk of a `Split`) and over steps of
    `per_step` consecutive taps (unrolled), a step's offset read from a table."""

    geo: ConvGeometry
    per_step: int  # taps unrolled per step: all, one kernel row, or 1
    table: Buffer | None  # offset of each step's first tap; None when there is one step
    channels: int  # input channels summed per run of the tile loop

    @staticmethod
    def taps_per_step(geo: ConvGeometry) -> dict[str, int]:
        """Taps a step unrolls, by the `unroll_taps` knob's value."""
        return {"all": len(geo.taps), "row": geo.kernel[-1], "none": 1}

    @staticmethod
    def offsets(geo: ConvGeometry, per_step: int) -> list[int]:
        """Offsets of each step's first tap (what `table` holds)."""
        return [geo.tap_offset(t) for t in geo.taps[::per_step]]

    @property
    def loops(self) -> list[tuple[str, int]]:
        """The serial reduction loops: input channels, then tap steps."""
        steps = len(self.geo.taps) // self.per_step
        return [(name, n) for name, n in (("ic", self.channels), ("kh", steps)) if n > 1]

    @property
    def taps(self) -> int:
        """Taps unrolled within one step of the loops."""
        return self.per_step

    def _vars(self, ks: tuple[Expr, ...]) -> tuple[Expr, Expr]:
        found = dict(zip((name for name, _ in self.loops), ks))
        return found.get("ic", const(0)), found.get("kh", const(0))

    def first_channel(self, split: Split | None) -> Expr:
        """Input channel (within the group) of this run's first step."""
        return const(0) if split is None else split.part * self.channels

    def channel(self, ks: tuple[Expr, ...], split: Split | None = None) -> Expr:
        """Input channel (within the group) of this step."""
        ic = self._vars(ks)[0]
        return ic if split is None else split.part * self.channels + ic

    def first_tap(self, ks: tuple[Expr, ...]) -> Expr:
        """Tap index (row-major over the kernel) of this step's first unrolled tap."""
        return self._vars(ks)[1] * self.taps

    def row_offset(self, ks: tuple[Expr, ...]) -> Expr:
        """Input offset of this step's first tap from the output pixel's plane position."""
        return const(0) if self.table is None else self.table[self._vars(ks)[1]]

    @property
    def steps(self) -> int:
        """Steps of the serial loops (one run of the tile loop: a chunk's when split)."""
        return self.channels * (len(self.geo.taps) // self.per_step)

    def step(self, ks: tuple[Expr, ...]) -> Expr:
        """This step's index among `steps`: the weights of consecutive steps are adjacent."""
        ic, kh = self._vars(ks)
        return ic * (len(self.geo.taps) // self.per_step) + kh

    def column_offset(self, t: int) -> int:
        """Input offset of unrolled tap `t` from its step's first tap (offsets add up)."""
        return self.geo.tap_offset(self.geo.taps[t])


@dataclass(frozen=True)
class Split:
    """The reduction over input channels cut into `parts` chunks of `Reduction.channels`: each
    tile runs once per chunk (`part`, in order), keeping its sums in `partial`
    ([tile][MR][width], by the tile's index in the loop) between runs; the last run adds the
    bias and the epilogue and stores the output."""

    part: Expr  # which chunk this run of the tile loop sums
    parts: int
    partial: Buffer  # accumulator dtype, flat: tiles x `cells`
    tile: Expr  # this tile's index in the tile loop
    cells: int  # partial sums a tile keeps: MR x width (a tile of fewer rows keeps its first)

    def finish(self, tile: Buffer, lanes: int, done: Callable[[Buffer], Stmt]) -> Stmt:
        """Adds the earlier chunks' sums to `tile`, then keeps them for the next run, or, in
        the last, `done(tile)` (the schedule's own store)."""
        mr, width = tile.shape
        base = self.tile * self.cells
        cells = [(r, v * lanes) for r in range(mr) for v in range(width // lanes)]

        def at(r: int, o: int) -> Expr:
            return lane_index(base + r * width + o, lanes)

        add = [tile.store((r, ramp(o, lanes)), tile[r, ramp(o, lanes)] + self.partial[at(r, o)])
               for r, o in cells]  # fmt: skip
        keep = [self.partial.store(at(r, o), tile[r, ramp(o, lanes)]) for r, o in cells]
        later = if_then_else(self.part < self.parts - 1, seq(*keep), done(tile))
        return seq(if_then_else(const(0) < self.part, seq(*add)), later)


def tile_store(
    split: Split | None, lanes: int, done: Callable[[Buffer], Stmt]
) -> Callable[[Buffer], Stmt]:  # fmt: skip
    """How a tile leaves the registers: `done` (the schedule's own store), or, in a split
    reduction, through the chunks' partial sums (`Split.finish`)."""
    return done if split is None else lambda tile: split.finish(tile, lanes, done)


@dataclass(frozen=True)
class Ahead:
    """Prefetch the outer operand of the tile loop's next step: the next channel block's weights
    ("weights", order channels_outer) or the next pixel tile's input ("input", pixels_outer).

    The `tiles` tiles of one outer step share that work: in each reduction step, tile `inner`
    prefetches lines inner*n .. inner*n+n-1 (modulo the step's lines) of what the next outer
    step reads in that step, n = ceil(lines / tiles), so together they cover every line once
    or more, at the pace of the whole outer step rather than of its first tile. Where a step of
    a pointwise conv reads fewer lines of weights than there are tiles, the tiles share the
    whole chunk instead (`paced_offset`).
    """

    operand: str  # "weights" or "input"
    inner: Expr  # this tile's position among the tiles of its outer step
    tiles: int
    # weights only: (channel blocks, chunks) from this outer step's weights to the next's, where
    # the loop does not go on to the next block of the same chunk (chunks inside groups of
    # blocks, `_tile_loop`); None: the next block's, the last block fetching its own
    next_step: tuple[Expr, Expr] | None = None


def _ahead_lines(ahead: Ahead, chunk: int, itemsize: int, aligned: bool) -> list[Expr]:
    """Element offsets within a step's chunk of `chunk` elements of the lines this tile fetches
    (`aligned`: the chunk starts on a line; else it may straddle one more)."""
    line = per_line(itemsize)
    lines = ceil_div(chunk, line) if aligned else (chunk + line - 2) // line + 1
    n = ceil_div(lines, ahead.tiles)
    return [((ahead.inner * n + i) % lines) * line if lines > 1 else const(0)
            for i in range(min(n, lines))]  # fmt: skip


# A paced prefetch steps through its lines by a whole number of elements a step (one add)
# where that paces it at most this much faster than its share needs; else by its share's
# exact pace (a division a step).
PACE_SLACK = 1.25


def paced_offset(ahead: Ahead, step: Expr, steps: int, per_step: int, line: int) -> Expr:
    """The element offset (in the next outer step's chunk of `steps` x `per_step` lines of
    `line` elements) this tile fetches at `step` where a pointwise conv's step reads fewer
    lines of weights than a block has tiles: tile i takes its own run of about n = lines /
    tiles lines, paced over its steps (each line fetched until the next is due; the chunk's
    steps are adjacent whole lines). Fetching a step's own lines instead, every tile repeated
    them and the first issued all, more misses at once than a core keeps in flight (Zen 3,
    weights from memory, in alternation: resnet50's pointwise channels tiles 0-3% faster, 1x1
    512->2048 @7 86% -> 89% of the peak). The offset moves by `each` elements a step, one add
    in the loop, where that covers the run at most PACE_SLACK faster than its n lines ask (a
    division and a clamp a step cost the 5x2 tiles 1-3%: 512->2048 @7, 2048->512 @7,
    1024->2048/2 @14); where a whole element a step would run through the run far faster
    (resnet50's 6x2 tiles, 33 tiles on 128 steps: twice), at n lines' exact pace. Not for
    multi-tap tiles: zfnet512's 3x3 @12 in rows ran 2-4% slower paced, and a version that
    split the line into a step and a line within it spilled zfnet512's 13x2 AVX-512 5x5
    tile."""
    total = steps * per_step
    n = ceil_div(total, ahead.tiles)  # <= steps: a step reads fewer lines than there are tiles
    each = ceil_div(n * line, steps)  # <= line: consecutive offsets skip no line
    span = each * steps
    if span <= n * line * PACE_SLACK and span <= total * line:
        # tile i covers [i*span, (i+1)*span - each], the last one clamped to the chunk's end
        return minimum(ahead.inner * span, total * line - span) + step * each
    return minimum(ahead.inner * n, total - n) * line + step * (n * line) // steps


def _weights_ahead(
    ops: Operands, ahead: Ahead, block: Expr, cols: int, w_step: Expr, step: Expr,
    split: Split | None,
) -> list[Stmt]:  # fmt: skip
    """Prefetches of the next outer step's weights for the step at `w_step`: the next channel
    block's (the last block fetches its own: nothing is read past the weights), or where
    `ahead.next_step` says."""
    geo, red, taps = ops.geo, ops.reduction, ops.reduction.taps
    block_elems = geo.icg * len(geo.taps) * cols
    if ahead.next_step is None:
        last = ops.weights.size // block_elems - 1
        shift = select(block // geo.icg < last, const(block_elems), const(0))
    else:
        blocks_on, chunks_on = ahead.next_step
        shift = blocks_on * block_elems + chunks_on * (red.channels * len(geo.taps) * cols)
    aligned = cols * ops.weights.itemsize % LINE_BYTES == 0
    line = per_line(ops.weights.itemsize)
    lines = taps * cols // line  # a step's, where aligned
    if len(geo.taps) == 1 and aligned and lines < ahead.tiles:  # pointwise: `paced_offset`
        first = (block + red.first_channel(split)) * cols  # the chunk's, one tap a channel
        offset = paced_offset(ahead, step, red.steps, lines, line)
        return [prefetch(ops.weights, first + shift + offset)]
    offsets = _ahead_lines(ahead, taps * cols, ops.weights.itemsize, aligned)
    # lines of an aligned step end with the step; a straddling one may run past the weights
    end = ops.weights.size - 1
    return [prefetch(ops.weights, w_step + shift + o if aligned else
                     minimum(w_step + shift + o, end)) for o in offsets]  # fmt: skip


def _input_ahead(ops: Operands, ahead: Ahead, span: int, width: int, x_step: Expr) -> list[Stmt]:
    """Prefetches of the next pixel tile's input (`span` positions on) for the step reading
    `width` positions from `x_step`, over the step's taps."""
    assert ops.fetch is not None, "an input fetched ahead has a prefetch"
    chunk = width + ops.reduction.column_offset(ops.reduction.taps - 1)
    offsets = _ahead_lines(ahead, chunk, ops.weights.itemsize, aligned=False)  # x's dtype too
    return [ops.fetch(x_step + span + o) for o in offsets]


@dataclass(frozen=True)
class Operands:
    """What a schedule reads and writes."""

    geo: ConvGeometry
    load: Load  # the transformed input (or the input itself)
    fetch: Fetch | None  # a prefetch of the transformed input (clamped to it); None: never
    channel_base: Callable[[Expr, Expr], Expr]  # (n, input channel) -> flat offset of its planes
    channel_stride: int  # flat offset from one input channel's planes to the next
    weights: Buffer  # packed, flat
    reduction: Reduction
    bias: TensorRef | None
    out: Buffer
    epilogue: Epilogue | None
    acc: str  # accumulator dtype
    lanes: int


def _stored(ops: Operands, value: Expr, oc: Expr, idx: tuple[Expr, ...]) -> Stmt:
    if ops.bias is not None:
        value = value + ops.bias.read((oc,)).astype(ops.acc)
    return finalize(value, through_last_axis(ops.out, idx), ops.out, ops.epilogue)


# ---- pixels --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PixelTiling:
    """R whole output rows per tile, or one row cut in `chunks`; NV vectors; MR channels."""

    rows: int
    chunks: int
    nv: int
    mr: int

    def cover(self, geo: ConvGeometry) -> tuple[int, int, int]:
        """(row blocks, rows in the blocked axis, other leading rows) of the output."""
        rl = geo.out_shape[-2] if len(geo.out_shape) > 1 else 1
        return ceil_div(rl, self.rows), rl, math.prod(geo.out_shape[:-2])


def pixel_tiling(
    geo: ConvGeometry, lanes: int, nv_max: int, mr_max: int, registers: int
) -> tuple[PixelTiling, float]:
    """The tiling with the best useful-lane fraction times tile density, among those that fit
    the core where any does (`fits_core`), and that fraction."""
    nv_max = min(nv_max, max_vectors(registers))
    ow, wq = geo.out_shape[-1], geo.plane[-1]
    rl = geo.out_shape[-2] if len(geo.out_shape) > 1 else 1
    # whole rows per tile, or one row cut into equal chunks (a row wider than a tile must be;
    # a narrower one may be, for a tile of fewer vectors and more rows of channels)
    cuts = [(rows, 1) for rows in range(1, rl + 1) if (rows - 1) * wq + ow <= nv_max * lanes]
    cuts += [(1, c) for c in range(ceil_div(ow, nv_max * lanes), ceil_div(ow, lanes) + 1) if c > 1]
    best: tuple[bool, float, int, int, int] = (False, -1.0, 0, 1, 1)
    for rows, chunks in cuts:
        nv = ceil_div((rows - 1) * wq + ceil_div(ow, chunks), lanes)
        eff = rl * ow / (ceil_div(rl, rows) * chunks * nv * lanes)
        mr = min(mr_max, max_rows(nv, registers), geo.ocg)
        score, fits = eff * density(mr, nv), pixel_fits(geo, mr, nv, eff, lanes)
        best = max(best, (fits, round(score, 3), nv, rows, -chunks))
    _, _, nv, rows, chunks = best
    chunks = -chunks
    mr = balanced_rows(min(mr_max, max_rows(nv, registers)), geo.ocg)
    return PixelTiling(rows, chunks, nv, mr), rl * ow / (ceil_div(rl, rows) * chunks * nv * lanes)


def balanced_rows(most: int, channels: int) -> int:
    """Rows of channels a pixels tile holds: as few blocks of `channels` as tiles of `most`
    rows need, each as full as the others (8 channels: two tiles of 4 rows, not of 6 and 2
    with 4 rows of zeros)."""
    return ceil_div(channels, ceil_div(channels, max(1, most)))


def pixel_fits(geo: ConvGeometry, mr: int, nv: int, eff: float, lanes: int) -> bool:
    """`fits_core` for a pixels tile with `eff` of its lanes useful, MR of `geo.ocg` channels."""
    used = geo.ocg / (ceil_div(geo.ocg, mr) * mr)
    return fits_core(mr, nv, lanes, eff * used)


def pack_pixels(w: np.ndarray, geo: ConvGeometry, mr: int) -> np.ndarray:
    """Weights (OC, ICg, *K) -> [group][oc block][icg][tap][MR], zero-padded channels."""
    blocks = ceil_div(geo.ocg, mr)
    x = w.reshape(geo.group, geo.ocg, geo.icg, -1)
    x = pad_axis(x, 1, blocks * mr).reshape(geo.group, blocks, mr, geo.icg, -1)
    return np.ascontiguousarray(x.transpose(0, 1, 3, 4, 2))


@dataclass(frozen=True)
class PackedInput:
    """A one-tap pixel tile's input of one reduction chunk in local scratch, [input channel of
    the chunk][NV * lanes], which every channel block of the tile reads: one contiguous block,
    as a GEMM's packed panel, not one line from each of planes far apart, which crowd a few L1
    sets (planes of 12.5 KB fall into 16 of 64) and which no prefetcher follows. The first
    block `fills` it, storing each step's input vectors as it reads them from the planes (and
    fetching the lines `next_tile` positions on, the next pixel tile's, where that is not 0)."""

    buffer: Buffer
    fills: bool = False
    next_tile: int = 0


def _tiles_start_on_lines(ops: Operands, width: int) -> bool:
    """Whether every pixel tile's input of each channel starts on a cache line (its planes, rows
    and tiles do; the input's dtype is the weights')."""
    strides = (width, ops.channel_stride, *ops.geo.plane_strides[:-1])
    return all(s * ops.weights.itemsize % LINE_BYTES == 0 for s in strides)


def pixel_tile(
    ops: Operands, tiling: PixelTiling, n: Expr, g: Expr, ob: Expr,
    outer: tuple[Expr, ...], rb: Expr, ch: Expr, ahead: Ahead | None = None,
    split: Split | None = None, packed: PackedInput | None = None,
) -> Stmt:  # fmt: skip
    """One MR x NV tile at row block `rb`, chunk `ch` of the rows with leading indices `outer`
    (of one chunk of the reduction when `split`). `packed`: a one-tap tile reads its input
    from there (filling it as it goes where it `fills`)."""
    geo, lanes, mr, nv = ops.geo, ops.lanes, tiling.mr, tiling.nv
    width, wq, ow = nv * lanes, geo.plane[-1], geo.out_shape[-1]
    blocks, rl, _ = tiling.cover(geo)
    red, ntaps = ops.reduction, len(geo.taps)
    assert packed is None or ntaps == 1, "a packed tile input holds one tap's"
    row0 = rb * tiling.rows
    lead = (*outer, row0) if len(geo.out_shape) > 1 else ()
    qbase = geo.out_position(lead) + ch * width
    oblocks = ceil_div(geo.ocg, mr)
    last_rows = remainder_rows(geo.ocg, mr)

    def bind(ks: tuple[Expr, ...], wb: Expr, xb: Expr) -> tuple[Expr, ...]:
        ic = red.channel(ks, split)
        w_step = ((wb + ic) * ntaps + red.first_tap(ks)) * mr
        x_step = xb + ic * ops.channel_stride + red.row_offset(ks)
        if packed is not None:  # the chunk's channels, one after the other
            return w_step, red.channel(ks) * width, x_step, red.step(ks)
        return w_step, x_step, red.step(ks)

    def scalar(r: int, b: tuple, t: int) -> Expr:
        return ops.weights[b[0] + t * mr + r]

    def vector(v: int, b: tuple, t: int) -> Expr:
        if packed is not None:
            return packed.buffer[lane_index(b[1] + v * lanes, lanes)]
        return ops.load(b[1] + red.column_offset(t) + v * lanes, lanes)

    def row_stores(tile: Buffer, r: int, oc: Expr, j: int, segment: int) -> Stmt:
        row = (*outer, row0 + j) if lead else ()
        return seq(*(
            _stored(ops, tile[r, lane_index(j * wq + o, w)], oc,
                    (n, oc, *row, lane_index(ch * width + o, w)))
            for o, w in pieces(segment, lanes)
        ))  # fmt: skip

    exact = geo.ocg % mr == 0 or last_rows is not None  # every row of every tile a channel

    def finish(tile: Buffer) -> Stmt:
        stmts = []
        for r in range(tile.shape[0]):
            oc_local = ob * mr + r
            oc = g * geo.ocg + oc_local
            rows = []
            for j in range(tiling.rows):
                if tiling.chunks == 1:
                    st = row_stores(tile, r, oc, j, ow)
                else:
                    last = ow - (tiling.chunks - 1) * width
                    full = row_stores(tile, r, oc, j, width)
                    if last != width:
                        full = if_then_else(
                            ch.eq(tiling.chunks - 1), row_stores(tile, r, oc, j, last), full
                        )
                    st = full
                rows.append(st if rl % tiling.rows == 0 else if_then_else(row0 + j < rl, st))
            body = seq(*rows)
            stmts.append(body if exact else if_then_else(oc_local < geo.ocg, body))
        return seq(*stmts)

    # the next pixel tile: the next chunk of the row, or the next block of rows
    span = width if tiling.chunks > 1 else tiling.rows * wq

    aligned = _tiles_start_on_lines(ops, width)

    def fill(b: tuple[Expr, ...]) -> list[Stmt]:
        """The step's input vectors into the packed scratch (read back at once: LLVM forwards
        the stores), and the next pixel tile's lines fetched."""
        assert packed is not None

        def store(v: int) -> Stmt:
            return packed.buffer.store(lane_index(b[1] + v * lanes, lanes),
                                       ops.load(b[2] + v * lanes, lanes))  # fmt: skip

        stores = [store(v) for v in range(nv)]
        if not packed.next_tile or ops.fetch is None:
            return stores
        line = per_line(ops.weights.itemsize)  # the input's dtype is the weights'
        offsets = [*range(0, width, line), *(() if aligned else (width - 1,))]
        return [*stores, *(ops.fetch(b[2] + packed.next_tile + o) for o in offsets)]

    def fetch(bases: tuple[Expr, ...], b: tuple[Expr, ...]) -> Stmt | None:
        own = fill(b) if packed is not None and packed.fills else []
        if ahead is None:
            return seq(*own) if own else None
        if ahead.operand == "weights":
            return seq(*own, *_weights_ahead(ops, ahead, bases[0], mr, b[0], b[-1], split))
        return seq(*own, *_input_ahead(ops, ahead, span, width, b[1]))

    def epilogue_reads(rows: int) -> list[Stmt]:
        """Prefetches of every line the epilogue will read at this tile's outputs (a residual:
        MR planes x rows, which beside the tile's many output planes no prefetcher follows;
        1x1 64->256 @56 with its residual add 2.2 -> 1.6 ms against 1.3 without, as AVX2
        code). Issued before the reduction, which hides their latency."""
        fetches = []
        for buf in ops.epilogue.reads if ops.epilogue is not None else ():
            line = per_line(buf.itemsize)
            seg = ow if tiling.chunks == 1 else width
            for r in range(rows):
                oc = minimum(g * geo.ocg + ob * mr + r, geo.out_channels - 1)
                for j in range(tiling.rows):
                    row = (*outer, minimum(row0 + j, rl - 1)) if lead else ()
                    for o in sorted({*range(0, seg, line), seg - 1}):
                        col = minimum(ch * width + o, ow - 1)
                        fetches.append(prefetch(buf, through_last_axis(buf, (n, oc, *row, col))))
        return fetches

    def tile_of(rows: int, bases: tuple[Expr, ...]) -> Stmt:
        body = register_tile(rows, nv, lanes, ops.acc, red.loops, red.taps, scalar, vector,
                             tile_store(split, lanes, finish), lambda ks: bind(ks, *bases),
                             lambda b: fetch(bases, b))  # fmt: skip
        ahead = epilogue_reads(rows)
        if not ahead:
            return body
        if split is not None:  # only the last chunk runs the epilogue
            return seq(if_then_else(split.part.eq(split.parts - 1), seq(*ahead)), body)
        return seq(seq(*ahead), body)

    def tile(bases: tuple[Expr, ...]) -> Stmt:
        return short_last(ob, oblocks, mr, last_rows, lambda rows: tile_of(rows, bases))

    block = (g * oblocks + ob) * geo.icg
    return let_all("t", (block, ops.channel_base(n, g * geo.icg) + qbase), tile)


def short_last(
    index: Expr, count: int, size: int, rest: int | None, tile_of: Callable[[int], Stmt]
) -> Stmt:  # fmt: skip
    """`tile_of(size)` at `index` < count - 1, `tile_of(rest)` at the last (`rest` None: every
    one of `size`), the choice made here where `index` is a constant (a packed loop's first
    block) or there is one."""
    if rest is None:
        return tile_of(size)
    if count == 1:
        return tile_of(rest)
    if isinstance(index, IntImm):
        return tile_of(size if index.value < count - 1 else rest)
    return if_then_else(index < count - 1, tile_of(size), tile_of(rest))


def remainder_rows(ocg: int, mr: int) -> int | None:
    """Rows of the last channel block's pixels tile where `ocg` channels leave it short of MR:
    it computes those alone, not MR rows of which some are padding (Zen 3, weights from
    memory: resnet50's 7x7/2 3->64 as 6x2 tiles, 10 blocks and one of 4 rows, 90.7 -> 92.9
    GFLOP/s; 1x1 256->128 @56, 21 blocks and one of 2, 92.1 -> 96.2); None where MR divides
    them or one block holds them all."""
    rest = ocg % mr
    return rest if rest and ocg > mr else None


def pixel_reads_end(geo: ConvGeometry, tiling: PixelTiling, lanes: int) -> int:
    """One past the largest plane position (plus tap offset) a pixel tile reads."""
    blocks, _, outer = tiling.cover(geo)
    lead = [o - 1 for o in geo.out_shape[:-2]] + ([(blocks - 1) * tiling.rows] if
                                                  len(geo.out_shape) > 1 else [])  # fmt: skip
    last = sum(i * s for i, s in zip(lead, geo.plane_strides))
    return last + tiling.chunks * tiling.nv * lanes + geo.max_tap_offset


# ---- channels ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChannelTiling:
    """MR consecutive pixels x NV vectors of output channels: pixels of one output row, or
    (`flat`) of the output planes read as one row, a tile running on into the next row, each
    of its pixels reading the input from its own plane position (3x3 512->512 @7 as 4-pixel
    AVX2 tiles: 49 of 52 pixels useful against 7 of 8)."""

    mr: int
    nv: int
    flat: bool = False

    def rows(self, geo: ConvGeometry) -> int:
        """Output rows of one image whose tiles run row by row (flat: 1, the planes as one)."""
        return 1 if self.flat else math.prod(geo.out_shape[:-1])

    def positions(self, geo: ConvGeometry) -> int:
        """Pixels the tiles of one row (flat: of the whole output planes) cover."""
        return math.prod(geo.out_shape) if self.flat else geo.out_shape[-1]

    def chunks(self, geo: ConvGeometry) -> int:
        """Pixel chunks per output row (flat: per output planes)."""
        return ceil_div(self.positions(geo), self.mr)


# How many more useful lanes tiles over the planes as one row must give than tiles within rows:
# a point or two comes with another tile shape (2048->512 @7 as AVX-512 code: 10x2 on 49
# against 7x3 on rows of 7 filled 98% against 97% of the lanes, and ran 95% of peak against
# 99%), and a flat channel tile computes each pixel's input position once and holds MR of them
MIN_FLAT_GAIN = 1.02
# How much more throughput (useful lanes x density) a flat AVX2 tile must model than the tile
# within rows, where it fills no more lanes: alexnet's 5x5 48->128 (x2 groups) @26 as 2x4 in
# rows of 26 72% of the Zen 3's peak, as a flat 6x2 (modelled 1.12x) 95%; densenet121's 3x3
# 128->32 @7 (1.10x) 49% -> 59%; not zfnet512's 5x5/2 96->256 @25 (1.04: 6x2 flat 88% against 5x2 in
# rows 89%) nor 3x3 48->16 @8 (1.09: 32% either way). Not on AVX-512 (not measured).
FLAT_DENSITY_GAIN = 1.1
# Taps a tile over the planes as one row unrolls in a step by default, at most, by its target's
# vector registers (`default_unroll`): beyond, LLVM's schedule of the step spilled (AVX2: 7x7
# as 5x2, 18 ymm values a step, 89% of the Zen 3's peak against 95% with a kernel row a step;
# AVX-512: 5x5 as 5x2..14x2 and 6x4 11-403 zmm values a step, zfnet512's 5x5/2 96->256 @54 as
# 14x2 403, and with a kernel row a step still up to 30 in half the shapes tried). On AVX-512
# the multi-tap flat tiles stop there: larger kernels take tiles within rows (no spills in the
# suite), as before flat tiles came (docs/performance.md, "Flat tiles that spill").
MAX_FLAT_UNROLLED_TAPS = {16: 25, 32: 9}
# Most pixels a multi-tap flat tile holds: AVX-512 tiles of 11-14 spilled 12-52 zmm values a 3x3
# step on planes of 11-14 pixel rows, and 21-28 a 5x5 kernel row on zfnet512's 25x25 (14x2 on
# 15x15 planes none); 8x2-10x2 none in every shape tried
MAX_FLAT_TAP_ROWS = 10


def flat_unrolled_taps(registers: int) -> int:
    """MAX_FLAT_UNROLLED_TAPS for a target of `registers` vector registers."""
    return MAX_FLAT_UNROLLED_TAPS[16 if registers <= 16 else 32]


def channel_tiling(
    geo: ConvGeometry, lanes: int, nv_max: int, mr_max: int, registers: int,
    flat_rows: bool = False,
) -> tuple[ChannelTiling, float]:  # fmt: skip
    """The (MR, NV) with the best useful-lane fraction times tile density, among those that fit
    the core where any does (`fits_core`), and that fraction. With `flat_rows` (the output's
    planes may be stored as one row: `Epilogue.flat_planes`), the best tiling over the planes
    as one row instead where it fits the core as well and fills more lanes by MIN_FLAT_GAIN.
    On 16-register targets, also where the flat tile models FLAT_DENSITY_GAIN more throughput
    (useful lanes x `density`): rows that a small tile divides exactly leave a tile of fewer
    sums than the planes as one row. A flat tile of a kernel of more than one tap holds
    MAX_FLAT_TAP_ROWS pixels at most, and on 32-register targets takes a kernel of
    `flat_unrolled_taps` taps at most."""
    rows_fit, rows, rows_useful = _channel_tiling(geo, lanes, nv_max, mr_max, registers, False)
    taps = len(geo.taps)
    if not flat_rows or len(geo.out_shape) < 2:
        return rows, rows_useful
    if registers > 16 and taps > flat_unrolled_taps(registers):
        return rows, rows_useful
    flat_max = mr_max if taps == 1 else min(mr_max, MAX_FLAT_TAP_ROWS)
    flat_fits, flat, flat_useful = _channel_tiling(geo, lanes, nv_max, flat_max, registers, True)
    gain = flat_useful * density(flat.mr, flat.nv) / (rows_useful * density(rows.mr, rows.nv))
    denser = registers <= 16 and round(gain, 3) >= FLAT_DENSITY_GAIN
    if flat_fits >= rows_fit and (flat_useful > rows_useful * MIN_FLAT_GAIN or denser):
        return flat, flat_useful
    return rows, rows_useful


def _channel_tiling(
    geo: ConvGeometry, lanes: int, nv_max: int, mr_max: int, registers: int, flat: bool
) -> tuple[bool, ChannelTiling, float]:  # fmt: skip
    """`channel_tiling`'s choice within rows or (`flat`) over the planes as one row: whether it
    fits the core, the tiling, its useful fraction."""
    nv_max = min(nv_max, max_vectors(registers))
    positions = ChannelTiling(1, 1, flat).positions(geo)
    best = ((False, 0.0), ChannelTiling(1, 1, flat), 0.0)
    for nv in range(1, nv_max + 1):
        width = nv * lanes
        pad = geo.ocg / (ceil_div(geo.ocg, width) * width)
        for mr in range(1, min(mr_max, max_rows(nv, registers)) + 1):
            useful = pad * positions / (ceil_div(positions, mr) * mr)
            score = (fits_core(mr, nv, lanes, useful), useful * density(mr, nv))
            best = max(best, (score, ChannelTiling(mr, nv, flat), useful), key=lambda b: b[0])
    (fits, _), tiling, useful = best
    return fits, tiling, useful


def pack_channels(w: np.ndarray, geo: ConvGeometry, width: int) -> np.ndarray:
    """Weights (OC, ICg, *K) -> [group][oc block][icg][tap][width], zero-padded channels."""
    blocks = ceil_div(geo.ocg, width)
    x = w.reshape(geo.group, geo.ocg, geo.icg, -1)
    x = pad_axis(x, 1, blocks * width).reshape(geo.group, blocks, width, geo.icg, -1)
    return np.ascontiguousarray(x.transpose(0, 1, 3, 4, 2))


# output channels, at most, of a channels tile whose transposing store is unrolled: each
# channel's MR pixels then come from constant places of the tile, which LLVM transposes with
# shuffles, where a loop over the channels gathered them through computed indices (~15
# instructions a channel; Zen 3, 1x1 1024->512 @14 90% -> 93% of the peak, 1024->2048/2
# 85% -> 89%). Not for tiles through the rows (3x3 512 @7 lost 1-3 points, not understood)
# nor wider blocks (AVX-512's 48 channels: 306 shuffles a store, not measured)
MAX_UNROLLED_STORE_CHANNELS = 16


def channel_tile(
    ops: Operands, tiling: ChannelTiling, n: Expr, g: Expr, ob: Expr, lead: tuple[Expr, ...],
    pc: Expr, ahead: Ahead | None = None, split: Split | None = None,
) -> Stmt:  # fmt: skip
    """One MR x NV tile: pixels pc*MR.. of the output row `lead` (flat: of the output planes,
    `lead` empty), channel block `ob` (of one chunk of the reduction when `split`)."""
    geo, lanes, mr, nv = ops.geo, ops.lanes, tiling.mr, tiling.nv
    width, positions = nv * lanes, tiling.positions(geo)
    red, ntaps = ops.reduction, len(geo.taps)
    oblocks = ceil_div(geo.ocg, width)
    chunks, step = tiling.chunks(geo), geo.pixel_steps[-1]
    last_pixels = remainder_pixels(positions, mr)
    if tiling.flat:  # each pixel's plane position (the last tile's, past the planes, unused)
        first = [pc * mr + r for r in range(mr)]
        pixels = [geo.out_position(unflatten(q, geo.out_shape)).astype("int64") for q in first]
        qbase: Expr = const(0)
    else:
        pixels, qbase = [], geo.out_position(lead) + pc * mr * step

    def bind(ks: tuple[Expr, ...], wb: Expr, xb: Expr, *at: Expr) -> tuple[Expr, ...]:
        ic = red.channel(ks, split)
        w_step = ((wb + ic) * ntaps + red.first_tap(ks)) * width
        return w_step, xb + ic * ops.channel_stride + red.row_offset(ks), *at, red.step(ks)

    def scalar(r: int, b: tuple, t: int) -> Expr:
        if tiling.flat:  # int64: as int32, LLVM's SLP vectorizer packed the MR sums into one
            # vector and took each out for its load (3x3 512->512 @7: 41% of the peak)
            return ops.load((b[1] + red.column_offset(t)).astype("int64") + b[2 + r], 1)
        return ops.load(b[1] + red.column_offset(t) + r * step, 1)

    def vector(v: int, b: tuple, t: int) -> Expr:
        return ops.weights[lane_index(b[0] + t * width + v * lanes, lanes)]

    def finish(tile: Buffer) -> Stmt:
        def channel(j: Expr) -> Stmt:
            oc_local = ob * width + j
            oc = g * geo.ocg + oc_local

            def run(count: int) -> Stmt:
                return seq(*(
                    _stored(ops, tile[lane_index(o, w), j], oc,
                            (n, oc, *lead, lane_index(pc * mr + o, w)))
                    for o, w in pieces(count, lanes)
                ))  # fmt: skip

            st = run(tile.shape[0])  # the last chunk's tile holds its pixels only
            return st if geo.ocg % width == 0 else if_then_else(oc_local < geo.ocg, st)

        unrolled = not tiling.flat and width <= MAX_UNROLLED_STORE_CHANNELS
        return loop("j", width, channel, "unrolled" if unrolled else "serial")

    def fetch(bases: tuple[Expr, ...], b: tuple[Expr, ...]) -> Stmt | None:
        if ahead is None:
            return None
        if ahead.operand == "weights":
            return seq(*_weights_ahead(ops, ahead, bases[0], width, b[0], b[-1], split))
        first = b[1] + b[2].astype("int32") if tiling.flat else b[1]  # the tile's first pixel
        # the next tile: mr pixels on
        return seq(*_input_ahead(ops, ahead, mr * step, (mr - 1) * step + 1, first))

    def tile_of(rows: int, bases: tuple[Expr, ...]) -> Stmt:
        return register_tile(rows, nv, lanes, ops.acc, red.loops, red.taps, scalar, vector,
                             tile_store(split, lanes, finish), lambda ks: bind(ks, *bases),
                             lambda b: fetch(bases, b))  # fmt: skip

    def tile(bases: tuple[Expr, ...]) -> Stmt:
        return short_last(pc, chunks, mr, last_pixels, lambda pixels: tile_of(pixels, bases))

    block = (g * oblocks + ob) * geo.icg
    return let_all("t", (block, ops.channel_base(n, g * geo.icg) + qbase, *pixels), tile)


def remainder_pixels(positions: int, mr: int) -> int | None:
    """Pixels of a row's (flat: of the planes') last channels tile where `positions` leave it
    short of MR: it computes those alone, not MR of which some repeat the last pixel or read
    past the row (7x7 outputs in flat 5-pixel tiles: 9 of 5 and one of 4, not 10 of 5; Zen 3,
    weights from memory: resnet50's 1x1 512->2048 @7 91.1 -> 92.3 GFLOP/s, 3x3/2 512 @14 86.2
    -> 88.5); None where MR divides them."""
    rest = positions % mr
    return rest or None


def channel_reads_end(geo: ConvGeometry) -> int:
    """One past the largest plane position (plus tap offset) a channel tile reads."""
    last = sum((o - 1) * q * s for o, q, s in
               zip(geo.out_shape[:-1], geo.pixel_steps, geo.plane_strides))  # fmt: skip
    # the last tile of a row (flat: of the planes) holds its pixels only (`remainder_pixels`)
    return last + (geo.out_shape[-1] - 1) * geo.pixel_steps[-1] + 1 + geo.max_tap_offset
