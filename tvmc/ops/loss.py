"""Losses: NegativeLogLikelihoodLoss, one row-reduction template on either target.

The frontend builds SoftmaxCrossEntropyLoss from it as its ONNX function does: LogSoftmax over
the class axis (whose result is the optional log_prob output), then this op.

The loss of element (n, d...) with class t = target[n, d...] is -input[n, t, d...] * weight[t]
(weight 1 without the input), 0 where t is ignore_index. `reduction` none keeps that tensor;
sum adds it up; mean divides the sum by the sum of the weights taken (NaN when every target is
ignored, as onnxruntime gives). The template reads the picked class directly (a gather), so no
one-hot or GatherElements is needed; a class out of [0, C) is undefined in ONNX, and the compiled
code clamps it into range rather than read outside the input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, const, maximum, minimum, select
from tvmc.ops.common import same_dtype
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TensorRef
from tvmc.ops.reduction.softmax import float_input
from tvmc.ops.registry import OPAQUE, OpDef, register
from tvmc.ops.schedule.reduction import (
    Index,
    Results,
    Stage,
    accumulator_dtype,
    reduction_kernel,
    row_reduction_lowerings,
    storer,
)

REDUCTIONS = ("none", "sum", "mean")
TARGET_DTYPES = ("int32", "int64")


def _nll_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x, target = types[:2]
    op = "NegativeLogLikelihoodLoss"
    float_input(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op} needs an [N,C,D1,...] input, got {list(x.shape)}")
    if target.dtype not in TARGET_DTYPES:
        raise ValueError(f"{op} target must be int32 or int64, got {target.dtype}")
    want = (x.shape[0], *x.shape[2:])
    if target.shape != want:
        raise ValueError(
            f"{op} target of shape {list(target.shape)} does not match input {list(x.shape)} "
            f"(want {list(want)}: the input without its class axis)"
        )
    if len(types) > 2:
        same_dtype([x, types[2]], op)
        if types[2].shape != (x.shape[1],):
            raise ValueError(
                f"{op} weight must be [{x.shape[1]}] (one per class), got {list(types[2].shape)}"
            )
    if attrs["reduction"] not in REDUCTIONS:
        raise ValueError(
            f"{op} reduction {attrs['reduction']!r} is not one of {', '.join(REDUCTIONS)}"
        )
    return [TensorType(want if attrs["reduction"] == "none" else (), x.dtype)]


def negative_log_likelihood_loss(attrs, x, target, weight=None):
    """-input[n, target, d...] * weight[target], 0 at ignore_index; reduced by none/sum/mean."""
    classes, ignore = x.shape[1], attrs["ignore_index"]
    t = target.astype(np.int64)
    taken = t != ignore if ignore is not None else np.ones(t.shape, bool)
    safe = np.where(taken, t, 0)
    if safe.size and (safe.min() < 0 or safe.max() >= classes):
        raise IndexError(f"NegativeLogLikelihoodLoss target out of range [0, {classes})")
    picked = np.take_along_axis(x.astype(np.float64), safe[:, None], axis=1)[:, 0]
    w = weight.astype(np.float64)[safe] if weight is not None else np.ones(t.shape)
    w = np.where(taken, w, 0.0)
    loss = -picked * w
    if attrs["reduction"] == "none":
        return loss.astype(x.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = loss.sum() if attrs["reduction"] == "sum" else loss.sum() / w.sum()
    return np.asarray(total, dtype=x.dtype)


def _rows(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    """The target's shape, every axis reduced unless reduction is none (each element a row)."""
    shape = (x.shape[0], *x.shape[2:])
    return shape, () if attrs["reduction"] == "none" else tuple(range(len(shape)))


def negative_log_likelihood_loss_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per target element: the picked class's weighted log-probability, 0 if ignored; summed
    (and the taken weights summed, for mean) over every element unless reduction is none."""
    x, target = inputs[:2]
    weight = inputs[2] if len(inputs) > 2 else None
    shape, axes = _rows(attrs, x.type)
    ndim, classes = len(shape), x.shape[1]
    acc = accumulator_dtype(x.dtype)
    zero = const(0.0, acc)
    ignore = attrs["ignore_index"]
    info = np.iinfo(target.dtype)
    if ignore is not None and not info.min <= ignore <= info.max:
        ignore = None  # no target of this dtype can equal it

    def pick(idx: Index) -> tuple[Expr, Expr | None]:
        """(the class read, clamped into range; whether the element counts, None: always)."""
        t = target.read(tuple(idx[a] for a in range(ndim)))
        cls = minimum(maximum(t, const(0, t.dtype)), const(classes - 1, t.dtype))
        taken = t.ne(const(ignore, t.dtype)) if ignore is not None else None
        return cls.astype("int32"), taken

    def weight_of(cls: Expr) -> Expr:
        return weight.read((cls,)).astype(acc) if weight is not None else const(1.0, acc)

    def loss(idx: Index, r: Results) -> Expr:
        cls, taken = pick(idx)
        rest = tuple(idx[a] for a in range(1, ndim))
        value = -(x.read((idx[0], cls, *rest)).astype(acc) * weight_of(cls))
        return select(taken, value, zero) if taken is not None else value

    def taken_weight(idx: Index, r: Results) -> Expr:
        cls, taken = pick(idx)
        return select(taken, weight_of(cls), zero) if taken is not None else weight_of(cls)

    stages = [Stage("sum", acc, loss)]
    if attrs["reduction"] == "mean":
        stages.append(Stage("sum", acc, taken_weight))

    def value(idx: Index, r: Results) -> Expr:
        return r[0] / r[1] if attrs["reduction"] == "mean" else r[0]

    def where(idx: Index) -> tuple[Expr, ...]:
        return () if axes else tuple(idx[a] for a in range(ndim))

    result = storer(outputs[0], epilogue, where, value)
    return [reduction_kernel(ctx, "nll_loss", shape, axes, stages, result=result)]


register(OpDef(
    "NegativeLogLikelihoodLoss", _nll_rule, negative_log_likelihood_loss,
    row_reduction_lowerings(negative_log_likelihood_loss_template, _rows),
    attrs={"reduction": "mean", "ignore_index": None}, kind=OPAQUE, num_inputs=(2, 3),
    weights=(2,),
))  # fmt: skip
