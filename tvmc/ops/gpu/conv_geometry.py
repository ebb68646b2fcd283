"""What the GPU conv schedules share: the conv's geometry, its weights as an [OC, ICg * taps]
matrix, and the store of one output (bias, then the fused epilogue)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tvmc.kernel import Buffer, Expr, Stmt
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef
from tvmc.ops.microkernel import finalize, let_all, unflatten
from tvmc.ops.registry import Attrs


@dataclass(frozen=True)
class ConvGeometry:
    batch: int
    in_channels: int
    out_channels: int
    group: int
    in_size: tuple[int, ...]
    kernel: tuple[int, ...]
    out_size: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]  # the begin pads

    @property
    def icg(self) -> int:
        return self.in_channels // self.group

    @property
    def ocg(self) -> int:
        return self.out_channels // self.group

    def position(self, o: tuple[Expr, ...], taps: tuple[Expr, ...]) -> tuple[Expr, ...]:
        """Input coordinates of output `o` at kernel tap `taps`."""
        return tuple(
            o[d] * s - p + t * dl
            for d, (t, s, dl, p) in enumerate(zip(taps, self.strides, self.dilations, self.pads))
        )

    def inside(self, pos: tuple[Expr, ...]) -> Expr | None:
        """The padding test of `pos`, only on the sides where a window can leave the input."""
        cond: Expr | None = None
        for d, z in enumerate(pos):
            reach = (self.out_size[d] - 1) * self.strides[d] - self.pads[d]
            reach += (self.kernel[d] - 1) * self.dilations[d]
            tests = ([z >= 0] if self.pads[d] > 0 else []) + (
                [z < self.in_size[d]] if reach >= self.in_size[d] else []
            )
            for t in tests:
                cond = t if cond is None else cond & t
        return cond


def conv_geometry(
    attrs: Attrs, x: TensorRef, w: TensorRef, out: Buffer, transpose: bool
) -> ConvGeometry:
    """The geometry of a Conv (or, with `transpose`, a ConvTranspose) node."""
    spatial = x.type.ndim - 2
    out_channels = w.shape[1] * attrs["group"] if transpose else w.shape[0]
    return ConvGeometry(
        x.shape[0],
        x.shape[1],
        out_channels,
        attrs["group"],
        tuple(x.shape[2:]),
        tuple(w.shape[2:]),
        tuple(out.shape[2:]),
        tuple(attrs["strides"]),
        tuple(attrs["dilations"]),
        tuple(attrs["pads"][:spatial]),
    )


def weight_read(ctx: LowerContext, w: TensorRef, geo: ConvGeometry) -> Callable[[Expr, Expr], Expr]:
    """W[oc, kk] with kk = (ic, taps) flattened: a packed [OC, K] constant, else in place."""
    k = geo.icg * math.prod(geo.kernel)
    if w.value is not None:
        packed = ctx.param(w.value.reshape(geo.out_channels, k), "w")
        return lambda oc, kk: packed[oc, kk]
    return lambda oc, kk: w.read((oc, *unflatten(kk, (geo.icg, *geo.kernel))))


def output_store(
    geo: ConvGeometry, bias: TensorRef | None, out: Buffer, epilogue: Epilogue | None, acc: str
) -> Callable[[Expr, tuple[Expr, ...], Expr], Stmt]:
    """store(oc, (batch, *pixel), value): bias added, the epilogue applied, the result stored."""

    def store(oc: Expr, where: tuple[Expr, ...], v: Expr) -> Stmt:
        v = v + bias.read((oc,)).astype(acc) if bias is not None else v

        def at(ix: tuple[Expr, ...]) -> Stmt:  # the value once: epilogues read it repeatedly
            return let_all("v", (v,), lambda vs: finalize(vs[0], ix, out, epilogue))

        return let_all("p", (where[0], oc, *where[1:]), at)

    return store
