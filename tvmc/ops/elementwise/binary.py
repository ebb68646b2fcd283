"""Elementwise ops of two or more inputs with numpy broadcasting: arithmetic, comparisons, logic,
Pow, PRelu, the variadic Sum/Max/Min/Mean and Where. Each op's reference beside its expression.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, fabs, maximum, minimum, power, select, sqrt
from tvmc.kernel.expr import is_float
from tvmc.ops.common import broadcast_rule, broadcast_shape
from tvmc.ops.elementwise.literals import literal, operand, uniform_value, zero
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.registry import BROADCAST, InferRule, OpDef

Combine = Callable[[list[Expr]], Expr]
Binary = Callable[[Expr, Expr], Expr]
MANY = 1 << 16  # the variadic ops' input limit


def broadcasting(
    name: str,
    reference: Callable[..., np.ndarray],
    combine: Combine,
    *,
    doc: str,
    num_inputs: tuple[int, int] = (2, 2),
    infer: InferRule | None = None,
) -> OpDef:
    """The OpDef of an op reading every input broadcast to the output and combining them;
    `reference(*arrays)` on numpy arrays."""

    def compute(
        attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
    ) -> list[Accessor]:
        reads = [operand(r, out_types[0].shape) for r in inputs]
        return [lambda idx: combine([read(idx) for read in reads])]

    return OpDef(name, infer or broadcast_rule(name), lambda attrs, *xs: reference(*xs),
                 computed(compute), kind=BROADCAST, num_inputs=num_inputs, doc=doc)  # fmt: skip


def binary(name: str, reference: Callable[..., np.ndarray], fn: Binary, doc: str,
           out_dtype: str | None = None,
           dtypes: tuple[tuple[str, ...], str] | None = None) -> OpDef:  # fmt: skip
    """A two-input broadcasting op; `out_dtype` overrides the result type (e.g. 'bool'), `dtypes`
    (allowed dtypes, their name) restricts the inputs."""
    return broadcasting(name, reference, lambda xs: fn(xs[0], xs[1]), doc=doc,
                        infer=broadcast_rule(name, out_dtype, dtypes))  # fmt: skip


# ---- division ------------------------------------------------------------------------------------
def _div_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):  # ONNX integer Div truncates toward zero, like C
        return (np.trunc(a / np.where(b == 0, 1, b))).astype(a.dtype)
    return a / b


def _div(a: Expr, b: Expr) -> Expr:
    """a / b; integer division truncates toward zero.

    Integer divisors that make the hardware divide trap are steered away from it: 0 counts as 1
    (the reference's rule), and -1 becomes a negation (MIN / -1 overflows; it wraps here).
    """
    if is_float(a.dtype):
        return a / b
    if a.dtype.startswith("uint"):
        return a / select(b.eq(zero(b)), literal(1, b.dtype), b)
    minus_one = b.eq(literal(-1, b.dtype))
    safe = select(b.eq(zero(b)) | minus_one, literal(1, b.dtype), b)
    return select(minus_one, zero(a) - a, a / safe)


def _mod_reference(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The remainder: with the divisor's sign (fmod=0, Python's %) or the dividend's (fmod=1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b) if attrs["fmod"] else np.mod(a, b)


def _safe_divisor(b: Expr) -> Expr:
    """`b`, with 0 and -1 (whose integer remainders trap: x % 0, MIN % -1) replaced by 1; the
    remainder by 1 is 0, which is x % -1 exactly and tvmc's choice for x % 0 (numpy's too)."""
    if b.dtype.startswith("uint"):
        return select(b.eq(zero(b)), literal(1, b.dtype), b)
    return select(b.eq(zero(b)) | b.eq(literal(-1, b.dtype)), literal(1, b.dtype), b)


def _mod(attrs: Attrs, a: Expr, b: Expr) -> Expr:
    if not is_float(a.dtype):
        b = _safe_divisor(b)
        return a - (a / b) * b if attrs["fmod"] else a % b  # `/` truncates, `%` floors
    if not attrs["fmod"]:
        return a % b
    # C's fmod is the floored remainder of the magnitudes with the dividend's sign: exact, as
    # frem is (r + b - b would round)
    r = fabs(a) % fabs(b)
    return select(a < zero(a), zero(r) - r, r)


def _mod_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    read_a, read_b = (operand(r, out_types[0].shape) for r in inputs)
    return [lambda idx: _mod(attrs, read_a(idx), read_b(idx))]


MOD = OpDef("Mod", broadcast_rule("Mod"), _mod_reference, computed(_mod_compute), {"fmod": 0},
            BROADCAST, (2, 2), doc="a mod b: the sign of b (fmod=0) or of a (fmod=1).")  # fmt: skip

ARITHMETIC = [
    binary("Add", np.add, lambda a, b: a + b, "a + b."),
    binary("Sub", np.subtract, lambda a, b: a - b, "a - b."),
    binary("Mul", np.multiply, lambda a, b: a * b, "a * b."),
    binary("Div", _div_reference, _div, "a / b; integer division truncates toward zero."),
    binary("PRelu", lambda x, slope: np.where(x >= 0, x, x * slope),
           lambda x, slope: select(x >= zero(x), x, x * slope), "x where x >= 0, else slope * x."),
]  # fmt: skip

COMPARISONS = [
    binary("Equal", np.equal, lambda a, b: a.eq(b), "a == b.", "bool"),
    binary("Less", np.less, lambda a, b: a < b, "a < b.", "bool"),
    binary("Greater", np.greater, lambda a, b: a > b, "a > b.", "bool"),
    binary("LessOrEqual", np.less_equal, lambda a, b: a <= b, "a <= b.", "bool"),
    binary("GreaterOrEqual", np.greater_equal, lambda a, b: a >= b, "a >= b.", "bool"),
    binary("And", np.logical_and, lambda a, b: a & b, "Logical and.", "bool"),
    binary("Or", np.logical_or, lambda a, b: a | b, "Logical or.", "bool"),
    binary("Xor", np.logical_xor, lambda a, b: a.ne(b), "Logical exclusive or.", "bool",
           (("bool",), "bool")),
]  # fmt: skip


# ---- Pow -----------------------------------------------------------------------------------------
def _pow_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    return [TensorType(broadcast_shape(types[0].shape, types[1].shape), types[0].dtype)]


def _pow_reference(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exponent may have another dtype than the base (ONNX allows it); result: the base's."""
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


# Exponents worth a cheaper, exact-enough form than pow (x**2 is everywhere in decomposed norms,
# x**3 in the tanh GELU of GPT-2 and T5's exporters).
_POW_SPECIAL: dict[float, Callable[[Expr], Expr]] = {
    1.0: lambda x: x,
    2.0: lambda x: x * x,
    3.0: lambda x: x * x * x,
    0.5: sqrt,
    -1.0: lambda x: literal(1, x.dtype) / x,
}


def _pow(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
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


POW = OpDef("Pow", _pow_rule, _pow_reference, computed(_pow), kind=BROADCAST, num_inputs=(2, 2),
            doc="base ** exponent (the exponent may have another dtype).")  # fmt: skip


# ---- variadic and Where --------------------------------------------------------------------------
def _fold_reference(
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> Callable[..., np.ndarray]:
    def apply(*xs: np.ndarray) -> np.ndarray:
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return np.broadcast_to(out, np.broadcast_shapes(*(x.shape for x in xs)))

    return apply


def _mean_reference(*xs: np.ndarray) -> np.ndarray:
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    mean = total / total.dtype.type(len(xs))
    return np.broadcast_to(mean, np.broadcast_shapes(*(x.shape for x in xs)))


def _fold(fn: Binary) -> Combine:
    def combine(xs: list[Expr]) -> Expr:
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out

    return combine


def _mean(xs: list[Expr]) -> Expr:
    """The sum divided (not multiplied by a reciprocal) by the count, as the reference does."""
    return _fold(lambda a, b: a + b)(xs) / literal(len(xs), xs[0].dtype)


def _where_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    cond, x, y = types
    if cond.dtype != "bool":
        raise ValueError(f"Where condition must be bool, got {cond.dtype}")
    if x.dtype != y.dtype:
        raise ValueError(f"Where branches must share one dtype, got {x.dtype} and {y.dtype}")
    return [TensorType(broadcast_shape(cond.shape, x.shape, y.shape), x.dtype)]


VARIADIC = [
    broadcasting("Sum", _fold_reference(np.add), _fold(lambda a, b: a + b),
                 num_inputs=(1, MANY), doc="Sum of the inputs."),
    broadcasting("Max", _fold_reference(np.maximum), _fold(maximum),
                 num_inputs=(1, MANY), doc="Elementwise maximum of the inputs."),
    broadcasting("Min", _fold_reference(np.minimum), _fold(minimum),
                 num_inputs=(1, MANY), doc="Elementwise minimum of the inputs."),
    broadcasting("Mean", _mean_reference, _mean, num_inputs=(1, MANY),
                 doc="Mean of the inputs (the sum divided by the count)."),
    broadcasting("Where", np.where, lambda xs: select(xs[0], xs[1], xs[2]),
                 num_inputs=(3, 3), infer=_where_rule, doc="x where cond, else y."),
]  # fmt: skip

DEFINITIONS = [*ARITHMETIC, MOD, *COMPARISONS, POW, *VARIADIC]
