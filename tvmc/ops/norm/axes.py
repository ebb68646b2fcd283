"""LpNormalization (along one axis) and MeanVarianceNormalization (over listed axes), without
scale or shift. One row-reduction template each: the statistics as stages, then an element pass.

Zero rows: LpNormalization gives 0 where the norm is 0 (as onnxruntime does; the ONNX reference
would divide by zero). MeanVarianceNormalization divides by sqrt(var) + 1e-9, the epsilon of the
ONNX function body, so a constant row gives 0, not NaN.
"""

from __future__ import annotations

import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, const, fabs, select, sqrt
from tvmc.ops.common import normalize_axis
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TensorRef
from tvmc.ops.norm.layer import moments
from tvmc.ops.reduction.reduce import listed_axes, one_axis, reduce_axes
from tvmc.ops.reduction.softmax import element_store, float_input, wide
from tvmc.ops.registry import OPAQUE, REQUIRED, OpDef
from tvmc.ops.schedule.reduction import (
    Index,
    Results,
    Stage,
    accumulator_dtype,
    loader,
    reduction_kernel,
    row_reduction_lowerings,
)

LP_ORDERS = (1, 2)
MVN_EPSILON = 1e-9  # added to the standard deviation, as in the ONNX function body


# ---- LpNormalization --------------------------------------------------------------------------
def _lp_norm_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x = types[0]
    float_input("LpNormalization", x)
    normalize_axis(attrs["axis"], x.ndim, "LpNormalization")
    if attrs["p"] not in LP_ORDERS:
        raise ValueError(f"LpNormalization p must be 1 or 2, got {attrs['p']}")
    return [x]


def lp_normalization(attrs, x):
    """x divided by its L1 (p=1) or L2 (p=2) norm along `axis`; 0 where the norm is 0."""
    axis = normalize_axis(attrs["axis"], x.ndim)
    x64 = wide(x)
    if attrs["p"] == 1:
        norm = np.sum(np.abs(x64), axis=axis, keepdims=True)
    else:
        norm = np.sqrt(np.sum(np.square(x64), axis=axis, keepdims=True))
    norm = np.broadcast_to(norm, x.shape)
    return np.divide(x64, norm, out=np.zeros_like(x64), where=norm != 0).astype(x.dtype)


def lp_normalization_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per row along `axis`: the sum of |x| or x^2, its inverse norm (0 for a zero row), then x
    times it."""
    x = inputs[0]
    axis = int(attrs["axis"]) % x.type.ndim
    acc = accumulator_dtype(x.dtype)
    load = loader(x, acc)
    l1 = attrs["p"] == 1

    def term(idx: Index, r: Results) -> Expr:
        v = load(idx, r)
        return fabs(v) if l1 else v * v

    def inverse_norm(v: Expr) -> Expr:
        zero = const(0.0, acc)
        return select(v.eq(zero), zero, const(1.0, acc) / (v if l1 else sqrt(v)))

    def value(idx: Index, r: Results) -> Expr:
        return load(idx, r) * r[0]

    stages = [Stage("sum", acc, term, inverse_norm)]
    element = element_store(outputs[0], x.type.ndim, epilogue, value)
    return [reduction_kernel(ctx, "lp_norm", x.shape, (axis,), stages, element=element)]


# ---- MeanVarianceNormalization ----------------------------------------------------------------
def _mvn_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    x = types[0]
    float_input("MeanVarianceNormalization", x)
    reduce_axes(attrs, x.ndim, "MeanVarianceNormalization")
    return [x]


def mean_variance_normalization(attrs, x):
    """(x - mean) / (sqrt(var) + 1e-9) over `axes`."""
    axes = reduce_axes(attrs, x.ndim, "MeanVarianceNormalization")
    x64 = wide(x)
    mean = np.mean(x64, axis=axes, keepdims=True)
    std = np.sqrt(np.mean(np.square(x64 - mean), axis=axes, keepdims=True))
    return ((x64 - mean) / (std + MVN_EPSILON)).astype(x.dtype)


def mean_variance_normalization_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per row over `axes`: mean, 1/(std + 1e-9), then (x - mean) times it."""
    x = inputs[0]
    axes = reduce_axes(attrs, x.type.ndim, "MeanVarianceNormalization")
    acc = accumulator_dtype(x.dtype)
    load = loader(x, acc)
    count = math.prod(x.shape[a] for a in axes)
    mean, centred = moments(load, acc, count, 0.0)

    def inverse_std(v: Expr) -> Expr:
        std = sqrt(v / const(count, acc))
        return const(1.0, acc) / (std + const(MVN_EPSILON, acc))

    def value(idx: Index, r: Results) -> Expr:
        return (load(idx, r) - r[0]) * r[1]

    stages = [mean, Stage("sum", acc, centred.term, inverse_std)]
    element = element_store(outputs[0], x.type.ndim, epilogue, value)
    return [reduction_kernel(ctx, "mvn", x.shape, axes, stages, element=element)]


DEFINITIONS = [
    OpDef("LpNormalization", _lp_norm_rule, lp_normalization,
          row_reduction_lowerings(lp_normalization_template, one_axis),
          attrs={"axis": REQUIRED, "p": 2}, kind=OPAQUE),
    OpDef("MeanVarianceNormalization", _mvn_rule, mean_variance_normalization,
          row_reduction_lowerings(mean_variance_normalization_template, listed_axes),
          attrs={"axes": REQUIRED}, kind=OPAQUE),
]  # fmt: skip
