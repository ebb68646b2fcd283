"""Softmax, LogSoftmax and Hardmax: rules, references and their one template (a
`reduction_kernel`: row statistics as stages, then an element pass writing the row).

They take `axes`, a sorted tuple of non-negative axes normalized together: one axis for ONNX
opset >= 13, every dim from `axis` to the end for the older "coerce to 2-D" semantics, so
neither form needs a Reshape. Softmax is max-shifted (no overflow), and without an epilogue keeps
its exponentials in the output between passes (float32/float64), so exp runs once per element;
the last pass multiplies by 1/sum.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, const, exp, log, select
from tvmc.ops.common import FLOAT_DTYPES
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TemplateFn, TensorRef
from tvmc.ops.reduction.reduce import listed_axes, reduce_axes
from tvmc.ops.registry import OPAQUE, REQUIRED, OpDef
from tvmc.ops.schedule.reduction import (
    Emit,
    Index,
    Results,
    Stage,
    accumulator_dtype,
    flat_position,
    loader,
    reduction_kernel,
    row_reduction_lowerings,
    storer,
)


def float_input(op: str, x: TensorType) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{op} needs a floating-point input, got {x.dtype}")


def _softmax_rule(op: str):
    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        x = types[0]
        float_input(op, x)
        if not attrs["axes"]:
            raise ValueError(f"{op} needs at least one axis")
        reduce_axes(attrs, x.ndim, op)
        return [x]

    return rule


def wide(x: np.ndarray) -> np.ndarray:
    """float64 working precision: these are references, and exp/log/rsqrt lose bits in float32."""
    return x.astype(np.float64)


_SOFTMAX_ATTRS = {"axes": REQUIRED}


def softmax(attrs, x):
    """exp(x) / sum(exp(x)) over `axes` (max-subtracted for range)."""
    axes = reduce_axes(attrs, x.ndim, "Softmax")
    e = np.exp(wide(x) - np.max(x, axis=axes, keepdims=True))
    return (e / np.sum(e, axis=axes, keepdims=True)).astype(x.dtype)


def log_softmax(attrs, x):
    """x - log(sum(exp(x))) over `axes` (max-subtracted for range)."""
    axes = reduce_axes(attrs, x.ndim, "LogSoftmax")
    shifted = wide(x) - np.max(x, axis=axes, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axes, keepdims=True))).astype(x.dtype)


def hardmax(attrs, x):
    """One-hot of the first largest element over `axes` (taken together, row-major)."""
    axes = reduce_axes(attrs, x.ndim, "Hardmax")
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, rest + list(axes))  # reduced dims last, then one flat row
    rows = moved.reshape(moved.shape[: len(rest)] + (-1,))
    onehot = np.zeros_like(rows)
    np.put_along_axis(onehot, np.argmax(rows, axis=-1)[..., None], 1, axis=-1)
    return np.transpose(onehot.reshape(moved.shape), np.argsort(rest + list(axes)))


# ---- the template ------------------------------------------------------------------------------
Value = Callable[[Index, Results], Expr]


def element_store(out: Buffer, ndim: int, epilogue: Epilogue | None, value: Value) -> Emit:
    """Stores `value` (cast, then the epilogue) at every element of the reduced region."""
    return storer(out, epilogue, lambda idx: tuple(idx[a] for a in range(ndim)), value)


# ---- Softmax / LogSoftmax / Hardmax --------------------------------------------------------------
def softmax_template(op: str) -> TemplateFn:
    """The template of Softmax, LogSoftmax or Hardmax."""

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

        element = element_store(out, ndim, epilogue, value)
        return [reduction_kernel(ctx, op.lower(), shape, axes, stages, element=element)]

    lower.__doc__ = f"{op} over `axes` as one reduction kernel."
    return lower


def _reciprocal(v: Expr) -> Expr:
    return const(1.0, v.dtype) / v


DEFINITIONS = [
    OpDef(op, _softmax_rule(op), reference,
          row_reduction_lowerings(softmax_template(op), listed_axes), _SOFTMAX_ATTRS, OPAQUE)
    for op, reference in (("Softmax", softmax), ("LogSoftmax", log_softmax), ("Hardmax", hardmax))
]  # fmt: skip
