"""Templates for Softmax, LogSoftmax, Hardmax, LayerNormalization and InstanceNormalization.

Each is one `reduction_kernel` (tvmc.ops.reduce_schedule): row statistics as stages, then an
element pass writing the normalized row, so a row comes from memory once and stays in cache for
the later passes. Statistics accumulate in float32 for float16 inputs; the variance is that of
the centred values (a second pass, not E[x^2] - mean^2). Softmax is max-shifted (no overflow),
and without an epilogue keeps its exponentials in the output between passes (float32/float64),
so exp runs once per element; the last pass multiplies by 1/sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tvmc.kernel import Buffer, Expr, Kernel, const, exp, log, select, sqrt
from tvmc.ops.lowering import Epilogue, LowerContext, TensorRef, broadcast_read, template
from tvmc.ops.reduce_kernels import loader
from tvmc.ops.reduce_schedule import (
    Emit,
    Index,
    Results,
    Stage,
    accumulator_dtype,
    flat_position,
    reduction_kernel,
    storer,
)
from tvmc.ops.registry import Attrs

Value = Callable[[Index, Results], Expr]


def _element_store(out: Buffer, ndim: int, epilogue: Epilogue | None, value: Value) -> Emit:
    """Stores `value` (cast, then the epilogue) at every element of the reduced region."""
    return storer(out, epilogue, lambda idx: tuple(idx[a] for a in range(ndim)), value)


# ---- Softmax / LogSoftmax / Hardmax --------------------------------------------------------------
def _softmax_template(op: str) -> None:
    def lower(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        x, out = inputs[0], outputs[0]
        ndim, axes, shape = x.type.ndim, tuple(attrs["axes"]), x.shape
        acc = accumulator_dtype(x.dtype)
        load = loader(x, acc)
        if op == "Hardmax":
            reduced = [a for a in axes if shape[a] > 1]
            stages = [Stage("argmax", acc, load)]

            def value(idx: Index, r: Results) -> Expr:
                hit = flat_position(idx, shape, reduced).eq(r[0])
                return select(hit, const(1.0, acc), const(0.0, acc))

        else:

            def shifted(idx: Index, r: Results) -> Expr:
                return exp(load(idx, r) - r[0])

            if op == "Softmax":
                # the exponentials wait in the output when it holds them exactly (not float16)
                # and no epilogue reads a buffer that may share the output's memory
                keep = out if acc == x.dtype and epilogue is None else None
                stages = [Stage("max", acc, load), Stage("sum", acc, shifted, _reciprocal, keep)]

                def value(idx: Index, r: Results) -> Expr:
                    e = (
                        out[tuple(idx[a] for a in range(ndim))]
                        if keep is not None
                        else shifted(idx, r)
                    )
                    return e * r[1]

            else:
                stages = [Stage("max", acc, load), Stage("sum", acc, shifted, log)]

                def value(idx: Index, r: Results) -> Expr:
                    return load(idx, r) - r[0] - r[1]

        element = _element_store(out, ndim, epilogue, value)
        return [reduction_kernel(ctx, op.lower(), shape, axes, stages, element=element)]

    lower.__doc__ = f"{op} over `axes` as one reduction kernel."
    template(op, epilogue=True)(lower)


def _reciprocal(v: Expr) -> Expr:
    return const(1.0, v.dtype) / v


for _op in ("Softmax", "LogSoftmax", "Hardmax"):
    _softmax_template(_op)


# ---- LayerNormalization / InstanceNormalization --------------------------------------------------
def _moments(load: Value, acc: str, count: int, epsilon: float) -> list[Stage]:
    """Mean, then 1/sqrt(var + epsilon) with the variance of the centred values (two passes)."""

    def centred_square(idx: Index, r: Results) -> Expr:
        c = load(idx, r) - r[0]
        return c * c

    def mean(v: Expr) -> Expr:
        return v / const(count, acc)

    def inverse_std(v: Expr) -> Expr:
        return const(1.0, acc) / sqrt(v / const(count, acc) + const(epsilon, acc))

    return [Stage("sum", acc, load, mean), Stage("sum", acc, centred_square, inverse_std)]


@template("LayerNormalization", epilogue=True)
def layer_normalization(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per row over dims axis..: mean, inverse std, then (x - mean) * inv * scale + bias."""
    x, out = inputs[0], outputs[0]
    ndim, shape = x.type.ndim, x.shape
    axis = int(attrs["axis"]) % ndim
    axes = tuple(range(axis, ndim))
    acc = accumulator_dtype(x.dtype)
    load = loader(x, acc)
    row_shape = x.shape[axis:]
    scale = broadcast_read(inputs[1], row_shape)
    bias = broadcast_read(inputs[2], row_shape) if len(inputs) > 2 else None

    def value(idx: Index, r: Results) -> Expr:
        row = tuple(idx[a] for a in axes)
        y = (load(idx, r) - r[0]) * r[1] * scale(row).astype(acc)
        return y + bias(row).astype(acc) if bias is not None else y

    stages = _moments(load, acc, math.prod(row_shape), float(attrs["epsilon"]))
    element = _element_store(out, ndim, epilogue, value)
    return [reduction_kernel(ctx, "layer_norm", shape, axes, stages, element=element)]


@template("InstanceNormalization", epilogue=True)
def instance_normalization(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per (sample, channel) over the spatial dims, then a per-channel scale and shift."""
    x, scale, bias = inputs
    ndim, shape = x.type.ndim, x.shape
    axes = tuple(range(2, ndim))
    acc = accumulator_dtype(x.dtype)
    load = loader(x, acc)

    def value(idx: Index, r: Results) -> Expr:
        c = (idx[1],)
        return (load(idx, r) - r[0]) * (r[1] * scale.read(c).astype(acc)) + bias.read(c).astype(acc)

    stages = _moments(load, acc, math.prod(x.shape[2:]), float(attrs["epsilon"]))
    element = _element_store(outputs[0], ndim, epilogue, value)
    return [reduction_kernel(ctx, "instance_norm", shape, axes, stages, element=element)]
