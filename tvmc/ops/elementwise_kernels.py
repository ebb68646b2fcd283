"""Computes of the elementwise and broadcasting ops (and inference BatchNormalization).

Each maps output indices to one expression over its inputs' elements, read through
`TensorRef.read` so the computes chain into one fused loop. Constant operands whose elements are
all equal become literals, which lets LLVM fold them (`x * 0.5`, `Pow(x, 2)` as `x * x`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import (
    Expr,
    const,
    erf,
    exp,
    fabs,
    floor,
    log,
    maximum,
    minimum,
    power,
    select,
    sigmoid,
    sqrt,
    tanh,
)
from tvmc.kernel import ceil as ceil_
from tvmc.kernel.expr import is_float
from tvmc.ops.lowering import Accessor, Indices, TensorRef, broadcast_read, compute
from tvmc.ops.registry import Attrs


# ---- helpers shared with tensor_kernels ----------------------------------------------------------
def literal(value: int | float | bool | np.generic, dtype: str) -> Expr:
    """`value` as a literal of `dtype`, rounded the way numpy stores it in that dtype."""
    return const(np.asarray(value).astype(dtype).item(), dtype)


def uniform_value(ref: TensorRef) -> Expr | None:
    """A literal when `ref` is a constant whose elements are all equal (NaN never is), else None."""
    v = ref.value
    if v is None or v.size == 0 or not np.all(v == v.flat[0]):
        return None
    return literal(v.flat[0], ref.dtype)


def operand(ref: TensorRef, out_shape: Sequence[int]) -> Accessor:
    """Read `ref` broadcast to `out_shape`; a uniform constant becomes a literal."""
    lit = uniform_value(ref)
    if lit is not None:
        return lambda idx: lit
    return broadcast_read(ref, out_shape)


# ---- unary ---------------------------------------------------------------------------------------
Unary = Callable[[Attrs, Expr], Expr]


def _unary(name: str) -> Callable[[Unary], Unary]:
    """Register `fn(attrs, x) -> y` as the compute of one-input op `name`."""

    def wrap(fn: Unary) -> Unary:
        @compute(name)
        def lower(
            attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
        ) -> list[Accessor]:
            (x,) = inputs
            return [lambda idx: fn(attrs, x.read(idx))]

        return fn

    return wrap


def _zero(x: Expr) -> Expr:
    return const(0, x.dtype)


@_unary("Relu")
def relu(attrs: Attrs, x: Expr) -> Expr:
    """max(x, 0), written as a select so NaN passes through as in numpy."""
    return select(x < _zero(x), _zero(x), x)


@_unary("LeakyRelu")
def leaky_relu(attrs: Attrs, x: Expr) -> Expr:
    """x where x >= 0, else alpha * x."""
    return select(x >= _zero(x), x, x * literal(attrs["alpha"], x.dtype))


@_unary("Elu")
def elu(attrs: Attrs, x: Expr) -> Expr:
    """x where x > 0, else alpha * (e**x - 1); exp of min(x, 0) never overflows."""
    negative = exp(minimum(x, _zero(x))) - literal(1, x.dtype)
    return select(x > _zero(x), x, literal(attrs["alpha"], x.dtype) * negative)


@_unary("Sigmoid")
def sigmoid_(attrs: Attrs, x: Expr) -> Expr:
    """1 / (1 + e**-x)."""
    return sigmoid(x)


def _clamp01(x: Expr) -> Expr:
    return minimum(maximum(x, _zero(x)), literal(1, x.dtype))


@_unary("HardSigmoid")
def hard_sigmoid(attrs: Attrs, x: Expr) -> Expr:
    """clamp(alpha * x + beta, 0, 1)."""
    return _clamp01(x * literal(attrs["alpha"], x.dtype) + literal(attrs["beta"], x.dtype))


@_unary("HardSwish")
def hard_swish(attrs: Attrs, x: Expr) -> Expr:
    """x * clamp(x / 6 + 1/2, 0, 1)."""
    return x * _clamp01(x * literal(1 / 6, x.dtype) + literal(0.5, x.dtype))


@_unary("Softplus")
def softplus(attrs: Attrs, x: Expr) -> Expr:
    """log(1 + e**x) as max(x, 0) + log(1 + e**-|x|), which cannot overflow."""
    return maximum(x, _zero(x)) + log(literal(1, x.dtype) + exp(-fabs(x)))


@_unary("Tanh")
def tanh_(attrs: Attrs, x: Expr) -> Expr:
    """Hyperbolic tangent."""
    return tanh(x)


@_unary("Erf")
def erf_(attrs: Attrs, x: Expr) -> Expr:
    """The error function."""
    return erf(x)


@_unary("Gelu")
def gelu(attrs: Attrs, x: Expr) -> Expr:
    """x/2 * (1 + erf(x / sqrt 2)), or with tanh: x/2 * (1 + tanh(z)) = x * sigmoid(2z).

    The sigmoid form has no 1 + tanh cancellation: for x << 0 it keeps a small relative error
    where 1 + tanh(z) would return tanh's rounding error (codegen's tanh stops at 1 - 2**-22).
    """
    if attrs["approximate"] == "tanh":
        cubic = literal(0.044715, x.dtype) * x * x * x
        return x * sigmoid(literal(2 * math.sqrt(2 / math.pi), x.dtype) * (x + cubic))
    half, one = literal(0.5, x.dtype), literal(1, x.dtype)
    return half * x * (one + erf(x * literal(math.sqrt(0.5), x.dtype)))


@_unary("Sqrt")
def sqrt_(attrs: Attrs, x: Expr) -> Expr:
    """Square root."""
    return sqrt(x)


@_unary("Exp")
def exp_(attrs: Attrs, x: Expr) -> Expr:
    """e**x."""
    return exp(x)


@_unary("Log")
def log_(attrs: Attrs, x: Expr) -> Expr:
    """Natural logarithm."""
    return log(x)


@_unary("Neg")
def neg(attrs: Attrs, x: Expr) -> Expr:
    """-x; floats multiply by -1 so that -(0.0) is -0.0 as in numpy."""
    return x * literal(-1, x.dtype) if is_float(x.dtype) else _zero(x) - x


@_unary("Abs")
def abs_(attrs: Attrs, x: Expr) -> Expr:
    """|x| (unsigned integers are their own absolute value)."""
    if is_float(x.dtype):
        return fabs(x)
    return x if x.dtype.startswith("uint") else select(x < _zero(x), _zero(x) - x, x)


@_unary("Reciprocal")
def reciprocal(attrs: Attrs, x: Expr) -> Expr:
    """1 / x."""
    return literal(1, x.dtype) / x


@_unary("Floor")
def floor_(attrs: Attrs, x: Expr) -> Expr:
    """Round towards minus infinity."""
    return floor(x)


@_unary("Ceil")
def ceil_op(attrs: Attrs, x: Expr) -> Expr:
    """Round towards plus infinity."""
    return ceil_(x)


@_unary("Not")
def not_(attrs: Attrs, x: Expr) -> Expr:
    """Logical not of a bool."""
    return ~x


@_unary("Identity")
def identity(attrs: Attrs, x: Expr) -> Expr:
    """x itself (the import passes usually remove Identity before lowering)."""
    return x


@_unary("Clip")
def clip(attrs: Attrs, x: Expr) -> Expr:
    """x clamped to the optional [min, max]; selects keep NaN as numpy does."""
    lo, hi = attrs["min"], attrs["max"]
    if lo is not None:
        x = select(x < literal(lo, x.dtype), literal(lo, x.dtype), x)
    if hi is not None:
        x = select(x > literal(hi, x.dtype), literal(hi, x.dtype), x)
    return x


@_unary("Cast")
def cast(attrs: Attrs, x: Expr) -> Expr:
    """Conversion: float to int truncates toward zero; to bool means != 0."""
    return x.astype(attrs["to"])


# ---- binary and n-ary with broadcasting ----------------------------------------------------------
Binary = Callable[[Expr, Expr], Expr]


def _broadcasting(name: str, combine: Callable[[list[Expr]], Expr]) -> None:
    """Register a compute reading every input broadcast to the output and combining them."""

    @compute(name)
    def lower(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
        reads = [operand(r, out_types[0].shape) for r in inputs]
        return [lambda idx: combine([read(idx) for read in reads])]


def _binary(name: str, fn: Binary) -> None:
    _broadcasting(name, lambda xs: fn(xs[0], xs[1]))


def _div(a: Expr, b: Expr) -> Expr:
    """a / b; integer division truncates toward zero.

    Integer divisors that make the hardware divide trap are steered away from it: 0 counts as 1
    (the reference's rule), and -1 becomes a negation (MIN / -1 overflows; it wraps here).
    """
    if is_float(a.dtype):
        return a / b
    if a.dtype.startswith("uint"):
        return a / select(b.eq(_zero(b)), literal(1, b.dtype), b)
    minus_one = b.eq(literal(-1, b.dtype))
    safe = select(b.eq(_zero(b)) | minus_one, literal(1, b.dtype), b)
    return select(minus_one, _zero(a) - a, a / safe)


_binary("Add", lambda a, b: a + b)
_binary("Sub", lambda a, b: a - b)
_binary("Mul", lambda a, b: a * b)
_binary("Div", _div)
_binary("Equal", lambda a, b: a.eq(b))
_binary("Less", lambda a, b: a < b)
_binary("Greater", lambda a, b: a > b)
_binary("LessOrEqual", lambda a, b: a <= b)
_binary("GreaterOrEqual", lambda a, b: a >= b)
_binary("And", lambda a, b: a & b)
_binary("Or", lambda a, b: a | b)
_binary("PRelu", lambda x, slope: select(x >= _zero(x), x, x * slope))


def _fold(fn: Binary) -> Callable[[list[Expr]], Expr]:
    def combine(xs: list[Expr]) -> Expr:
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out

    return combine


def _mean(xs: list[Expr]) -> Expr:
    """The sum divided (not multiplied by a reciprocal) by the count, as the reference does."""
    return _fold(lambda a, b: a + b)(xs) / literal(len(xs), xs[0].dtype)


_broadcasting("Sum", _fold(lambda a, b: a + b))
_broadcasting("Max", _fold(maximum))
_broadcasting("Min", _fold(minimum))
_broadcasting("Mean", _mean)
_broadcasting("Where", lambda xs: select(xs[0], xs[1], xs[2]))


# Exponents worth a cheaper, exact-enough form than pow (x**2 is everywhere in decomposed norms).
_POW_SPECIAL: dict[float, Callable[[Expr], Expr]] = {
    1.0: lambda x: x,
    2.0: lambda x: x * x,
    0.5: sqrt,
    -1.0: lambda x: literal(1, x.dtype) / x,
}


@compute("Pow")
def pow_(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """base**exponent; the exponent may have another dtype (cast to the base's), and integer
    bases compute in float64 and truncate back, like the reference."""
    base, exponent = inputs
    shape, dtype = out_types[0].shape, base.dtype
    read_base = operand(base, shape)
    special = None
    if exponent.value is not None and is_float(dtype) and uniform_value(exponent) is not None:
        special = _POW_SPECIAL.get(float(exponent.value.flat[0]))
    if special is not None:
        return [lambda idx: special(read_base(idx))]
    read_exponent = operand(exponent, shape)
    work = dtype if is_float(dtype) else "float64"

    def read(idx: Indices) -> Expr:
        a, b = read_base(idx).astype(work), read_exponent(idx).astype(work)
        return power(a, b).astype(dtype)

    return [read]


# ---- BatchNormalization (conv.py's op; elementwise once the statistics are known) ----------------
@compute("BatchNormalization")
def batch_norm(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """y = (x - mean[c]) * m[c] + bias[c] with m = scale / sqrt(var + eps), c on axis 1.

    Constant statistics equal on every channel become literals (m computed at compile time).
    Otherwise m is computed from per-channel reads: a compute cannot add a table, but those
    reads and the sqrt depend only on c, which the injective schedule keeps out of the innermost
    (vectorized) loop unless the input is 2-D, so LLVM hoists them (kernel params are noalias).
    """
    x, *params = inputs
    dtype = x.dtype
    if all(p.value is not None for p in params):
        scale, bias, mean, var = (p.value.astype(np.float64) for p in params)
        m = scale / np.sqrt(var + attrs["epsilon"])
        if all(np.all(a == a[0]) for a in (m, bias, mean)):
            lm, lb, lmu = (literal(a[0], dtype) for a in (m, bias, mean))
            return [lambda idx: (x.read(idx) - lmu) * lm + lb]
    eps = literal(attrs["epsilon"], dtype)

    def read(idx: Indices) -> Expr:
        s, b, mu, v = (p.read((idx[1],)).astype(dtype) for p in params)
        return (x.read(idx) - mu) * (s / sqrt(v + eps)) + b

    return [read]
