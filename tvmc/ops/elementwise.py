"""Elementwise and broadcasting ops: activations, arithmetic, comparisons, casts."""

from __future__ import annotations

import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import broadcast_rule, broadcast_shape, same_as_first
from tvmc.ops.registry import BROADCAST, ELEMENTWISE, REQUIRED, register

_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """Exact erf (math.erf per element): a reference, so precision beats speed."""
    return np.asarray(_erf(x.astype(np.float64)), dtype=np.float64).astype(x.dtype)


# ---- unary ---------------------------------------------------------------------------------------
@register("Relu", same_as_first, kind=ELEMENTWISE)
def relu(attrs, x):
    return np.maximum(x, np.zeros((), x.dtype))


@register("LeakyRelu", same_as_first, attrs={"alpha": 0.01}, kind=ELEMENTWISE)
def leaky_relu(attrs, x):
    return np.where(x >= 0, x, x * x.dtype.type(attrs["alpha"]))


@register("Elu", same_as_first, attrs={"alpha": 1.0}, kind=ELEMENTWISE)
def elu(attrs, x):
    return np.where(x > 0, x, x.dtype.type(attrs["alpha"]) * np.expm1(np.minimum(x, 0)))


@register("Sigmoid", same_as_first, kind=ELEMENTWISE)
def sigmoid(attrs, x):
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


@register("HardSigmoid", same_as_first, attrs={"alpha": 0.2, "beta": 0.5}, kind=ELEMENTWISE)
def hard_sigmoid(attrs, x):
    return np.clip(x * x.dtype.type(attrs["alpha"]) + x.dtype.type(attrs["beta"]), 0, 1)


@register("HardSwish", same_as_first, kind=ELEMENTWISE)
def hard_swish(attrs, x):
    return x * np.clip(x * x.dtype.type(1 / 6) + x.dtype.type(0.5), 0, 1)


@register("Softplus", same_as_first, kind=ELEMENTWISE)
def softplus(attrs, x):
    return np.logaddexp(x, np.zeros((), x.dtype))


@register("Tanh", same_as_first, kind=ELEMENTWISE)
def tanh(attrs, x):
    return np.tanh(x)


@register("Erf", same_as_first, kind=ELEMENTWISE)
def erf_op(attrs, x):
    return erf(x)


@register("Gelu", same_as_first, attrs={"approximate": "none"}, kind=ELEMENTWISE)
def gelu(attrs, x):
    x64 = x.astype(np.float64)
    if attrs["approximate"] == "tanh":
        inner = math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)
        return (0.5 * x64 * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x64 * (1 + erf(x64 / math.sqrt(2)))).astype(x.dtype)


@register("Sqrt", same_as_first, kind=ELEMENTWISE)
def sqrt(attrs, x):
    return np.sqrt(x)


@register("Exp", same_as_first, kind=ELEMENTWISE)
def exp(attrs, x):
    return np.exp(x)


@register("Log", same_as_first, kind=ELEMENTWISE)
def log(attrs, x):
    return np.log(x)


@register("Neg", same_as_first, kind=ELEMENTWISE)
def neg(attrs, x):
    return np.negative(x)


@register("Abs", same_as_first, kind=ELEMENTWISE)
def abs_(attrs, x):
    return np.abs(x)


@register("Reciprocal", same_as_first, kind=ELEMENTWISE)
def reciprocal(attrs, x):
    return np.reciprocal(x)


@register("Floor", same_as_first, kind=ELEMENTWISE)
def floor(attrs, x):
    return np.floor(x)


@register("Ceil", same_as_first, kind=ELEMENTWISE)
def ceil(attrs, x):
    return np.ceil(x)


@register("Not", same_as_first, kind=ELEMENTWISE)
def not_(attrs, x):
    return np.logical_not(x)


@register("Identity", same_as_first, kind=ELEMENTWISE)
def identity(attrs, x):
    return x.copy()


@register("Clip", same_as_first, attrs={"min": None, "max": None}, kind=ELEMENTWISE)
def clip(attrs, x):
    """min/max are attributes here whatever the opset: the frontend reads them from inputs."""
    lo, hi = attrs["min"], attrs["max"]
    out = x
    if lo is not None:
        out = np.maximum(out, x.dtype.type(lo))
    if hi is not None:
        out = np.minimum(out, x.dtype.type(hi))
    return out


def _cast_rule(attrs, types):
    return [TensorType(types[0].shape, attrs["to"])]


@register("Cast", _cast_rule, attrs={"to": REQUIRED}, kind=ELEMENTWISE)
def cast(attrs, x):
    return x.astype(attrs["to"])


# ---- binary and n-ary, with broadcasting ---------------------------------------------------------
def _binary(name, fn, out_dtype=None):
    register(name, broadcast_rule(name, out_dtype), kind=BROADCAST, num_inputs=2)(
        lambda attrs, a, b: fn(a, b)
    )


def _int_div(a, b):
    if np.issubdtype(a.dtype, np.integer):  # ONNX integer Div truncates toward zero, like C
        return (np.trunc(a / np.where(b == 0, 1, b))).astype(a.dtype)
    return a / b


def _pow(a, b):
    return np.power(a, b)


_binary("Add", np.add)
_binary("Sub", np.subtract)
_binary("Mul", np.multiply)
_binary("Div", _int_div)
_binary("Equal", np.equal, "bool")
_binary("Less", np.less, "bool")
_binary("Greater", np.greater, "bool")
_binary("LessOrEqual", np.less_equal, "bool")
_binary("GreaterOrEqual", np.greater_equal, "bool")
_binary("And", np.logical_and, "bool")
_binary("Or", np.logical_or, "bool")


def _pow_rule(attrs, types):
    return [TensorType(broadcast_shape(types[0].shape, types[1].shape), types[0].dtype)]


@register("Pow", _pow_rule, kind=BROADCAST, num_inputs=2)
def pow_(attrs, a, b):
    """The exponent may have another dtype than the base (ONNX allows it); result: the base's."""
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


@register("PRelu", broadcast_rule("PRelu"), kind=BROADCAST, num_inputs=2)
def prelu(attrs, x, slope):
    return np.where(x >= 0, x, x * slope)


def _variadic(name, fn):
    register(name, broadcast_rule(name), kind=BROADCAST, num_inputs=(1, 1 << 16))(
        lambda attrs, *xs: fn(xs)
    )


def _mean(xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total / total.dtype.type(len(xs))


def _fold(fn):
    def apply(xs):
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return np.broadcast_to(out, np.broadcast_shapes(*(x.shape for x in xs)))

    return apply


_variadic("Sum", _fold(np.add))
_variadic("Max", _fold(np.maximum))
_variadic("Min", _fold(np.minimum))
_variadic(
    "Mean", lambda xs: np.broadcast_to(_mean(xs), np.broadcast_shapes(*(x.shape for x in xs)))
)


def _where_rule(attrs, types):
    cond, x, y = types
    if cond.dtype != "bool":
        raise ValueError(f"Where condition must be bool, got {cond.dtype}")
    if x.dtype != y.dtype:
        raise ValueError(f"Where branches must share one dtype, got {x.dtype} and {y.dtype}")
    return [TensorType(broadcast_shape(cond.shape, x.shape, y.shape), x.dtype)]


@register("Where", _where_rule, kind=BROADCAST, num_inputs=3)
def where(attrs, cond, x, y):
    return np.where(cond, x, y)
