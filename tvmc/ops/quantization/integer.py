"""The pieces the integer ops are built from, beside MatMul and Conv (the frontend composes them):

- `Requantize(acc, multiplier, zero_point)`: saturate(round_even(float32(acc) * multiplier) +
  zero_point), the output stage of QLinearMatMul and QLinearConv as onnxruntime computes it
  (MlasRequantizeOutput: the int32 sum converted to float32, times the float32 multiplier
  a_scale * b_scale / y_scale, rounded to even, saturated);
- `DynamicQuantizeParams(min, max)`: DynamicQuantizeLinear's uint8 scale and zero point from the
  data's range widened to include 0 (onnxruntime's GetQuantizationParameter, step for step);
- `accumulation_dtype`: the float in which a ConvInteger / QLinearConv sum is exact.

Why MatMulInteger is an int32 MatMul but ConvInteger a float Conv: MatMul has int32 templates on
both targets and int32 sums are exact (past int32 they wrap like onnxruntime's in practice, but
the codegen marks signed int adds nsw, so LLVM does not promise it); Conv's templates are float
only, so the integer operands are converted to a float in which every product and partial sum is
an integer it represents exactly, which makes every add, multiply and fma exact in any order
(the tiling, split-K and vector order of the templates then cannot change the result).
"""

from __future__ import annotations

import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, cast, select
from tvmc.ops.common import broadcasts_to
from tvmc.ops.elementwise.literals import literal, operand
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.quantization.common import (
    EXACT_FLOAT32,
    EXACT_FLOAT64,
    check_quant_dtype,
    int_range,
    round_saturate,
    round_saturate_reference,
)
from tvmc.ops.registry import BROADCAST, ELEMENTWISE, OpDef


# ---- Requantize ----------------------------------------------------------------------------------
def _requantize_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    acc, multiplier, zero_point = types
    if multiplier.dtype != "float32":
        raise ValueError(f"Requantize's multiplier must be float32, got {multiplier.dtype}")
    check_quant_dtype(zero_point.dtype, "the output zero point")
    for what, t in (("multiplier", multiplier), ("zero point", zero_point)):
        if not broadcasts_to(t.shape, acc.shape):
            raise ValueError(f"the {what} {list(t.shape)} does not broadcast to {list(acc.shape)}")
    return [TensorType(acc.shape, zero_point.dtype)]


def requantize(attrs: Attrs, acc, multiplier, zero_point) -> np.ndarray:
    """saturate(round_even(float32(acc) * multiplier) + zero_point), typed like zero_point."""
    value = acc.astype(np.float32) * multiplier.astype(np.float32)
    return round_saturate_reference(value, zero_point, zero_point.dtype.name)


def requantize_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """One element: the sum converted to float32 once, one float32 product, rounded."""
    shape, dtype = out_types[0].shape, out_types[0].dtype
    read_acc, read_m, read_z = (operand(r, shape) for r in inputs)

    def read(idx: Indices) -> Expr:
        value = cast("float32", read_acc(idx)) * read_m(idx)
        return round_saturate(value, read_z(idx), dtype)

    return [read]


# ---- DynamicQuantizeParams -----------------------------------------------------------------------
_QMIN, _QMAX = 0, 255  # DynamicQuantizeLinear quantizes to uint8


def _params_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    if any(t.dtype != "float32" or t.size != 1 for t in types):
        raise ValueError(f"needs float32 scalars (min, max), got {[str(t) for t in types]}")
    return [TensorType((), "float32"), TensorType((), "uint8")]


def dynamic_quantize_params(attrs: Attrs, lo: np.ndarray, hi: np.ndarray):
    """(scale, zero point) for uint8 from the data's min and max, their range widened to 0."""
    f = np.float32
    lo, hi = lo.astype(f).reshape(()), hi.astype(f).reshape(())
    lo = np.where(f(0) < lo, f(0), lo)  # std::min(lo, 0) and std::max(hi, 0), NaN kept
    hi = np.where(hi < f(0), f(0), hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(hi == lo, f(1), (hi - lo) / f(_QMAX - _QMIN)).astype(f)
        initial = (f(_QMIN) - lo / scale).astype(f)
    clamped = np.where(initial < f(_QMAX), initial, f(_QMAX))
    clamped = np.where(f(_QMIN) < clamped, clamped, f(_QMIN))
    return scale, np.rint(clamped).astype(np.uint8)


def dynamic_quantize_params_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """The reference's float32 steps as two scalar expressions."""
    zero_index = tuple(literal(0, "int32") for _ in inputs[0].shape)

    def scale_of(lo: Expr, hi: Expr) -> Expr:
        zero, one = literal(0, "float32"), literal(1, "float32")
        lo, hi = select(zero < lo, zero, lo), select(hi < zero, zero, hi)
        return select(hi.eq(lo), one, (hi - lo) / literal(_QMAX - _QMIN, "float32"))

    def read_scale(idx: Indices) -> Expr:
        return scale_of(inputs[0].read(zero_index), inputs[1].read(zero_index))

    def read_zero(idx: Indices) -> Expr:
        lo = inputs[0].read(zero_index)
        zero, qmin, qmax = (literal(v, "float32") for v in (0, _QMIN, _QMAX))
        initial = qmin - select(zero < lo, zero, lo) / read_scale(idx)
        clamped = select(initial < qmax, initial, qmax)
        clamped = select(qmin < clamped, clamped, qmin)
        return round_saturate(clamped, None, "uint8")  # in range already: the cast

    return [read_scale, read_zero]


# ---- exact accumulation of integer convolutions --------------------------------------------------
def offset_bound(dtype: str, zero_point: np.ndarray | None, runtime: bool = False) -> int:
    """The largest |q - zero_point| for q of `dtype`: over the constant zero point's values (None:
    no zero point, 0), or over every value of `dtype` when the zero point is a `runtime` value."""
    lo, hi = int_range(dtype)
    if runtime:
        return hi - lo
    z = np.zeros(1, np.int64) if zero_point is None else zero_point.astype(np.int64)
    return int(np.max(np.maximum(np.abs(lo - z), np.abs(hi - z))))


def accumulation_dtype(
    x_bound: int, weight_sums: int | None, terms: int, w_bound: int, bias_bound: int
) -> str:
    """float32 when every product and partial sum of a conv (plus its bias) is an integer of
    magnitude at most 2**24, else float64 (2**53); ValueError when neither holds.

    A sum is bounded by x_bound times the largest per-channel sum of |w - zero_point| when the
    weights are constant (`weight_sums`), else by terms * x_bound * w_bound.
    """
    weights = weight_sums if weight_sums is not None else terms * w_bound
    bound = x_bound * weights + bias_bound
    if bound <= EXACT_FLOAT32:
        return "float32"
    if bound <= EXACT_FLOAT64:
        return "float64"
    raise ValueError(f"integer sums up to {bound} are not exact in float64")


def weight_sums(w: np.ndarray, zero_point: np.ndarray | None) -> int:
    """The largest sum of |w - zero_point| over one output channel (axis 0) of constant weights."""
    wide = w.astype(np.int64)
    if zero_point is not None:
        wide = wide - zero_point.astype(np.int64).reshape(-1, *[1] * (w.ndim - 1))
    return int(np.abs(wide).reshape(w.shape[0], -1).sum(axis=1).max(initial=0))


def conv_terms(w_shape: tuple[int, ...]) -> int:
    """Products summed into one output of a conv with weights `w_shape` (bias aside)."""
    return math.prod(w_shape[1:])


DEFINITIONS = [
    OpDef("Requantize", _requantize_rule, requantize, computed(requantize_compute), {},
          BROADCAST, (3, 3),
          doc="saturate(round_even(float32(acc) * multiplier) + zero_point): the output stage "
              "of QLinearMatMul and QLinearConv (tvmc's own op)."),
    OpDef("DynamicQuantizeParams", _params_rule, dynamic_quantize_params,
          computed(dynamic_quantize_params_compute), {}, ELEMENTWISE, (2, 2),
          doc="DynamicQuantizeLinear's uint8 scale and zero point from the data's min and max "
              "(tvmc's own op)."),
]  # fmt: skip
