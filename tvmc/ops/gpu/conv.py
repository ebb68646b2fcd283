"""GPU templates for Conv (any rank, groups, strides, dilations, pads) and ConvTranspose.

Conv has two schedules (knob `schedule`):

- "gemm" (implicit GEMM, the default unless each output reads one input channel): per group,
  out[oc, pixel] = sum over (ic, taps) of W[oc, (ic, taps)] * X[(ic, taps), pixel], through
  `tiled_gemm`'s shared-memory tiles and per-thread register tiles (its knobs tile_m, tile_n,
  tile_k, unroll_k, split_k). The im2col matrix is never stored: the B-tile loader gathers the input
  behind the padding test; constant weights are packed at compile time as an [OC, K] matrix.
- "direct" (default for depthwise): one thread per output, a loop over its channels and taps
  (`block` threads per block).

Bias and the fused epilogue are applied as each output is stored. ConvTranspose is one thread
per output gathering the inputs whose stride phase lands on it (`block` threads per block).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, Stmt, allocate, const, if_then_else, loop, nest, seq
from tvmc.ops.gpu.gemm import gemm_gpu_space, tiled_gemm
from tvmc.ops.gpu.launch import DEFAULT_BLOCK, MAX_THREADS, GPUConfigError, grid_loop
from tvmc.ops.lowering import (
    Epilogue,
    LowerContext,
    LoweringTarget,
    TensorRef,
    make_kernel,
    template,
)
from tvmc.ops.microkernel import accumulator_dtype, finalize, let_all, mac, unflatten
from tvmc.ops.registry import OPS, Attrs
from tvmc.ops.space import ConfigSpace

BLOCKS = (64, 128, 256, 512)
UNROLL_TAPS = 32  # windows up to this many taps are unrolled in the direct schedules


@dataclass(frozen=True)
class _Geometry:
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


def _geometry(attrs: Attrs, x: TensorRef, w: TensorRef, out: Buffer, transpose: bool) -> _Geometry:
    spatial = x.type.ndim - 2
    out_channels = w.shape[1] * attrs["group"] if transpose else w.shape[0]
    return _Geometry(
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


def _schedule(ctx: LowerContext, geo: _Geometry) -> str:
    schedule = str(ctx.config.get("schedule", "direct" if geo.icg == 1 else "gemm"))
    if schedule not in ("gemm", "direct"):
        raise GPUConfigError(f"conv schedule {schedule!r}: 'gemm' or 'direct'")
    return schedule


def _block(ctx: LowerContext) -> int:
    block = int(ctx.config.get("block", DEFAULT_BLOCK))
    if not 0 < block <= MAX_THREADS:
        raise GPUConfigError(f"block {block}: 1 to {MAX_THREADS} threads")
    return block


def conv_gpu_space(
    attrs: Attrs, input_types: list[TensorType], target: LoweringTarget
) -> ConfigSpace:
    """GEMM tiles for the implicit GEMM; threads per block for a depthwise conv's direct one."""
    w = input_types[1].shape
    if w[1] == 1:
        return ConfigSpace().other("block", BLOCKS)
    out = OPS["Conv"].infer(attrs, input_types)[0].shape
    out_pixels = out[0] * math.prod(out[2:])  # the GEMM's N: tiles clamp to it
    k = math.prod(w[1:])
    shapes = [
        TensorType((w[0] // attrs["group"], k), "float32"),
        TensorType((k, out_pixels), "float32"),
    ]
    return gemm_gpu_space({}, shapes, target)


def _weight_read(ctx: LowerContext, w: TensorRef, geo: _Geometry) -> Callable[[Expr, Expr], Expr]:
    """W[oc, kk] with kk = (ic, taps) flattened: a packed [OC, K] constant, else in place."""
    k = geo.icg * math.prod(geo.kernel)
    if w.value is not None:
        packed = ctx.param(w.value.reshape(geo.out_channels, k), "w")
        return lambda oc, kk: packed[oc, kk]
    return lambda oc, kk: w.read((oc, *unflatten(kk, (geo.icg, *geo.kernel))))


def _store(
    geo: _Geometry, bias: TensorRef | None, out: Buffer, epilogue: Epilogue | None, acc: str
) -> Callable[[Expr, tuple[Expr, ...], Expr], Stmt]:
    def store(oc: Expr, where: tuple[Expr, ...], v: Expr) -> Stmt:
        v = v + bias.read((oc,)).astype(acc) if bias is not None else v

        def at(ix: tuple[Expr, ...]) -> Stmt:  # the value once: epilogues read it repeatedly
            return let_all("v", (v,), lambda vs: finalize(vs[0], ix, out, epilogue))

        return let_all("p", (where[0], oc, *where[1:]), at)

    return store


def conv_implicit_gemm(
    ctx: LowerContext,
    geo: _Geometry,
    x: TensorRef,
    w: TensorRef,
    bias: TensorRef | None,
    out: Buffer,
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """The conv as `group` GEMMs of [OCg, ICg*taps] x [ICg*taps, N*pixels]."""
    acc = accumulator_dtype(out.dtype)
    pixels = (geo.batch, *geo.out_size)
    taps = (geo.icg, *geo.kernel)
    weight = _weight_read(ctx, w, geo)
    store = _store(geo, bias, out, epilogue, acc)

    def gather(g: Expr, kk: Expr, j: Expr) -> tuple[tuple[Expr, ...], Expr | None]:
        b, *o = unflatten(j, pixels)
        ic, *t = unflatten(kk, taps)
        pos = geo.position(tuple(o), tuple(t))
        return (b, g * geo.icg + ic, *pos), geo.inside(pos)

    return tiled_gemm(
        ctx,
        "conv",
        geo.group,
        geo.ocg,
        math.prod(pixels),
        math.prod(taps),
        acc,
        lambda g, i, kk: weight(g * geo.ocg + i, kk),
        lambda g, kk, j: x.read(gather(g, kk, j)[0]),
        lambda g, i, j, v: store(g * geo.ocg + i, unflatten(j, pixels), v),
        lambda g, kk, j: gather(g, kk, j)[1],
    )


def _window(extents: tuple[int, ...], body: Callable[..., Stmt]) -> Stmt:
    """Loops over a window's taps, unrolled when the window is small."""
    kind = "unrolled" if math.prod(extents) <= UNROLL_TAPS else "serial"
    return nest([(f"t{d}", e, kind) for d, e in enumerate(extents)], body)


def conv_direct(
    ctx: LowerContext,
    geo: _Geometry,
    x: TensorRef,
    w: TensorRef,
    bias: TensorRef | None,
    out: Buffer,
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """One thread per output: its channels and taps in a register accumulator."""
    acc_t = accumulator_dtype(out.dtype)
    weight = _weight_read(ctx, w, geo)
    store = _store(geo, bias, out, epilogue, acc_t)
    taps = math.prod(geo.kernel)

    def output(flat: Expr) -> Stmt:
        b, oc, *o = unflatten(flat, out.shape)
        g = oc // geo.ocg if geo.group > 1 else const(0)

        def body(acc: Buffer) -> Stmt:
            def tap(ic: Expr, *t: Expr) -> Stmt:
                pos = geo.position(tuple(o), t)
                kk = ic * taps + sum_taps(t, geo.kernel)
                v = mac(
                    x.read((b, g * geo.icg + ic, *pos)).astype(acc_t),
                    weight(oc, kk).astype(acc_t),
                    acc[0],
                )
                cond = geo.inside(pos)
                st = acc.store(0, v)
                return if_then_else(cond, st) if cond is not None else st

            channels = (
                loop("ic", geo.icg, lambda ic: _window(geo.kernel, lambda *t: tap(ic, *t)))
                if geo.icg > 1
                else _window(geo.kernel, lambda *t: tap(const(0), *t))
            )
            return seq(acc.store(0, const(0, acc_t)), channels, store(oc, (b, *o), acc[0]))

        return allocate("acc", (1,), body, acc_t)

    return [make_kernel(ctx.name("conv_direct"), grid_loop(out.size, output, _block(ctx)))]


def sum_taps(t: tuple[Expr, ...], kernel: tuple[int, ...]) -> Expr:
    """Row-major position of tap `t` in the window."""
    pos: Expr = const(0)
    for v, k in zip(t, kernel):
        pos = pos * k + v
    return pos


@template("Conv", epilogue=True, space=conv_gpu_space, target="cuda")
def conv_gpu(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Conv as an implicit GEMM through shared memory, or direct (depthwise)."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    geo = _geometry(attrs, x, w, outputs[0], transpose=False)
    build = conv_implicit_gemm if _schedule(ctx, geo) == "gemm" else conv_direct
    return build(ctx, geo, x, w, bias, outputs[0], epilogue)


def conv_transpose_gpu_space(
    attrs: Attrs, input_types: list[TensorType], target: LoweringTarget
) -> ConfigSpace:
    """Threads per block of the gather kernel."""
    return ConfigSpace().other("block", BLOCKS)


@template("ConvTranspose", epilogue=True, space=conv_transpose_gpu_space, target="cuda")
def conv_transpose_gpu(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """One thread per output: the inputs and taps whose stride phase lands on it."""
    x, w, out = inputs[0], inputs[1], outputs[0]
    bias = inputs[2] if len(inputs) > 2 else None
    geo = _geometry(attrs, x, w, out, transpose=True)
    acc_t = accumulator_dtype(out.dtype)
    store = _store(geo, bias, out, epilogue, acc_t)

    def output(flat: Expr) -> Stmt:
        b, oc, *o = unflatten(flat, out.shape)
        g, m = (oc // geo.ocg, oc % geo.ocg) if geo.group > 1 else (const(0), oc)

        def body(acc: Buffer) -> Stmt:
            def tap(ic: Expr, *t: Expr) -> Stmt:
                z = [o[d] + geo.pads[d] - t[d] * geo.dilations[d] for d in range(len(t))]
                cond: Expr | None = None
                for d, zd in enumerate(z):
                    s = geo.strides[d]
                    test = (zd >= 0) & (zd < geo.in_size[d] * s)
                    test = test & (zd % s).eq(0) if s > 1 else test
                    cond = test if cond is None else cond & test
                q = tuple(
                    zd // geo.strides[d] if geo.strides[d] > 1 else zd for d, zd in enumerate(z)
                )
                c = g * geo.icg + ic
                v = mac(x.read((b, c, *q)).astype(acc_t), w.read((c, m, *t)).astype(acc_t), acc[0])
                return if_then_else(cond, acc.store(0, v))

            channels = loop("ic", geo.icg, lambda ic: _window(geo.kernel, lambda *t: tap(ic, *t)))
            return seq(acc.store(0, const(0, acc_t)), channels, store(oc, (b, *o), acc[0]))

        return allocate("acc", (1,), body, acc_t)

    return [make_kernel(ctx.name("conv_transpose"), grid_loop(out.size, output, _block(ctx)))]
