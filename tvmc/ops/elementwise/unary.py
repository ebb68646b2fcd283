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
    fabs,
    floor,
    log,
    maximum,
    minimum,
    select,
    sigmoid,
    sqrt,
    tanh,
)
from tvmc.kernel import ceil as ceil_
from tvmc.kernel.expr import is_float
from tvmc.ops.common import same_as_first
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


def _wide(fn: Callable[[np.ndarray], np.ndarray]) -> Reference:
    """A reference computing `fn` in float64, rounded back to the input's dtype."""
    return lambda attrs, x: fn(x.astype(np.float64)).astype(x.dtype)


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
    unary("Sigmoid", _wide(lambda x: 1 / (1 + np.exp(-x))), lambda a, x: sigmoid(x),
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
]  # fmt: skip

DEFINITIONS = [*ACTIVATIONS, *ARITHMETIC]
