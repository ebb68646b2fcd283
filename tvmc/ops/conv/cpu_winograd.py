"""Winograd F(m x m, 3 x 3) for 3x3 stride-1 convs on CPUs (Lavin & Gray): the conv template's
"winograd2" and "winograd4" schedules.

Y = A^T [(G g G^T) * (B^T d B)] A per output tile of m x m (alpha = m + 2 inputs a side): the
multiply-adds of a tile drop from 9 m^2 per channel pair to alpha^2 (2.25x fewer for m = 2, 4x
for m = 4), at the price of the transforms and of rounding (F4's coefficients reach 8 and 1/24:
errors near 2e-5 of max |y| against 1e-7 for the direct conv). Three kernels:

1. input (parallel over (n, c)): the channel's zero-padded input in local scratch, laid out as
   *strips*: strip (i, ty) is padded row ty * m + i, `pitch` = tiles_w * m columns wide. Tile p
   (row-major over tiles_h x tiles_w) then starts at offset p * m of every strip row i, so one
   vector covers consecutive tiles across tile rows with loads of constant stride m, which a
   transpose within 4-lane groups turns into columns (`transposed_columns`). V[t, c, P] =
   B^T d B for each of the alpha^2 positions t, in two passes through L1 (d B row by row, then
   B^T column by column), with the shared sums and differences of `apply_matrix`.
2. GEMM: M[t] = U[t] @ V[t] for each t, U[t] = (G g G^T)[t] (K x C) transformed at compile time
   and packed into row blocks (`pack_a`: a step's MR broadcasts from one cache line, not MR
   rows of U: 1.2-2x on the GEMMs of 14x14 planes); the MatMul template's register-tiled GEMM
   (tvmc.ops.linalg.cpu), V read in place.
3. output (parallel over (n, k)): A^T M A per tile into local strips (stores m apart), then the
   output rows copied out through bias and the epilogue, as contiguous vectors.

V and M take a row or two more per plane than they use (`plane_rows`): the transforms read or
write the same element of all alpha^2 planes at once, and planes a whole number of pages apart
put those 36 lines in one set of the L1 (2-2.4x on the transforms of 14x14-28x28 planes).

Why `pitch` = tiles_w * m and not the padded width: a tile row's last tile reads 2 columns past
it, which are the next strip's first 2 (finite input values). They only feed outputs at or past
the conv's output width, since tiles_w * m >= out_width + 2 (`WinogradLayout`), and
Winograd's algebra cancels them exactly up to rounding.

In bands (`band` tile rows, `blocked_kernel_body`): one kernel, parallel over (image, band),
runs all three steps on a band's tiles, with V and M of one band in local scratch. Unblocked,
V and M of a whole batch or a large plane (densenet121's 3x3 128->32 @56 at batch 4: 20 MB,
vgg19's 3x3 64 @224: 59 MB) go through memory between the kernels, written and read back
twice; a band's stay in the caches (1.5-1.6x on those convs, Zen 3). The price: each band
reads all of U, and a band's tiles are padded to whole GEMM panels (`default_band` weighs
both).

Grouped convs run one GEMM per (position, group): V and M hold each plane's channels group by
group, each group's rows padded alike (`plane_rows`), so that [alpha^2, rows, P] is the GEMM's
[alpha^2 * groups, rows a group, P] as it stands in memory, and U is [alpha^2 * groups, K / g,
C / g]. The transforms are per channel and do not see the groups.

Chosen where `eligible` (3x3, stride 1, dilation 1, 2-D, float32, constant weights; grouped
only with MIN_CHANNELS or more a group) and `default_tile` says it pays, in bands where
`default_band` says so: measured per conv on an
AMD Zen 4 (planes of 13x13 and more) and a Zen 3 (smaller planes, groups; docs/performance.md,
"Winograd"). The tuner may pick it anywhere it is eligible.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import (
    Buffer,
    Expr,
    Kernel,
    Shuffle,
    Stmt,
    Var,
    allocate,
    broadcast,
    const,
    fma,
    if_then_else,
    interleave,
    let,
    loop,
    minimum,
    ramp,
    seq,
)
from tvmc.ops.conv.cpu_layout import fill_row, vector_range
from tvmc.ops.conv.cpu_tiles import (
    FLOPS_PER_CYCLE,
    FMA_LATENCY,
    LOADS_PER_CYCLE,
    fits_core,
    max_rows,
)
from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.linalg.cpu import gemm_kernels, pack_rows
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef, ref_of_buffer
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import finalize, let_all, register_tile

# B^T, G and A^T of F(2x2,3x3) and F(4x4,3x3) (Lavin & Gray, "Fast Algorithms for CNNs").
MATRICES = {
    2: (
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]],
    ),
    4: (
        [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
         [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
         [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
    ),
}  # fmt: skip
SCHEDULES = {"winograd2": 2, "winograd4": 4}  # the conv template's schedule name -> m
MAX_GEMM_ROWS = 8  # MR cap of the default GEMM tile: more rows only lengthen the unrolled body
# default_tile's rule, from the tables in docs/performance.md ("Winograd"). F4 won on planes of
# 13x13 and more with 16 channels or more a side (1.1-2.5x the direct conv per conv, Zen 4) and
# lost on 7x7 and 6x6 planes (0.2-0.6x) and a 3-channel first conv (0.2x). On 13-19 planes with
# the weights from memory F2 beat F4 per conv (F4's transformed weights are 4x the direct conv's),
# but F2 there lost 4-5% end to end on resnet50, inception_v2 and squeezenet (2 threads).
MIN_PLANE = 13
MIN_CHANNELS = 16
# Below MIN_PLANE a plane has few tiles, which the GEMM pads to whole panels and the transforms
# run in short vectors: there the tile size whose `gain` is best wins where that is MIN_GAIN or
# more, with a GEMM tile that fits the core (AVX2's 8 x 1, 9 loads for 8 FMAs, does not). On the
# Zen 3 (one thread): F2 1.4-2.1x on 8x8-10x10 planes and F4 1.2-1.9x on 11x11-12x12 with 64-512
# channels; 7x7 0.98-1.07x (modelled 1.07: direct); 16-48 channels on 8x8-12x12 0.9-1.06x.
MIN_GAIN = 1.3
# What a transform's operation costs in the GEMM's multiply-adds there (its short vectors, the
# strips' loads and stores, stores lane by lane): 1.4-3.0 fit those small convs.
TRANSFORM_OP_COST = 3.0
# Below MIN_PLANE a plane's few tiles use each transformed weight few times (F4 on 12x12: 9, 4.5
# useful flops a byte), so the GEMM streams its weights from memory; the rule above paid on a
# core of FLOPS_PER_CYCLE (the Zen 3) but lost zfnet512 4-13% end to end on the Zen 5 (64 flops
# a cycle: its 512->512 @12 read 37.7 MB of them at 11 GB/s, 74% of the direct conv's speed).
# Cores of more flops a cycle keep the direct conv there until `gain` counts that traffic.
SMALL_PLANE_MAX_FLOPS = FLOPS_PER_CYCLE
# On those cores F4 needs F4_MIN_TILES tiles (every image's) for each transformed weight it
# reads where its transformed weights outgrow FAR_WEIGHTS_FACTOR times a core's own cache (so
# come from memory every run), else F2 (16 values a filter against F4's 36): resnet50's 3x3 256
# @14 at batch 1 reads 9.4 MB of F4 weights for 16 tiles (8 flops a byte) against 4.2 MB of F2
# weights for 56 (Intel Xeon, AMX, 64 flops a cycle, 2 MB L2: F2 on its six 14x14 convs 1.04x
# end to end on 2 threads, 1.03x on one; on its 28x28 convs too, 56 F4 tiles, 0.98x; vgg19's
# 512 @14, 37.7 MB, 1.08x). Smaller F4 weights are found nearer: F2 lost 1-3% on one thread
# where they were 2.4-7.4 MB (inception_v1's and inception_v2's 13x13 and 14x14 convs,
# squeezenet's 64->256 @13). On the Zen 4 (32 flops a cycle) F2 lost there too.
F4_MIN_TILES = 32
FAR_WEIGHTS_FACTOR = 4


# A band's V and M (`blocked_kernel_body`) are written and read back within the band, so they
# should stay in the caches: at most BAND_CACHE_FACTOR times a core's L2 (the L3 a Zen 3 core
# shares; Zen 3, one thread: densenet121's 3x3 128->32 @56 at batch 4 ran 5.7 ms in bands of
# 2.8 MB, 6.6 in bands of 1.7 MB a sixth of them padding, 9.2 unblocked; vgg19's 3x3 64 @224
# 18.2 ms in bands of 2.2 MB, 20.8 in bands of 8.8 MB, 27.9 unblocked). A band's tiles padded
# to whole panels cost GEMM time the unblocked kernels may not spend (densenet121's 128->32
# @56 at batch 1, V and M 5 MB: 1.2 ms unblocked, 1.5 in bands a sixth padding), so bands
# must keep most of the unblocked GEMM's useful columns: at least BAND_MIN_USE of them.
BAND_CACHE_FACTOR = 8
BAND_MIN_USE = 0.85


def eligible(geo: ConvGeometry, dtype: str) -> bool:
    """Whether the Winograd schedules can compute this conv (weights must also be constant).
    A grouped conv only with MIN_CHANNELS or more input and output channels a group: its GEMMs
    are a group's, and one over a few channels (a depthwise conv's: one) leaves the transforms'
    work alone, which is never worth a config of the tuner's space."""
    return (
        geo.kernel == (3, 3)
        and geo.strides == (1, 1)
        and geo.dilations == (1, 1)
        and geo.upsample == (1, 1)
        and (geo.group == 1 or min(geo.icg, geo.ocg) >= MIN_CHANNELS)
        and not geo.transposed
        and dtype == "float32"
        and all(p >= 0 for p in geo.pad_begin)
        and all(o - i - p + 2 >= 0 for o, i, p in zip(geo.out_shape, geo.in_shape, geo.pad_begin))
    )


def default_tile(
    geo: ConvGeometry, dtype: str, lanes: int, registers: int,
    flops_per_cycle: int = FLOPS_PER_CYCLE, cache_bytes: int = 0,
) -> int | None:  # fmt: skip
    """m of the Winograd schedule an eligible conv gets by default, None for the direct conv:
    F4 on planes of MIN_PLANE and more (F2 where a faster core's F4 weights outgrow its own
    cache, `cache_bytes`, FAR_WEIGHTS_FACTOR times and each serve fewer than F4_MIN_TILES
    tiles), below them the tile `gain` rates best if by MIN_GAIN, on
    cores of at most SMALL_PLANE_MAX_FLOPS flops a cycle (`flops_per_cycle`). Grouped convs
    take the `gain` rule on every plane: only alexnet's were measured (12x12, 2 groups of 192:
    F4 2.2x the direct conv), and a group's GEMM of a few dozen channels weighs the transforms
    as the ungrouped table's 16-channel convs did (F4 1.1x modelled on 56x56)."""
    if not eligible(geo, dtype) or min(geo.icg, geo.ocg) < MIN_CHANNELS:
        return None
    small = min(geo.out_shape) < MIN_PLANE
    fast = flops_per_cycle > SMALL_PLANE_MAX_FLOPS
    if not small and geo.group == 1:
        if fast:  # F4's weights from memory for few tiles: F2
            f4 = layout(geo, 4, lanes, registers)
            far = 0 < FAR_WEIGHTS_FACTOR * cache_bytes < weight_bytes(f4, np.dtype(dtype).itemsize)
            if far and geo.batch * f4.tiles < F4_MIN_TILES:
                return 2
        return 4
    if small and fast:
        return None
    layouts = [layout(geo, m, lanes, registers) for m in SCHEDULES.values()]
    fitting = [lay for lay in layouts if fits_core(lay.gemm_rows, lay.gemm_vectors, lanes)]
    best = max(fitting, key=gain, default=None)
    return best.m if best is not None and gain(best) >= MIN_GAIN else None


def gain(lay: WinogradLayout) -> float:
    """The direct conv's multiply-adds over the layout's: its GEMMs', the tiles padded to whole
    panels, plus its transforms' operations (`transform_ops`) at TRANSFORM_OP_COST each (a
    grouped conv's GEMMs reduce over a group's channels, its transforms take every channel)."""
    geo = lay.geo
    c, k = geo.channels, geo.out_channels
    per_input, per_output = transform_ops(lay.m)
    direct = geo.batch * math.prod(geo.out_shape) * math.prod(geo.kernel) * geo.icg * k
    positions = lay.alpha**2 * lay.columns
    transforms = TRANSFORM_OP_COST * (per_input * c + per_output * k)
    return direct / (positions * (geo.icg * k + transforms))


def transform_ops(m: int) -> tuple[float, float]:
    """Operations per tile position of one channel: of the input transform B^T d B (each of
    its two passes takes each nonzero of B^T over alpha columns) and of the output's A^T M A."""
    bt, _, at = (np.array(x) for x in MATRICES[m])
    alpha = m + 2
    per_input = 2 * alpha * np.count_nonzero(bt) / alpha**2
    per_output = (alpha + m) * np.count_nonzero(at) / alpha**2
    return float(per_input), float(per_output)


@dataclass(frozen=True)
class WinogradLayout:
    """The tiling of one conv for output tile m: tiles, strips and the GEMM's panels."""

    geo: ConvGeometry
    m: int
    lanes: int
    gemm_vectors: int  # NV of the GEMM's tile
    gemm_rows: int  # MR of the GEMM's tile
    band: int = 0  # tile rows a band of the blocked kernel (`blocked_kernel_body`); 0: unblocked

    @property
    def alpha(self) -> int:
        return self.m + 2

    @property
    def tiles_h(self) -> int:
        return -(-self.geo.out_shape[0] // self.m)

    @property
    def tiles_w(self) -> int:
        """Tiles a row, covering the output width plus the 2 columns a strip's last tile reads
        past its end (module doc)."""
        return -(-(self.geo.out_shape[1] + 2) // self.m)

    @property
    def pitch(self) -> int:
        return self.tiles_w * self.m

    @property
    def tiles(self) -> int:
        """Tiles of one image."""
        return self.tiles_h * self.tiles_w

    @property
    def columns(self) -> int:
        """P: the GEMM's columns, every image's tiles, padded to whole panels."""
        panel = self.gemm_vectors * self.lanes
        return -(-self.geo.batch * self.tiles // panel) * panel

    @property
    def strips_size(self) -> int:
        """Elements of one channel's input strips, with 2 of slack (the last tile's overrun)."""
        return self.alpha * self.tiles_h * self.pitch + 2

    @property
    def vector(self) -> int:
        """Tiles per vector of the transforms (fewer where an image has fewer tiles)."""
        return min(self.lanes, self.tiles)

    @property
    def bands(self) -> int:
        """Bands of an image (blocked: `band` tile rows each, the last one's may lie past it)."""
        return -(-self.tiles_h // self.band)

    def band_layout(self) -> WinogradLayout:
        """The layout of one band: `band` tile rows of one image, as a conv of that height."""
        geo = replace(self.geo, batch=1, out_shape=(self.band * self.m, self.geo.out_shape[1]))
        return replace(self, geo=geo, band=0)


def layout(
    geo: ConvGeometry, m: int, lanes: int, registers: int, vectors: int = 0, rows: int = 0,
    band: int = 0,
) -> WinogradLayout:  # fmt: skip
    """The layout for tile m with the GEMM tile of at most `vectors` x `rows` (0: the default,
    the fewest modelled cycles by cpu_tiles' core model among the tiles that fit the core
    (`fits_core`) where any does: AVX2's 8 x 1, 9 loads for 8 FMAs, ran 1.3-1.5x slower than
    the 4 x 3 the cycle count put second), blocked in bands of `band` tile rows (0: not), whose
    tiles are then a GEMM's columns."""
    whole = WinogradLayout(geo, m, lanes, 1, 1)
    band = min(max(0, band), whole.tiles_h)
    tiles = band * whole.tiles_w if band else geo.batch * whole.tiles
    k = geo.ocg  # a GEMM's rows: a group's output channels

    def rows_for(nv: int) -> int:  # the most rows dividing K / g that fit the registers
        limit = min(rows or MAX_GEMM_ROWS, max_rows(nv, registers), k)
        return max(r for r in range(1, max(1, limit) + 1) if k % r == 0)

    def cycles(nv: int) -> float:
        mr = rows_for(nv)
        per_cycle = FLOPS_PER_CYCLE / (2 * lanes)
        step = max(mr * nv / per_cycle, (mr + nv) / LOADS_PER_CYCLE, FMA_LATENCY)
        return -(-tiles // (nv * lanes)) * -(-k // mr) * step

    def fits(nv: int) -> bool:  # enough independent FMAs, no more loads than they hide
        useful = tiles / (-(-tiles // (nv * lanes)) * nv * lanes)
        return fits_core(rows_for(nv), nv, lanes, useful)

    widest = max(1, min(vectors or 4, -(-tiles // lanes)))
    candidates = [nv for nv in range(widest, 0, -1) if fits(nv)] or range(widest, 0, -1)
    nv = widest if vectors else min(candidates, key=cycles)
    return WinogradLayout(geo, m, lanes, nv, rows_for(nv), band)


def weight_bytes(lay: WinogradLayout, itemsize: int) -> int:
    """Bytes of the transformed weights (alpha x alpha values a filter)."""
    return itemsize * lay.alpha**2 * lay.geo.group * lay.geo.icg * lay.geo.ocg


def working_set(lay: WinogradLayout) -> int:
    """Bytes of V and M (of one band where `lay.band`, else of the whole batch)."""
    columns = lay.band_layout().columns if lay.band else lay.columns
    return 4 * lay.alpha**2 * lay.geo.group * (lay.geo.icg + lay.geo.ocg) * columns


def useful(lay: WinogradLayout, threads: int) -> float:
    """The share of the GEMM's columns that are tiles of the output, with bands dealt out to
    `threads` (unblocked, the transforms' channels and the GEMM's tiles spread evenly)."""
    if not lay.band:
        return lay.geo.batch * lay.tiles / lay.columns
    band, count = lay.band_layout(), lay.geo.batch * lay.bands
    rows = lay.tiles_h / (lay.bands * lay.band)  # the last band's rows past the image
    return band.tiles / band.columns * rows * count / (threads * -(-count // threads))


def banded(whole: WinogradLayout, band: int, registers: int) -> WinogradLayout:
    """`whole` (a layout without bands) in bands of `band` tile rows, with its GEMM tile where
    a band has the tiles for it (else as narrow as they need)."""
    return layout(whole.geo, whole.m, whole.lanes, registers, whole.gemm_vectors,
                  whole.gemm_rows, band)  # fmt: skip


def bands_of_its_tile(whole: WinogradLayout, registers: int, last: int) -> list[WinogradLayout]:
    """`whole` in bands of 1 to `last` tile rows, those whose tiles keep its GEMM tile."""
    tile = (whole.gemm_vectors, whole.gemm_rows)
    bands = (banded(whole, r, registers) for r in range(1, last + 1))
    return [b for b in bands if (b.gemm_vectors, b.gemm_rows) == tile]


def default_band(whole: WinogradLayout, registers: int, cache_bytes: int, threads: int) -> int:
    """Tile rows a band of the default Winograd kernel, 0 for no bands. Bands where V and M of
    the whole batch exceed BAND_CACHE_FACTOR L2s: of those with the unblocked GEMM's tile and
    most of its useful columns (`keep`) whose V and M, with U (which every band reads whole),
    fit in that, the most `useful` (the larger where equal)."""
    budget = BAND_CACHE_FACTOR * cache_bytes
    whole_bytes = working_set(whole)
    if cache_bytes <= 0 or whole_bytes <= budget:
        return 0
    geo = whole.geo
    u_bytes = 4 * whole.alpha**2 * geo.group * geo.icg * geo.ocg
    # V and M just past the budget cost the unblocked kernels little: bands must then keep
    # more of the useful columns, 20% less for each doubling of V and M, down to BAND_MIN_USE
    # (densenet121's 128->32 @56 at batch 1, 1.2x the budget: in the comment above)
    keep = max(BAND_MIN_USE, 1 - 0.2 * math.log2(whole_bytes / budget)) * useful(whole, threads)
    fitting = [b for b in bands_of_its_tile(whole, registers, whole.tiles_h)
               if working_set(b) + u_bytes <= budget and useful(b, threads) >= keep]  # fmt: skip
    best = max(fitting, key=lambda b: (round(useful(b, threads), 3), b.band), default=None)
    return best.band if best is not None else 0


def offered_bands(whole: WinogradLayout, registers: int) -> list[int]:
    """The tuning space's bands of `whole`'s GEMM tile: 0 (unblocked), then for V and M of a
    band within each of 1, 2, 4, ... MB (whichever caches a core has), the band that keeps
    the most of its useful columns on one thread, if at least BAND_MIN_USE of the unblocked
    GEMM's (the larger where equal; one band of a whole image only for a batch of several)."""
    keep = BAND_MIN_USE * useful(whole, 1)
    last = whole.tiles_h if whole.geo.batch > 1 else whole.tiles_h - 1
    bands = [b for b in bands_of_its_tile(whole, registers, last) if useful(b, 1) >= keep]
    offered = [0]
    bound = 1 << 20
    while bands:
        within = [b for b in bands if working_set(b) <= bound]
        if within:
            best = max(within, key=lambda b: (round(useful(b, 1), 3), b.band))
            offered += [best.band] if best.band not in offered else []
            bands = [b for b in bands if working_set(b) > bound]
        bound *= 2
    return offered


def weight_transform(w: np.ndarray, m: int) -> np.ndarray:
    """U[alpha^2, K, C] = G g G^T of weights w[K, C, 3, 3] (float64 math, float32 result)."""
    g = np.array(MATRICES[m][1])
    u = np.einsum("ai,kcij,bj->abkc", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape(-1, *w.shape[:2]), dtype=np.float32)


Terms = dict[int, float]  # a linear combination: vector index -> nonzero coefficient


def lincomb(terms: Terms, vectors: Sequence[Expr], lanes: int) -> Expr:
    """sum(c * vectors[i]) over `terms`: a +1 term first, then adds and subtracts for +-1 and
    multiply-adds (one rounding each) for the other coefficients."""
    order = sorted(terms, key=lambda i: terms[i] != 1)
    first, *rest = order
    c = terms[first]
    total = vectors[first] if c == 1 else broadcast(float(c), lanes) * vectors[first]
    for i in rest:
        c, v = terms[i], vectors[i]
        if c == 1:
            total = total + v
        elif c == -1:
            total = total - v
        else:
            total = fma(broadcast(float(c), lanes), v, total)
    return total


def lincomb_ops(terms: Terms) -> int:
    """Operations `lincomb` spends on `terms`."""
    return len(terms) - 1 + (1 not in terms.values())


def apply_matrix(matrix: Sequence[Sequence[float]], d: Sequence[Expr], lanes: int) -> list[Expr]:
    """matrix @ d for a column d of vector expressions, in fewer operations than row by row
    (the F4 transforms' 30 and 20 operations a column as written fall to 13 and 10):

    - two columns that every row takes in equal or opposite measure enter as their sum and
      difference, computed once (A^T's columns 1, 2 and 3, 4);
    - two rows that are e + o and e - o of sparser e and o share e and o (B^T's rows 1, 2 and
      3, 4).
    """
    vectors = list(d)
    rows: list[Terms] = [{j: float(c) for j, c in enumerate(row) if c} for row in matrix]
    for j, k in itertools.combinations(range(len(d)), 2):
        both = [r for r in rows if j in r or k in r]
        if len(both) < 2 or any(abs(r.get(k, 0.0)) != abs(r.get(j, 0.0)) for r in both):
            continue
        plus, minus = len(vectors), len(vectors) + 1
        vectors += [vectors[j] + vectors[k], vectors[j] - vectors[k]]
        for r in both:
            cj, ck = r.pop(j), r.pop(k)
            r[plus if cj == ck else minus] = cj
    out: list[Expr | None] = [None] * len(rows)
    for a, b in itertools.combinations(range(len(rows)), 2):
        if out[a] is not None or out[b] is not None:
            continue
        keys = rows[a].keys() | rows[b].keys()
        even = {i: c for i in keys if (c := (rows[a].get(i, 0.0) + rows[b].get(i, 0.0)) / 2)}
        odd = {i: c for i in keys if (c := (rows[a].get(i, 0.0) - rows[b].get(i, 0.0)) / 2)}
        shared = lincomb_ops(even) + lincomb_ops(odd) + 2  # then e + o and e - o
        if not even or not odd or shared >= lincomb_ops(rows[a]) + lincomb_ops(rows[b]):
            continue
        e, o = lincomb(even, vectors, lanes), lincomb(odd, vectors, lanes)
        out[a], out[b] = e + o, e - o
    return [v if v is not None else lincomb(r, vectors, lanes) for v, r in zip(out, rows)]


def two_sided(matrix: Sequence[Sequence[float]], d: list[list[Expr]], lanes: int) -> list:
    """matrix @ d @ matrix^T on a grid of vector expressions (`apply_matrix` down each column
    of d, then along each row of the result)."""
    columns = [apply_matrix(matrix, [row[j] for row in d], lanes) for j in range(len(d[0]))]
    return [apply_matrix(matrix, [col[i] for col in columns], lanes) for i in range(len(matrix))]


def over_tiles(lay: WinogradLayout, body) -> Stmt:
    """body(p0) for each vector of `lay.vector` tiles of one image from p0; the last vector is
    moved back to end at the last tile (it redoes some tiles, with the same result)."""
    n = lay.vector
    return loop("chunk", -(-lay.tiles // n),
                lambda ci: let("p0", minimum(ci * n, lay.tiles - n), body))  # fmt: skip


def deinterleaved(s: Buffer, start: Expr, lay: WinogradLayout) -> list[Expr]:
    """Row i of n consecutive tiles from strip row i at `start`: alpha vectors of n lanes, the
    j-th holding column j of each tile (position start + j + m * lane). Where n is a whole number
    of 4-lane groups, `transposed_columns`; else two contiguous loads of n * m floats (at 0 and
    at alpha - m, columns 0..m-1 and the rest) and a pick of lanes from one of them each."""
    m, n, a = lay.m, lay.vector, lay.alpha
    if n % 4 == 0 and m in (2, 4):
        return transposed_columns(s, start, m, n, a)
    near, far = s[ramp(start, n * m)], s[ramp(start + (a - m), n * m)]
    return [
        Shuffle((near,), tuple(j + m * lane for lane in range(n))) if j < m
        else Shuffle((far,), tuple(j - (a - m) + m * lane for lane in range(n)))
        for j in range(a)
    ]  # fmt: skip


def transposed_columns(s: Buffer, start: Expr, m: int, n: int, alpha: int) -> list[Expr]:
    """`deinterleaved` by a transpose within each 4-lane group (AVX's unpack and shufps: two
    steps for m = 4, one for m = 2) and one permute a column to put its tiles in order; columns
    m.. are columns 0.. of the next tile, one lane on, the last lane read alone. On AVX2 LLVM
    lowered each stride-m pick of a span to about 7 shuffles (permutes and blends)."""
    Labelled = tuple[Expr, list[int]]  # a vector and the span position of each of its lanes
    loads: list[Labelled] = [(s[ramp(start + k * n, n)], list(range(k * n, (k + 1) * n)))
                             for k in range(m)]  # fmt: skip

    def pick(x: Labelled, y: Labelled, pattern: tuple[int, ...]) -> Labelled:
        """Lanes of x and y (n + i: y's lane i), `pattern` in each 4-lane group."""
        picks = [g * 4 + p for g in range(n // 4) for p in pattern]
        both = x[1] + y[1]
        return Shuffle((x[0], y[0]), tuple(picks)), [both[p] for p in picks]

    if m == 4:  # unpack (0, 1) and (2, 3) into lo and hi halves, then shufps of those
        lo01, hi01, lo23, hi23 = (pick(loads[i], loads[i + 1], pat) for i in (0, 2)
                                  for pat in ((0, n, 1, n + 1), (2, n + 2, 3, n + 3)))  # fmt: skip
        picked = [pick(x, y, pat) for x, y in ((lo01, lo23), (hi01, hi23))
                  for pat in ((0, 1, n, n + 1), (2, 3, n + 2, n + 3))]  # fmt: skip
    else:
        picked = [pick(loads[0], loads[1], pat) for pat in ((0, 2, n, n + 2), (1, 3, n + 1, n + 3))]
    columns = []
    for j, (vector, lab) in enumerate(picked):
        assert all(pos % m == j for pos in lab), "a transposed vector mixes columns"
        order = sorted(range(n), key=lambda lane: lab[lane])
        columns.append(vector if order == list(range(n)) else Shuffle((vector,), tuple(order)))
    for j in range(m, alpha):
        last = broadcast(s[start + n * m + (j - m)], n)
        columns.append(Shuffle((columns[j - m], last), tuple(range(1, n + 1))))
    return columns


def grouped_plane(t: int, channel: Expr, per_group: int, groups: int) -> tuple[Expr | int, Expr]:
    """(GEMM batch, row) of `channel`'s row in plane t of V or M, whose rows run group by
    group (module doc): (t, channel) ungrouped."""
    if groups == 1:
        return t, channel
    return t * groups + channel // per_group, channel % per_group


def fill_strips(lay: WinogradLayout, x: Buffer, nb: Expr, c: Expr, s: Buffer, row0: Expr) -> Stmt:
    """Strips s of channel (nb, c) for tile rows row0 .. row0 + lay.tiles_h of the image (module
    doc), then the 2 elements of slack: zeros."""
    m = lay.m
    # plane rows of `tiled` are padded rows: fill_row writes zeros outside the input
    tiled = replace(lay.geo, out_shape=(lay.tiles_h * m, lay.pitch - 2))

    def fill(i: int, ty: Var) -> Stmt:
        base = (i * lay.tiles_h + ty) * lay.pitch
        return fill_row(tiled, x, nb, c, s, base, (0, 0), ((row0 + ty) * m + i,), lay.lanes)

    return seq(
        *(loop("ty", lay.tiles_h, lambda ty, i=i: fill(i, ty)) for i in range(lay.alpha)),
        s.store(ramp(const(lay.strips_size - 2), 2), broadcast(0.0, 2)),
    )


Put = Callable[[int, Expr, Expr], Stmt]  # put(position t, first tile p0, a vector of tiles)


def input_tiles(lay: WinogradLayout, s: Buffer, half: Buffer, put: Put) -> Stmt:
    """B^T d B of every tile of one channel's strips s, put at each of the alpha^2 positions.

    Two passes through `half` (alpha^2 vectors, L1): d B of each strip row in a loop, then B^T
    down each column. As one expression the 36 columns and their sums outlived AVX2's 16
    registers and the transform spilled 90 of them a chunk."""
    a, m, n = lay.alpha, lay.m, lay.vector
    bt = MATRICES[m][0]
    strip = lay.tiles_h * lay.pitch  # from strip row i to i + 1

    def tiles(p0: Var) -> Stmt:
        def strip_row(i: Var) -> Stmt:
            db = apply_matrix(bt, deinterleaved(s, p0 * m + i * strip, lay), n)
            return seq(*(half.store(ramp((i * a + j) * n, n), e) for j, e in enumerate(db)))

        def column(j: int) -> Stmt:
            out = apply_matrix(bt, [half[ramp((i * a + j) * n, n)] for i in range(a)], n)
            return seq(*(put(i * a + j, p0, e) for i, e in enumerate(out)))

        return seq(loop("i", a, strip_row), *(column(j) for j in range(a)))

    return over_tiles(lay, tiles)


def output_tiles(lay: WinogradLayout, read: Callable[[int, Expr], Expr], s: Buffer) -> Stmt:
    """A^T M A of every tile of one output channel (read(t, p0): position t of the vector of
    tiles from p0) into local strips s, m rows a tile row."""
    a, m, n = lay.alpha, lay.m, lay.vector
    strip = lay.tiles_h * lay.pitch

    def tiles(p0: Var) -> Stmt:
        m_tiles = [[read(i * a + j, p0) for j in range(a)] for i in range(a)]
        y = two_sided(MATRICES[m][2], m_tiles, n)
        # tile row i of n tiles is n * m contiguous floats of strip i: one store of the row's m
        # vectors interleaved, not m stores of stride m lane by lane
        return seq(*(s.store(ramp(p0 * m + i * strip, n * m), interleave(y[i])) for i in range(m)))

    return over_tiles(lay, tiles)


def copy_rows(
    lay: WinogradLayout, s: Buffer, nb: Expr, k: Expr, row0: Expr, height: int, past: bool,
    bias: TensorRef | None, out: Buffer, epilogue: Epilogue | None,
) -> Stmt:  # fmt: skip
    """Output rows row0 * m .. of channel (nb, k) from `output_tiles`' strips s, those of the
    tile rows of `lay` below `height` (checked row by row where the rows may reach `past` it),
    + bias, through the epilogue, as contiguous vectors."""
    m, strip = lay.m, lay.tiles_h * lay.pitch
    rows = min(lay.tiles_h * m, height)

    def row(r: Var) -> Stmt:
        base = (r % m) * strip + (r // m) * lay.pitch
        y = row0 * m + r

        def element(col: Expr) -> Stmt:
            value = s[base + col]
            if bias is not None:
                value = value + bias.read((k,)).astype(value.dtype)
            return finalize(value, (nb, k, y, col), out, epilogue)

        copy = vector_range(0, lay.geo.out_shape[1], lay.lanes, element)
        return if_then_else(y < height, copy) if past else copy

    return loop("r", rows, row)


def input_kernel_body(lay: WinogradLayout, x: Buffer, v: Buffer, parallel: bool) -> Stmt:
    """V[t, c, n * tiles + p] = (B^T d B)[t] of tile p of channel (n, c), per (n, c) (for
    groups, at `grouped_plane`'s batch and row)."""
    geo, a, n = lay.geo, lay.alpha, lay.vector
    real = geo.batch * lay.tiles

    def channel(s: Buffer, half: Buffer, nb: Expr, c: Expr) -> Stmt:
        def put(t: int, p0: Expr, value: Expr) -> Stmt:
            return v.store((*grouped_plane(t, c, geo.icg, geo.group), ramp(nb * lay.tiles + p0, n)),
                           value)  # fmt: skip

        # the GEMM reads the padding columns (never the output): zeros, not stale workspace
        # bits that could be denormals, which slow the FMAs
        zero = const(0.0, v.dtype)

        def zeros(p: Expr) -> Stmt:
            return seq(*(v.store((*grouped_plane(t, c, geo.icg, geo.group), p), zero)
                         for t in range(a * a)))  # fmt: skip

        pad = vector_range(real, lay.columns, lay.lanes, zeros)
        return seq(
            fill_strips(lay, x, nb, c, s, const(0)),
            input_tiles(lay, s, half, put),
            None
            if lay.columns == real
            else pad
            if geo.batch == 1
            else if_then_else(nb.eq(geo.batch - 1), pad),
        )

    def at(nc: Var) -> Stmt:
        def scratch(s: Buffer, half: Buffer) -> Stmt:
            return let("nb", nc // geo.channels, lambda nb: let(
                "c", nc % geo.channels, lambda c: channel(s, half, nb, c)))  # fmt: skip

        return allocate(
            "strips",
            (lay.strips_size,),
            lambda s: allocate("half", (a * a * n,), lambda h: scratch(s, h), x.dtype),
            x.dtype,
        )

    count = geo.batch * geo.channels
    return loop("nc", count, at, "parallel" if parallel and count > 1 else "serial")


def output_kernel_body(
    lay: WinogradLayout, mm: Buffer, bias: TensorRef | None, out: Buffer,
    epilogue: Epilogue | None, parallel: bool,
) -> Stmt:  # fmt: skip
    """out[n, k] = A^T M A of every tile of (n, k), + bias, through the epilogue."""
    geo, n = lay.geo, lay.vector

    def channel(s: Buffer, nb: Expr, k: Expr) -> Stmt:
        def read(t: int, p0: Expr) -> Expr:
            return mm[(*grouped_plane(t, k, geo.ocg, geo.group), ramp(nb * lay.tiles + p0, n))]

        return seq(output_tiles(lay, read, s),
                   copy_rows(lay, s, nb, k, const(0), geo.out_shape[0], False, bias, out,
                             epilogue))  # fmt: skip

    def at(nk: Var) -> Stmt:
        def scratch(s: Buffer) -> Stmt:
            return let("nb", nk // geo.out_channels, lambda nb: let(
                "k", nk % geo.out_channels, lambda k: channel(s, nb, k)))  # fmt: skip

        return allocate("strips", (lay.m * lay.tiles_h * lay.pitch,), scratch, "float32")

    count = geo.batch * geo.out_channels
    return loop("nk", count, at, "parallel" if parallel and count > 1 else "serial")


def winograd_lowering(
    ctx: LowerContext, lay: WinogradLayout, x: Buffer, weights: np.ndarray,
    bias: TensorRef | None, out: Buffer, epilogue: Epilogue | None, parallel: bool,
) -> list[Kernel]:  # fmt: skip
    """The kernels computing `out` = conv(x, weights) + bias, then the epilogue: three (input
    transform, GEMM, output transform), or one where `lay.band` blocks them."""
    geo, a2, g = lay.geo, lay.alpha**2, lay.geo.group
    k, c, p = geo.ocg, geo.icg, lay.columns  # a GEMM's: one group's
    u = weight_transform(weights, lay.m).reshape(a2 * g, k, c)  # U[t, K, C/g], K by group
    if lay.band:
        packed = ctx.param(pack_rows(u, lay.gemm_rows).reshape(-1), "winograd_u")
        body = blocked_kernel_body(lay, x, packed, bias, out, epilogue, parallel)
        return [make_kernel(ctx.name("winograd_blocked"), body)]
    v = ctx.temp((a2 * g, plane_rows(c, p, a2, g), p), "float32", "winograd_v")
    mm = ctx.temp((a2 * g, plane_rows(k, p, a2, g), p), "float32", "winograd_m")
    kernels = [make_kernel(ctx.name("winograd_input"), input_kernel_body(lay, x, v, parallel))]
    u_type = TensorType((a2 * g, k, c), "float32")
    u_ref = TensorRef("winograd_u", u_type, _packed_by_the_gemm, None, u)
    v_ref = ref_of_buffer("winograd_v", TensorType((a2 * g, c, p), "float32"), v)
    tile = {"tile_m": lay.gemm_rows, "tile_n": lay.gemm_vectors}
    kernels += gemm_kernels(replace(ctx, config=tile), u_ref, v_ref, mm, None, pack_a=True)
    body = output_kernel_body(lay, mm, bias, out, epilogue, parallel)
    return [*kernels, make_kernel(ctx.name("winograd_output"), body)]


def blocked_kernel_body(
    lay: WinogradLayout, x: Buffer, u: Buffer, bias: TensorRef | None, out: Buffer,
    epilogue: Epilogue | None, parallel: bool,
) -> Stmt:  # fmt: skip
    """The three steps band by band, in one parallel loop over (image, band): every input
    channel's tiles of `lay.band` tile rows transformed into a local V, the GEMMs into a local
    M, then every output channel's tiles of the band transformed back. V and M of a band stay
    in the core's cache where the unblocked kernels' of a whole batch or a large plane go
    through memory (densenet121's 3x3 128->32 @56 at batch 4: 14 MB). `u`: U packed in row
    blocks of the GEMM tile's MR (`pack_rows`), [alpha^2 * groups][K/g / MR][C/g][MR]."""
    geo, band = lay.geo, lay.band_layout()
    a2, groups, n, lanes = lay.alpha**2, geo.group, band.vector, lay.lanes
    k, c, cols = geo.ocg, geo.icg, band.columns  # a GEMM's rows, reduction and columns
    mr, nv = lay.gemm_rows, lay.gemm_vectors
    nr = nv * lanes
    v_rows, m_rows = plane_rows(c, cols, a2, groups), plane_rows(k, cols, a2, groups)
    zero = const(0.0, "float32")
    past = lay.bands * lay.band * lay.m > geo.out_shape[0]  # the last band's rows reach past

    def at(nbb: Var, s: Buffer, half: Buffer, v: Buffer, mm: Buffer, so: Buffer) -> Stmt:
        nb, row0 = nbb // lay.bands, (nbb % lay.bands) * lay.band

        def channel_in(ci: Var) -> Stmt:
            def at_column(t: int, p: Expr) -> Expr:
                plane, row = grouped_plane(t, ci, c, groups)
                return (plane * v_rows + row) * cols + p

            def put(t: int, p0: Expr, value: Expr) -> Stmt:
                return v.store(ramp(at_column(t, p0), n), value)

            # the GEMM reads the padding columns (never the output): zeros, not stale bits
            def zeros(p: Expr) -> Stmt:
                return seq(*(v.store(at_column(t, p), zero) for t in range(a2)))

            pad = vector_range(band.tiles, cols, lanes, zeros) if cols > band.tiles else None
            return seq(fill_strips(band, x, nb, ci, s, row0), input_tiles(band, s, half, put), pad)

        def gemm(t: Var) -> Stmt:  # M[t] = U[t] @ V[t], t a (position, group) plane
            def tile(u0: Expr, v0: Expr, m0: Expr) -> Stmt:
                def scalar(r: int, ks: tuple, _: int) -> Expr:
                    return u[u0 + ks[0] * mr + r]

                def vector(j: int, ks: tuple, _: int) -> Expr:
                    return v[ramp(v0 + ks[0] * cols + j * lanes, lanes)]

                def finish(acc: Buffer) -> Stmt:
                    return seq(*(mm.store(ramp(m0 + r * cols + j * lanes, lanes),
                                          acc[r, ramp(j * lanes, lanes)])
                                 for r in range(mr) for j in range(nv)))  # fmt: skip

                return register_tile(mr, nv, lanes, "float32", [("ci", c)], 1, scalar, vector,
                                     finish)  # fmt: skip

            def at_tile(pn: Var, kb: Var) -> Stmt:
                bases = [(t * (k // mr) + kb) * (c * mr), t * (v_rows * cols) + pn * nr,
                         (t * m_rows + kb * mr) * cols + pn * nr]  # fmt: skip
                return let_all("g", bases, lambda b: tile(*b))

            # a panel of V stays in L1 while every row block of U[t] streams past it
            return loop("pn", cols // nr,
                        lambda pn: loop("kb", k // mr, lambda kb: at_tile(pn, kb)))  # fmt: skip

        def channel_out(ko: Var) -> Stmt:
            def read(t: int, p0: Expr) -> Expr:
                plane, row = grouped_plane(t, ko, k, groups)
                return mm[ramp((plane * m_rows + row) * cols + p0, n)]

            return seq(output_tiles(band, read, so),
                       copy_rows(band, so, nb, ko, row0, geo.out_shape[0], past, bias, out,
                                 epilogue))  # fmt: skip

        return seq(loop("ci", geo.channels, channel_in), loop("t", a2 * groups, gemm),
                   loop("ko", geo.out_channels, channel_out))  # fmt: skip

    def scratch(nbb: Var) -> Stmt:
        buffers = [("strips", (band.strips_size,)), ("half", (a2 * n,)),
                   ("v", (a2 * groups * v_rows * cols,)), ("m", (a2 * groups * m_rows * cols,)),
                   ("out_strips", (lay.m * band.tiles_h * band.pitch,))]  # fmt: skip

        def nest(i: int, made: tuple[Buffer, ...]) -> Stmt:
            if i == len(buffers):
                return at(nbb, *made)
            name, shape = buffers[i]
            return allocate(name, shape, lambda b: nest(i + 1, (*made, b)), "float32")

        return nest(0, ())

    count = geo.batch * lay.bands
    return loop("band", count, scratch, "parallel" if parallel and count > 1 else "serial")


def plane_rows(rows: int, columns: int, planes: int, groups: int = 1) -> int:
    """Rows each group of a plane of V or M takes (`rows` and up to 16 unused): the fewest that
    put the same element of the alpha^2 planes, which the transforms read or write together, in
    as many different sets of a 4 KB-way L1 as there are planes (up to its 64). 128 channels of
    216 columns made each plane exactly 27 pages: the 36 stores of an F4 chunk went to one set,
    evicting each other's lines from its 8 ways between the chunk's two halves of a line."""
    line, sets = 64, 4096 // 64

    def spread(r: int) -> int:
        return len({(t * groups * r * columns * 4 // line) % sets for t in range(planes)})

    want = min(planes, sets)
    return next((r for r in range(rows, rows + 17) if spread(r) >= want),
                max(range(rows, rows + 17), key=spread))  # fmt: skip


def _packed_by_the_gemm(idx: tuple[Expr, ...]) -> Expr:
    raise AssertionError("U is a constant the GEMM packs (pack_a), never read in place")


def gemm_tiles(geo: ConvGeometry, m: int, lanes: int, registers: int) -> list[tuple[int, int]]:
    """The (NV, MR) GEMM tiles the knob space offers for tile m: each distinct layout of
    NV 1-4 and MR 4, 6 or 8 (clamped as `layout` clamps them)."""
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    for nv in range(1, 5):
        for mr in (4, 6, 8):
            lay = layout(geo, m, lanes, registers, nv, mr)
            seen.setdefault((lay.gemm_vectors, lay.gemm_rows), (nv, mr))
    return sorted(seen.values())
