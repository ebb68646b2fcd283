"""What the GPU conv schedules share beside the geometry: the weights as an [OC, ICg * taps]
matrix, and the store of one output (bias, then the fused epilogue)."""

from __future__ import annotations

import math
from collections.abc import Callable

from tvmc.kernel import Buffer, Expr, Stmt
from tvmc.ops.conv.geometry import ConvGeometry
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef
from tvmc.ops.schedule.microkernel import finalize, let_all, unflatten


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
