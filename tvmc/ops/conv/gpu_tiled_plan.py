"""The plan of the tiled direct GPU conv (`gpu_tiled`): the tiles a config asks for, checked
against the GPU's limits, and a patch pitch that spreads a warp's shared reads over the banks.

Knobs: the implicit GEMM's (one space, `schedule` "tiled" picks this form), read as `tile_m`
[OCb, OCt], `tile_n` [pixels per block, PXt] (OWb: that many pixels, at most the row rounded up
to a power of two; OHb: the rest), `tile_k` ICb (clamped to the group's input channels),
`unroll_k` (unroll the taps), `split_k` (the channel steps cut across blocks, summed by a second
kernel: late layers with few output tiles), `double_buffer` (the next step's patch and weights
fetched into registers while this step multiplies, stored into the other half of two shared
buffers after it, as the GEMM does). Defaults: the implicit GEMM's tiles, 8 channels per step,
split-K as the GEMM picks it, no double buffering.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.schedule.gemm_gpu import BANK_PAD, MAX_STAGED, default_tiles, vector_width
from tvmc.ops.schedule.gpu_launch import (
    MAX_SHARED_BYTES,
    MAX_THREADS,
    GPUConfigError,
    pow2_at_least,
)
from tvmc.ops.schedule.microkernel import ceil_div

DEFAULT_CHANNELS = 8  # input channels per step unless tile_k says otherwise
WARP, BANKS = 32, 32


@dataclass(frozen=True)
class TiledPlan:
    """OCb x (OHb x OWb) outputs per block, OCt x PXt per thread, ICb channels per step."""

    ocb: int
    oct: int
    ohb: int
    owb: int
    pxt: int
    icb: int
    unroll: bool
    patch: tuple[int, int]  # rows and columns of input the block's pixel tile reads
    pitch: int  # the patch's row pitch in shared memory (>= its columns: see patch_pitch)
    packed: bool  # constant weights, packed [K, OC]: a warp loads consecutive channels
    double_buffer: bool = False
    wvec: int = 1  # weights per load: packed ones move in float4 (or float2) runs of channels

    @property
    def threads(self) -> int:
        return (self.ocb // self.oct) * self.ohb * (self.owb // self.pxt)

    def staged(self, taps: int) -> tuple[int, int]:
        """Values per thread double buffering holds in registers: patch, weights."""
        patch = ceil_div(self.icb * self.patch[0] * self.pitch, self.threads)
        chunks = self.icb * taps * self.ocb // self.wvec
        return patch, ceil_div(chunks, self.threads) * self.wvec

    @property
    def pad(self) -> int:
        """Unpacked weights load with consecutive threads on consecutive taps, so a warp's
        stores run down a column of the [taps, OCb] tile: padded rows spread them over banks
        (4 keeps rows 16-byte aligned for the vector reads where OCb allows)."""
        if self.packed:
            return 0
        return BANK_PAD if self.ocb % BANK_PAD == 0 else 1

    def output_tiles(self, geo: ConvGeometry) -> tuple[int, int, int, int, int]:
        """Output tiles along images, groups, channels, rows and columns."""
        (oh, ow), cdiv = geo.out_shape, ceil_div
        return geo.batch, geo.group, cdiv(geo.ocg, self.ocb), cdiv(oh, self.ohb), cdiv(ow, self.owb)

    def shared_bytes(self, taps: int, itemsize: int) -> int:
        weights = taps * (self.ocb + self.pad)
        per_step = self.icb * (self.patch[0] * self.pitch + weights) * itemsize
        return per_step * (2 if self.double_buffer else 1)


def patch_pitch(ohb: int, cols: int, per_oc: int, columns: int, strides: tuple[int, ...]) -> int:
    """The patch row pitch (from `columns` up) with the fewest bank conflicts when a warp reads
    the patch: thread (row ty, column tx) reads word ty * sh * pitch + tx * sw (every tap and
    pixel shifts all threads alike, so one pattern decides), e.g. 20 instead of 17 for a
    stride-2 tile of 4 x 4 threads."""
    sh, sw = strides
    lanes = [(t % per_oc // cols, t % cols) for t in range(min(WARP, per_oc * 32))]

    def conflicts(pitch: int) -> int:
        words = {ty * sh * pitch + tx * sw for ty, tx in lanes}
        banks = [sum(1 for w in words if w % BANKS == b) for b in range(BANKS)]
        return max(banks)

    return min(range(columns, columns + BANKS), key=lambda p: (conflicts(p), p))


def tiled_plan(config: Any, geo: ConvGeometry, packed: bool = True) -> TiledPlan:
    """The plan a config asks for (defaults sized to the conv), checked against the limits;
    `packed`: the weights are constants (packed [K, OC] at compile time)."""
    if len(geo.kernel) != 2:
        raise GPUConfigError("the tiled direct conv is for 2-D convs")
    oh, ow = geo.out_shape
    (ocb, oct), (pixels, pxt) = default_tiles(geo.batch * geo.group, geo.ocg, oh * ow)
    ocb, oct = (int(v) for v in config.get("tile_m", (ocb, oct)))
    pixels, pxt = (int(v) for v in config.get("tile_n", (pixels, pxt)))
    icb = min(int(config.get("tile_k", DEFAULT_CHANNELS)), geo.icg)
    if ocb % oct or pixels % pxt:
        raise GPUConfigError(f"thread tile {oct}x{pxt} does not divide block tile {ocb}x{pixels}")
    owb = min(pixels, pow2_at_least(ow))
    ohb, pxt = pixels // owb, min(pxt, owb)
    ph, pw = (
        (t - 1) * s + (k - 1) * d + 1
        for t, s, k, d in zip((ohb, owb), geo.strides, geo.kernel, geo.dilations)
    )
    cols = owb // pxt
    pitch = patch_pitch(ohb, cols, ohb * cols, pw, geo.strides)  # type: ignore[arg-type]
    unroll, double = bool(config.get("unroll_k", False)), bool(config.get("double_buffer", False))
    wvec = vector_width(4, ocb, geo.ocg, geo.out_channels) if packed else 1
    plan = TiledPlan(ocb, oct, ohb, owb, pxt, icb, unroll, (ph, pw), pitch, packed, double, wvec)
    staged = sum(plan.staged(math.prod(geo.kernel)))
    if double and staged > MAX_STAGED:
        raise GPUConfigError(
            f"double buffering would stage {staged} values per thread (at most {MAX_STAGED})"
        )
    if plan.threads > MAX_THREADS:
        raise GPUConfigError(f"{plan.threads} threads per block (at most {MAX_THREADS})")
    need = plan.shared_bytes(math.prod(geo.kernel), 4)
    if need > MAX_SHARED_BYTES:
        raise GPUConfigError(f"the patch and weights need {need} bytes of shared memory "
                             f"(at most {MAX_SHARED_BYTES})")  # fmt: skip
    return plan
