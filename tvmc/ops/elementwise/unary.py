"""Elementwise ops of one input: each op's numpy reference and kernel IR expression side by side.

`unary(name, reference, ir, doc=...)` makes the OpDef: `reference(attrs, x)` on numpy arrays
(constant folding and tests), `ir(attrs, x)` on one kernel IR element (its compute; fuses with
its neighbours on every target). References compute in float64 where float32 would lose bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import (
    Expr,
    erf,
    exp,
    expm1,
    fabs,
    floor,
    log,
    maximum,
    minimum,
    round_even,
    select,
    sigmoid,
    sqrt,
    tanh,
)
from tvmc.kernel import ceil as ceil_
from tvmc.kernel.expr import is_float
from tvmc.ops.common import FLOAT_DTYPES, INT_DTYPES, same_as_first, unary_rule
from tvmc.ops.elementwise.literals import literal, zero
from tvmc.ops.lowering import Accessor, Attrs, TensorRef, computed
from tvmc.ops.registry import ELEMENTWISE, InferRule, OpDef

Reference = Callable[[Attrs, np.ndarray], np.ndarray]
IR = Callable[[Attrs, Expr], Expr]


def unary(
    name: str,
    reference: Reference,
    ir: IR,
    *,
    doc: str,
    attrs: dict[str, Any] | None = None,
    infer: InferRule = same_as_first,
) -> OpDef:
    """The OpDef of one-input elementwise op `name`."""

    def compute(
        attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
    ) -> list[Accessor]:
        (x,) = inputs
        return [lambda idx: ir(attrs, x.read(idx))]

    return OpDef(name, infer, reference, computed(compute), dict(attrs or {}), ELEMENTWISE,
                 doc=doc)  # fmt: skip


_erf = np.frompyfunc(math.erf, 1, 1)


def erf_reference(x: np.ndarray) -> np.ndarray:
    """Exact erf (math.erf per element): a reference, so precision beats speed."""
    return np.asarray(_erf(x.astype(np.float64)), dtype=np.float64).astype(x.dtype)


def wide_reference(fn: Callable[[np.ndarray], np.ndarray]) -> Reference:
    """A reference computing `fn` in float64, rounded back to the input's dtype (NaN, inf and
    overflow as numpy gives them, without warnings)."""

    def reference(attrs: Attrs, x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(x.astype(np.float64)).astype(x.dtype)

    return reference


def wide_with_attrs(fn: Callable[[Attrs, np.ndarray], np.ndarray]) -> Reference:
    """`wide_reference` for a function of the attributes and x."""

    def reference(attrs: Attrs, x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(attrs, x.astype(np.float64)).astype(x.dtype)

    return reference


def in_float32(ir: IR) -> IR:
    """`ir` computed in float32 for a float16 input, rounded once at the end."""

    def wrapped(attrs: Attrs, x: Expr) -> Expr:
        if x.dtype != "float16":
            return ir(attrs, x)
        return ir(attrs, x.astype("float32")).astype("float16")

    return wrapped


# ---- activations ---------------------------------------------------------------------------------
def _elu(attrs: Attrs, x: Expr) -> Expr:
    negative = exp(minimum(x, zero(x))) - literal(1, x.dtype)  # exp of min(x, 0) cannot overflow
    return select(x > zero(x), x, literal(attrs["alpha"], x.dtype) * negative)


def _clamp01(x: Expr) -> Expr:
    return minimum(maximum(x, zero(x)), literal(1, x.dtype))


def _gelu_reference(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    if attrs["approximate"] == "tanh":
        inner = math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)
        return (0.5 * x64 * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x64 * (1 + erf_reference(x64 / math.sqrt(2)))).astype(x.dtype)


def _gelu(attrs: Attrs, x: Expr) -> Expr:
    # The tanh form as x * sigmoid(2z): no 1 + tanh cancellation, so for x << 0 it keeps a small
    # relative error where 1 + tanh(z) would return tanh's rounding error (tanh stops at 1-2**-22).
    if attrs["approximate"] == "tanh":
        cubic = literal(0.044715, x.dtype) * x * x * x
        return x * sigmoid(literal(2 * math.sqrt(2 / math.pi), x.dtype) * (x + cubic))
    half, one = literal(0.5, x.dtype), literal(1, x.dtype)
    return half * x * (one + erf(x * literal(math.sqrt(0.5), x.dtype)))


ACTIVATIONS = [
    unary("Relu", lambda a, x: np.maximum(x, np.zeros((), x.dtype)),
          lambda a, x: select(x < zero(x), zero(x), x),  # a select: NaN passes as in numpy
          doc="max(x, 0)."),
    unary("LeakyRelu", lambda a, x: np.where(x >= 0, x, x * x.dtype.type(a["alpha"])),
          lambda a, x: select(x >= zero(x), x, x * literal(a["alpha"], x.dtype)),
          attrs={"alpha": 0.01}, doc="x where x >= 0, else alpha * x."),
    unary("Elu",
          lambda a, x: np.where(x > 0, x, x.dtype.type(a["alpha"]) * np.expm1(np.minimum(x, 0))),
          _elu, attrs={"alpha": 1.0}, doc="x where x > 0, else alpha * (e**x - 1)."),
    unary("Sigmoid", wide_reference(lambda x: 1 / (1 + np.exp(-x))), lambda a, x: sigmoid(x),
          doc="1 / (1 + e**-x)."),
    unary("HardSigmoid",
          lambda a, x: np.clip(x * x.dtype.type(a["alpha"]) + x.dtype.type(a["beta"]), 0, 1),
          lambda a, x: _clamp01(x * literal(a["alpha"], x.dtype) + literal(a["beta"], x.dtype)),
          attrs={"alpha": 0.2, "beta": 0.5}, doc="clamp(alpha * x + beta, 0, 1)."),
    unary("HardSwish",
          lambda a, x: x * np.clip(x * x.dtype.type(1 / 6) + x.dtype.type(0.5), 0, 1),
          lambda a, x: x * _clamp01(x * literal(1 / 6, x.dtype) + literal(0.5, x.dtype)),
          doc="x * clamp(x / 6 + 1/2, 0, 1)."),
    unary("Softplus", lambda a, x: np.logaddexp(x, np.zeros((), x.dtype)),
          lambda a, x: maximum(x, zero(x)) + log(literal(1, x.dtype) + exp(-fabs(x))),
          doc="log(1 + e**x), computed as max(x, 0) + log(1 + e**-|x|) (no overflow)."),
    unary("Tanh", lambda a, x: np.tanh(x), lambda a, x: tanh(x), doc="Hyperbolic tangent."),
    unary("Erf", lambda a, x: erf_reference(x), lambda a, x: erf(x), doc="The error function."),
    unary("Gelu", _gelu_reference, _gelu, attrs={"approximate": "none"},
          doc="x/2 * (1 + erf(x / sqrt 2)), or with approximate='tanh' x * sigmoid(2z)."),
]  # fmt: skip


# ---- activations of ONNX's later opsets (float16 computes in float32) ----------------------------
# e**x - 1 as expm1: exp(x) - 1 would keep no digits of a result near 0
def _celu(attrs: Attrs, x: Expr) -> Expr:
    alpha = literal(attrs["alpha"], x.dtype)
    negative = alpha * expm1(x / alpha)
    return maximum(x, zero(x)) + minimum(zero(x), negative)  # the spec's formula, any alpha


def _selu(attrs: Attrs, x: Expr) -> Expr:
    alpha, gamma = literal(attrs["alpha"], x.dtype), literal(attrs["gamma"], x.dtype)
    negative = alpha * expm1(minimum(x, zero(x)))  # alpha * e**x - alpha; cannot overflow
    return select(x > zero(x), gamma * x, gamma * negative)


def _mish(attrs: Attrs, x: Expr) -> Expr:
    # tanh(log(1 + u)) = n / (n + 2) with u = e**x, n = u * (u + 2): no cancellation for x << 0
    # (where log(1 + u) would round to 0); past x = 20 the quotient is 1 (and u overflows later)
    u = exp(x)
    n = u * (u + literal(2, x.dtype))
    return select(x > literal(20, x.dtype), x, x * n / (n + literal(2, x.dtype)))


def _shrink_reference(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    """Integers compute in float64 and truncate back (as the ONNX reference does)."""
    work = x if x.dtype.kind == "f" else x.astype(np.float64)
    lambd, bias = work.dtype.type(attrs["lambd"]), work.dtype.type(attrs["bias"])
    out = np.where(work < -lambd, work + bias, np.where(work > lambd, work - bias, 0))
    return out.astype(x.dtype) if x.dtype.kind == "f" else out.astype(np.int64).astype(x.dtype)


def _shrink(attrs: Attrs, x: Expr) -> Expr:
    if not is_float(x.dtype):  # through int64, so a negative result wraps into unsigned types
        return _shrink(attrs, x.astype("float64")).astype("int64").astype(x.dtype)
    lambd, bias = literal(attrs["lambd"], x.dtype), literal(attrs["bias"], x.dtype)
    inner = select(x > lambd, x - bias, zero(x))
    return select(x < zero(x) - lambd, x + bias, inner)


LATER_ACTIVATIONS = [
    unary("Celu",
          wide_with_attrs(lambda a, x: np.maximum(0, x)
                          + np.minimum(0, a["alpha"] * np.expm1(x / a["alpha"]))),
          in_float32(_celu), attrs={"alpha": 1.0}, infer=unary_rule("Celu", FLOAT_DTYPES, "float"),
          doc="max(0, x) + min(0, alpha * (e**(x / alpha) - 1))."),
    unary("Selu",
          wide_with_attrs(lambda a, x: np.where(
              x > 0, a["gamma"] * x, a["gamma"] * a["alpha"] * np.expm1(x))),
          in_float32(_selu), attrs={"alpha": 1.67326319217681884765625,
                                    "gamma": 1.05070102214813232421875},
          infer=unary_rule("Selu", FLOAT_DTYPES, "float"),
          doc="gamma * x where x > 0, else gamma * (alpha * e**x - alpha)."),
    unary("ThresholdedRelu", lambda a, x: np.where(x > x.dtype.type(a["alpha"]), x, 0),
          lambda a, x: select(x > literal(a["alpha"], x.dtype), x, zero(x)), attrs={"alpha": 1.0},
          infer=unary_rule("ThresholdedRelu", FLOAT_DTYPES, "float"),
          doc="x where x > alpha, else 0."),
    unary("Softsign", wide_reference(lambda x: x / (1 + np.abs(x))),
          in_float32(lambda a, x: x / (literal(1, x.dtype) + fabs(x))),
          infer=unary_rule("Softsign", FLOAT_DTYPES, "float"), doc="x / (1 + |x|)."),
    unary("Shrink", _shrink_reference, in_float32(_shrink), attrs={"lambd": 0.5, "bias": 0.0},
          infer=unary_rule("Shrink", (*FLOAT_DTYPES, *INT_DTYPES), "numeric"),
          doc="x + bias where x < -lambd, x - bias where x > lambd, else 0 (integers compute "
              "in float64 and truncate)."),
    unary("Mish", wide_reference(lambda x: x * np.tanh(np.logaddexp(0, x))), in_float32(_mish),
          infer=unary_rule("Mish", FLOAT_DTYPES, "float"),
          doc="x * tanh(log(1 + e**x)), computed as x * n / (n + 2) with n = e**x (e**x + 2)."),
    unary("Swish", wide_with_attrs(lambda a, x: x / (1 + np.exp(-a["alpha"] * x))),
          in_float32(lambda a, x: x * sigmoid(literal(a["alpha"], x.dtype) * x)),
          attrs={"alpha": 1.0}, infer=unary_rule("Swish", FLOAT_DTYPES, "float"),
          doc="x * sigmoid(alpha * x)."),
]  # fmt: skip


# ---- arithmetic and rounding ---------------------------------------------------------------------
def _neg(attrs: Attrs, x: Expr) -> Expr:
    # floats multiply by -1 so that -(0.0) is -0.0 as in numpy
    return x * literal(-1, x.dtype) if is_float(x.dtype) else zero(x) - x


def _abs(attrs: Attrs, x: Expr) -> Expr:
    if is_float(x.dtype):
        return fabs(x)
    return x if x.dtype.startswith("uint") else select(x < zero(x), zero(x) - x, x)


def _clip_reference(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    lo, hi = attrs["min"], attrs["max"]
    out = x
    if lo is not None:
        out = np.maximum(out, x.dtype.type(lo))
    if hi is not None:
        out = np.minimum(out, x.dtype.type(hi))
    return out


def _clip(attrs: Attrs, x: Expr) -> Expr:
    lo, hi = attrs["min"], attrs["max"]  # selects keep NaN as numpy does
    if lo is not None:
        x = select(x < literal(lo, x.dtype), literal(lo, x.dtype), x)
    if hi is not None:
        x = select(x > literal(hi, x.dtype), literal(hi, x.dtype), x)
    return x


def _sign(attrs: Attrs, x: Expr) -> Expr:
    one = literal(1, x.dtype)
    if x.dtype.startswith("uint"):
        return select(x > zero(x), one, zero(x))
    rest = x + zero(x) if is_float(x.dtype) else zero(x)  # -0 + 0 is +0, NaN stays NaN (numpy's)
    return select(x > zero(x), one, select(x < zero(x), literal(-1, x.dtype), rest))


def _is_inf(attrs: Attrs, x: Expr) -> Expr:
    found = literal(False, "bool")
    if attrs["detect_positive"]:
        found = x.eq(literal(math.inf, x.dtype))
    if attrs["detect_negative"]:
        negative = x.eq(literal(-math.inf, x.dtype))
        found = found | negative if attrs["detect_positive"] else negative
    return found


def _is_inf_reference(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    positive = np.isposinf(x) if attrs["detect_positive"] else np.zeros(x.shape, bool)
    return positive | (np.isneginf(x) if attrs["detect_negative"] else False)


ARITHMETIC = [
    unary("Sqrt", lambda a, x: np.sqrt(x), lambda a, x: sqrt(x), doc="Square root."),
    unary("Exp", lambda a, x: np.exp(x), lambda a, x: exp(x), doc="e**x."),
    unary("Log", lambda a, x: np.log(x), lambda a, x: log(x), doc="Natural logarithm."),
    unary("Neg", lambda a, x: np.negative(x), _neg, doc="-x."),
    unary("Abs", lambda a, x: np.abs(x), _abs,
          doc="|x| (unsigned integers are their own absolute value)."),
    unary("Reciprocal", lambda a, x: np.reciprocal(x), lambda a, x: literal(1, x.dtype) / x,
          doc="1 / x."),
    unary("Floor", lambda a, x: np.floor(x), lambda a, x: floor(x),
          doc="Round towards minus infinity."),
    unary("Ceil", lambda a, x: np.ceil(x), lambda a, x: ceil_(x),
          doc="Round towards plus infinity."),
    unary("Not", lambda a, x: np.logical_not(x), lambda a, x: ~x, doc="Logical not of a bool."),
    unary("Identity", lambda a, x: x.copy(), lambda a, x: x,
          doc="x itself (the import passes usually remove Identity before lowering)."),
    unary("Clip", _clip_reference, _clip, attrs={"min": None, "max": None},
          doc="x clamped to the optional [min, max] (attributes whatever the opset: the "
              "frontend reads them from inputs)."),
    unary("Sign", lambda a, x: np.sign(x), _sign,
          infer=unary_rule("Sign", (*FLOAT_DTYPES, *INT_DTYPES), "numeric"),
          doc="1, 0 or -1 by the sign of x (NaN stays NaN, -0 gives 0)."),
    unary("Round", lambda a, x: np.round(x), lambda a, x: round_even(x),
          infer=unary_rule("Round", FLOAT_DTYPES, "float"),
          doc="The nearest integer, halves to even."),
    unary("IsInf", _is_inf_reference, _is_inf, attrs={"detect_positive": 1, "detect_negative": 1},
          infer=unary_rule("IsInf", FLOAT_DTYPES, "float", "bool"),
          doc="Whether x is +inf (detect_positive) or -inf (detect_negative)."),
    unary("IsNaN", lambda a, x: np.isnan(x), lambda a, x: x.ne(x),
          infer=unary_rule("IsNaN", FLOAT_DTYPES, "float", "bool"), doc="Whether x is NaN."),
]  # fmt: skip

DEFINITIONS = [*ACTIVATIONS, *LATER_ACTIVATIONS, *ARITHMETIC]
