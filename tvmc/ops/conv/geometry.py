"""The geometry of one convolution: shapes and window, shared by the CPU and GPU templates.

A ConvGeometry holds a node as it is stated (`of_node`). A ConvTranspose has two readings:

- as stated (`transposed=True`): each output gathers the inputs whose stride phase lands on it;
  the GPU's direct ConvTranspose reads it so.
- stuffed (`stuffed()`): a stride-1 conv over the input with `stride - 1` zeros stuffed between
  its elements, padded so that it gives exactly the output shape, with the kernel flipped and
  transposed; the CPU template reads a stride-1 ConvTranspose so (strided ones run as columns
  and a gather, tvmc.ops.conv.cpu_transpose, which reads the node as stated).

The plane properties (phases, plane, tap offsets) describe the CPU's input transform
(tvmc.ops.conv.cpu_layout) and hold for a conv reading (not transposed).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tvmc.kernel import Buffer, Expr, const
from tvmc.ops.lowering import Attrs


@dataclass(frozen=True)
class ConvGeometry:
    """Shapes and window of one (grouped, N-d) convolution."""

    batch: int
    channels: int
    out_channels: int
    group: int
    in_shape: tuple[int, ...]
    kernel: tuple[int, ...]
    out_shape: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pad_begin: tuple[int, ...]  # may be negative in the stuffed reading (it crops)
    upsample: tuple[int, ...]  # zeros stuffed between input elements: all 1 unless stuffed
    transposed: bool = False  # a ConvTranspose as stated
    # the conv whose input transform this one's tiles read (a strided pointwise conv's compact
    # planes read as one row: `flattened`); None: its own
    transformed_from: ConvGeometry | None = None
    # elements after each channel's planes in the transformed input (so that every channel's
    # planes start on a cache line: `with_channel_pad`)
    channel_pad: int = 0
    # whether the input transform splits stride phases (each tap a contiguous run of a phase
    # plane); else it only pads, and a row's output pixels sit `pixel_steps` apart (`unphased`)
    phased: bool = True

    @classmethod
    def of_node(
        cls,
        op: str,
        attrs: Attrs,
        x_shape: Sequence[int],
        w_shape: Sequence[int],
        out_shape: Sequence[int],
    ) -> ConvGeometry:
        """The geometry of a Conv or ConvTranspose node as stated (types alone)."""
        spatial = len(x_shape) - 2
        transposed = op == "ConvTranspose"
        group = int(attrs["group"])
        out_channels = w_shape[1] * group if transposed else w_shape[0]
        return cls(
            x_shape[0], x_shape[1], out_channels, group, tuple(x_shape[2:]),
            tuple(attrs["kernel_shape"]), tuple(out_shape[2:]), tuple(attrs["strides"]),
            tuple(attrs["dilations"]), tuple(attrs["pads"][:spatial]), (1,) * spatial, transposed,
        )  # fmt: skip

    def stuffed(self) -> ConvGeometry:
        """The conv reading: a ConvTranspose as a stride-1 conv over its zero-stuffed input."""
        if not self.transposed:
            return self
        begin = tuple(
            d * (k - 1) - p for k, d, p in zip(self.kernel, self.dilations, self.pad_begin)
        )
        ones = (1,) * len(self.kernel)
        return replace(self, strides=ones, pad_begin=begin, upsample=self.strides, transposed=False)

    @property
    def icg(self) -> int:
        """Input channels per group."""
        return self.channels // self.group

    @property
    def depthwise(self) -> bool:
        """One input channel per group, in several groups."""
        return self.icg == 1 and self.group > 1

    @property
    def ocg(self) -> int:
        """Output channels per group."""
        return self.out_channels // self.group

    # ---- the gather reading: input coordinates of an output and a tap --------------------------
    def position(self, o: tuple[Expr, ...], taps: tuple[Expr, ...]) -> tuple[Expr, ...]:
        """Input coordinates of output `o` at kernel tap `taps` (a conv reading)."""
        return tuple(
            o[d] * s - p + t * dl
            for d, (t, s, dl, p) in enumerate(
                zip(taps, self.strides, self.dilations, self.pad_begin)
            )
        )

    def inside(self, pos: tuple[Expr, ...]) -> Expr | None:
        """The padding test of `pos`, only on the sides where a window can leave the input."""
        cond: Expr | None = None
        for d, z in enumerate(pos):
            reach = (self.out_shape[d] - 1) * self.strides[d] - self.pad_begin[d]
            reach += (self.kernel[d] - 1) * self.dilations[d]
            tests = ([z >= 0] if self.pad_begin[d] > 0 else []) + (
                [z < self.in_shape[d]] if reach >= self.in_shape[d] else []
            )
            for t in tests:
                cond = t if cond is None else cond & t
        return cond

    # ---- the CPU's plane layout ------------------------------------------------------------------
    def unphased(self) -> ConvGeometry:
        """This conv reading its input padded but not split into stride phases: a strided
        channels tile then reads each input row once for all the taps of a kernel row (3x3/2:
        three rows a channel, where its four phase planes put them in six)."""
        return replace(self, phased=False)

    @property
    def split_strides(self) -> tuple[int, ...]:
        """Per axis, the stride the transform splits phases by (1 where unphased)."""
        return self.strides if self.phased else (1,) * len(self.strides)

    @property
    def pixel_steps(self) -> tuple[int, ...]:
        """Per axis, the plane distance between consecutive output positions."""
        return (1,) * len(self.strides) if self.phased else self.strides

    @functools.cached_property
    def phases(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the stride phases some tap reads."""
        return tuple(
            tuple(sorted({k * d % s for k in range(kk)}))
            for kk, s, d in zip(self.kernel, self.split_strides, self.dilations)
        )

    @functools.cached_property
    def plane(self) -> tuple[int, ...]:
        """Shape of one phase plane: every output position plus the kernel's reach."""
        return tuple(
            (o - 1) * q + 1 + (k - 1) * d // s
            for o, k, s, q, d in zip(
                self.out_shape, self.kernel, self.split_strides, self.pixel_steps, self.dilations
            )
        )

    @property
    def plane_size(self) -> int:
        """Elements of one phase plane."""
        return math.prod(self.plane)

    @property
    def plane_strides(self) -> tuple[int, ...]:
        """Row-major element strides within a plane."""
        return tuple(math.prod(self.plane[i + 1 :]) for i in range(len(self.plane)))

    @property
    def n_phases(self) -> int:
        """Phase planes per channel."""
        return math.prod(len(p) for p in self.phases)

    @property
    def planes_size(self) -> int:
        """Elements of one channel's phase planes."""
        return self.n_phases * self.plane_size

    @property
    def channel_stride(self) -> int:
        """Elements per channel of the transformed input: its planes, then `channel_pad`."""
        return self.planes_size + self.channel_pad

    def with_channel_pad(self, pad: int) -> ConvGeometry:
        """This conv reading a transformed input of `pad` elements after each channel's planes
        (and the conv whose transform it reads, the same)."""
        source = self.transformed_from
        padded = None if source is None else replace(source, channel_pad=pad)
        return replace(self, channel_pad=pad, transformed_from=padded)

    @property
    def taps(self) -> list[tuple[int, ...]]:
        """Kernel positions in the weight's row-major order."""
        return list(itertools.product(*(range(k) for k in self.kernel)))

    def tap_offset(self, tap: tuple[int, ...]) -> int:
        """Offset of `tap` from an output pixel's plane position, within one channel."""
        phase, within = 0, 0
        for i, (k, s, d) in enumerate(zip(tap, self.split_strides, self.dilations)):
            phase = phase * len(self.phases[i]) + self.phases[i].index(k * d % s)
            within += (k * d // s) * self.plane_strides[i]
        return phase * self.plane_size + within

    @property
    def max_tap_offset(self) -> int:
        """The largest tap offset."""
        return max(self.tap_offset(t) for t in self.taps)

    @property
    def is_identity(self) -> bool:
        """True when the transform would copy the input as it is (no pad, phase split, stuffing)."""
        return (
            not any(self.pad_begin)
            and all(s == 1 for s in self.split_strides)
            and all(u == 1 for u in self.upsample)
            and self.plane == self.in_shape
        )

    def flattened(self) -> ConvGeometry:
        """A pointwise conv (1x1, unpadded) of 2 or more spatial axes as a conv over one axis,
        its plane: a tile may then run on through a row into the next (a position of it is a
        flat offset through the tensors' last axis), and tiles fill their vectors whatever the
        rows' width (1x1 64->128 @55x55 as AVX2 code 1.42x on rows of 64 against 55). Stride
        1: input and output planes are contiguous and alike. A larger stride: the input
        transform's planes are (each holds the positions the outputs read, `plane` = the output
        shape), so the flat conv reads them (`transformed_from`). Other convs: unchanged."""
        pointwise = all(k == 1 for k in self.kernel) and not any(self.pad_begin)
        if (
            len(self.in_shape) < 2
            or self.transposed
            or not pointwise
            or self.upsample != (1,) * len(self.kernel)
        ):
            return self
        one, size = (1,), math.prod(self.out_shape)
        flat = replace(self, in_shape=(size,), kernel=one, out_shape=(size,), strides=one,
                       dilations=one, pad_begin=(0,), upsample=one)  # fmt: skip
        return flat if self.is_identity else replace(flat, transformed_from=self)

    def out_position(self, lead: tuple[Expr, ...]) -> Expr:
        """Plane position of the first pixel of the output row with leading indices `lead` (of
        the pixel itself, given all its indices)."""
        return sum(
            (i * q * s for i, q, s in zip(lead, self.pixel_steps, self.plane_strides)), const(0)
        )


def through_last_axis(buf: Buffer, idx: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """Indices (n, c, *position) of a conv's input or output as indices of `buf`: a flattened
    geometry's one plane position a flat offset through its last axis (`flattened`)."""
    missing = buf.ndim - len(idx)
    return (*idx[:2], *(const(0),) * missing, *idx[2:]) if missing > 0 else idx
