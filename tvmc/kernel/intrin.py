"""Expression helpers for template authors: vectors, select/min/max, casts, intrinsic calls."""

from __future__ import annotations

from tvmc.kernel.expr import (
    INTRINSICS,
    Broadcast,
    Call,
    Expr,
    ExprLike,
    KernelIRError,
    Max,
    Min,
    Ramp,
    Select,
    Shuffle,
    as_expr,
    coerce_pair,
    is_float,
)


def ramp(base: ExprLike, lanes: int, stride: ExprLike = 1) -> Ramp:
    """`[base, base + stride, ...]` over `lanes`; a unit-stride Ramp index makes a vector load."""
    b = as_expr(base, "int32")
    return Ramp(b, as_expr(stride, b.dtype), int(lanes))


def broadcast(value: ExprLike, lanes: int, dtype: str = "float32") -> Broadcast:
    """`value` repeated over `lanes` (Python numbers become literals of `dtype`)."""
    return Broadcast(as_expr(value, dtype), int(lanes))


def interleave(vectors: list[Expr] | tuple[Expr, ...]) -> Shuffle:
    """`[a0, b0, c0, a1, b1, c1, ...]` of vectors a, b, c...: k vectors of n lanes as one of k*n,
    whose contiguous store writes what k stores of stride k from consecutive bases would (a
    Winograd tile row: 4 stores of stride 4 lane by lane against 4 vector stores)."""
    vs = tuple(vectors)
    k, n = len(vs), vs[0].lanes
    return Shuffle(vs, tuple((lane % k) * n + lane // k for lane in range(k * n)))


def select(cond: Expr, t: ExprLike, f: ExprLike) -> Select:
    """`cond ? t : f`, evaluating both arms."""
    x, y = coerce_pair(t, f)
    return Select(cond, x, y)


def minimum(a: ExprLike, b: ExprLike) -> Min:
    """`a < b ? a : b`."""
    return Min(*coerce_pair(a, b))


def maximum(a: ExprLike, b: ExprLike) -> Max:
    """`a > b ? a : b`."""
    return Max(*coerce_pair(a, b))


def cast(dtype: str, value: Expr) -> Expr:
    """`value` converted to `dtype` (float to int truncates)."""
    return value.astype(dtype) if value.dtype != dtype else value


def call(name: str, *args: ExprLike) -> Call:
    """The intrinsic `name` applied to `args`, checked against INTRINSICS."""
    if name not in INTRINSICS:
        raise KernelIRError(f"unknown intrinsic {name!r}; valid: {', '.join(INTRINSICS)}")
    like = next((a.dtype for a in args if isinstance(a, Expr)), "float32")
    exprs = tuple(as_expr(a, like) for a in args)
    arity, float_only, _ = INTRINSICS[name]
    if len(exprs) != arity:
        raise KernelIRError(f"{name} takes {arity} argument(s), got {len(exprs)}")
    if float_only and not is_float(like):
        raise KernelIRError(f"{name} needs a float argument, got {like}")
    return Call(name, exprs)


def exp(x: Expr) -> Call:
    """e**x (float32: a vectorisable polynomial in codegen)."""
    return call("exp", x)


def expm1(x: Expr) -> Call:
    """e**x - 1, accurate near 0."""
    return call("expm1", x)


def log(x: Expr) -> Call:
    """Natural logarithm."""
    return call("log", x)


def tanh(x: Expr) -> Call:
    """Hyperbolic tangent."""
    return call("tanh", x)


def erf(x: Expr) -> Call:
    """The error function."""
    return call("erf", x)


def sigmoid(x: Expr) -> Call:
    """1 / (1 + e**-x)."""
    return call("sigmoid", x)


def sin(x: Expr) -> Call:
    """Sine (radians)."""
    return call("sin", x)


def cos(x: Expr) -> Call:
    """Cosine (radians)."""
    return call("cos", x)


def tan(x: Expr) -> Call:
    """Tangent (radians)."""
    return call("tan", x)


def asin(x: Expr) -> Call:
    """Arcsine, in [-pi/2, pi/2]; NaN outside [-1, 1]."""
    return call("asin", x)


def acos(x: Expr) -> Call:
    """Arccosine, in [0, pi]; NaN outside [-1, 1]."""
    return call("acos", x)


def atan(x: Expr) -> Call:
    """Arctangent, in [-pi/2, pi/2]."""
    return call("atan", x)


def sinh(x: Expr) -> Call:
    """Hyperbolic sine."""
    return call("sinh", x)


def cosh(x: Expr) -> Call:
    """Hyperbolic cosine."""
    return call("cosh", x)


def asinh(x: Expr) -> Call:
    """Inverse hyperbolic sine."""
    return call("asinh", x)


def acosh(x: Expr) -> Call:
    """Inverse hyperbolic cosine; NaN below 1."""
    return call("acosh", x)


def atanh(x: Expr) -> Call:
    """Inverse hyperbolic tangent; +-inf at +-1, NaN beyond."""
    return call("atanh", x)


def sqrt(x: Expr) -> Call:
    """Square root."""
    return call("sqrt", x)


def fabs(x: Expr) -> Call:
    """Absolute value of a float."""
    return call("fabs", x)


def floor(x: Expr) -> Call:
    """Round towards minus infinity."""
    return call("floor", x)


def ceil(x: Expr) -> Call:
    """Round towards plus infinity."""
    return call("ceil", x)


def round_even(x: Expr) -> Call:
    """Round half to even (numpy's rint)."""
    return call("round_even", x)


def power(x: ExprLike, y: ExprLike) -> Call:
    """x**y."""
    return call("pow", x, y)


def fma(a: ExprLike, b: ExprLike, c: ExprLike) -> Call:
    """a * b + c with one rounding (llvm.fma)."""
    return call("fma", a, b, c)


def reduce_add(x: Expr) -> Call:
    """Sum of the lanes of a vector (order unspecified)."""
    return call("reduce_add", x)


def reduce_max(x: Expr) -> Call:
    """Largest lane of a vector."""
    return call("reduce_max", x)


def reduce_min(x: Expr) -> Call:
    """Smallest lane of a vector."""
    return call("reduce_min", x)
