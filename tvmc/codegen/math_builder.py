"""Arithmetic on LLVM values written as Python expressions, for the math functions' bodies.

`Num` wraps a float value (scalar or vector, float or double) and overloads the operators, so a
polynomial reads as `x + s * (S1 + z * S2)`; Python numbers splat to the value's type. `+ - * /`
emit plain IEEE operations (never contracted: error-free transformations rely on it); `madd` and
`poly` emit `llvm.fmuladd`, which a target may fuse. Comparisons give `Mask`s (ordered, so a NaN
compares false), `where` selects. `wide_function` defines a function on float32 or float64
values whose body computes in float64: float32 results then round once from far more accurate
values, and one body serves both element types.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from tvmc.codegen.llvm_util import element, intrinsic, lanes_of, splat, type_suffix

F64 = ir.DoubleType()
I64 = ir.IntType(64)


def _like(t: ir.Type, scalar: ir.Type) -> ir.Type:
    """`scalar`, or a vector of it with as many lanes as `t`."""
    return scalar if lanes_of(t) == 1 else ir.VectorType(scalar, lanes_of(t))


class Mask:
    """A comparison result (i1 or a vector of i1)."""

    def __init__(self, b: ir.IRBuilder, v: ir.Value) -> None:
        self.b, self.v = b, v

    def __and__(self, other: Mask) -> Mask:
        return Mask(self.b, self.b.and_(self.v, other.v))

    def __or__(self, other: Mask) -> Mask:
        return Mask(self.b, self.b.or_(self.v, other.v))

    def __invert__(self) -> Mask:
        return Mask(self.b, self.b.not_(self.v))


class Num:
    """A float value (scalar or vector) with IEEE arithmetic through operators."""

    def __init__(self, b: ir.IRBuilder, v: ir.Value) -> None:
        self.b, self.v, self.t = b, v, v.type

    def lift(self, x: Num | float) -> Num:
        """`x` as a Num of this type (a Python number becomes a splatted constant)."""
        return x if isinstance(x, Num) else Num(self.b, splat(self.t, float(x)))

    def _op(self, name: str, a: Num | float, c: Num | float) -> Num:
        return Num(self.b, getattr(self.b, name)(self.lift(a).v, self.lift(c).v))

    def __add__(self, o: Num | float) -> Num:
        return self._op("fadd", self, o)

    def __radd__(self, o: float) -> Num:
        return self._op("fadd", o, self)

    def __sub__(self, o: Num | float) -> Num:
        return self._op("fsub", self, o)

    def __rsub__(self, o: float) -> Num:
        return self._op("fsub", o, self)

    def __mul__(self, o: Num | float) -> Num:
        return self._op("fmul", self, o)

    def __rmul__(self, o: float) -> Num:
        return self._op("fmul", o, self)

    def __truediv__(self, o: Num | float) -> Num:
        return self._op("fdiv", self, o)

    def __rtruediv__(self, o: float) -> Num:
        return self._op("fdiv", o, self)

    def __neg__(self) -> Num:
        return Num(self.b, self.b.fneg(self.v))

    def _cmp(self, op: str, o: Num | float) -> Mask:
        return Mask(self.b, self.b.fcmp_ordered(op, self.v, self.lift(o).v))

    def __lt__(self, o: Num | float) -> Mask:  # type: ignore[override]
        return self._cmp("<", o)

    def __le__(self, o: Num | float) -> Mask:  # type: ignore[override]
        return self._cmp("<=", o)

    def __gt__(self, o: Num | float) -> Mask:  # type: ignore[override]
        return self._cmp(">", o)

    def __ge__(self, o: Num | float) -> Mask:  # type: ignore[override]
        return self._cmp(">=", o)

    def eq(self, o: Num | float) -> Mask:
        """Ordered ==."""
        return self._cmp("==", o)

    def is_nan(self) -> Mask:
        """True where the value is NaN."""
        return Mask(self.b, self.b.fcmp_unordered("uno", self.v, self.v))

    # ---- intrinsics ------------------------------------------------------------------------------
    def _call(self, name: str, *args: Num | float) -> Num:
        fn = intrinsic(self.b.module, name, self.t, len(args))
        return Num(self.b, self.b.call(fn, [self.lift(a).v for a in args]))

    def sqrt(self) -> Num:
        """Correctly rounded square root."""
        return self._call("sqrt", self)

    def abs(self) -> Num:
        """|x|."""
        return self._call("fabs", self)

    def floor(self) -> Num:
        """Rounded towards minus infinity."""
        return self._call("floor", self)

    def rint(self) -> Num:
        """Rounded to the nearest integer, ties to even."""
        return self._call("roundeven", self)

    def copysign(self, sign: Num) -> Num:
        """|self| with the sign bit of `sign` (so -0.0 keeps its sign)."""
        return self._call("copysign", self, sign)

    def fma(self, x: Num | float, c: Num | float) -> Num:
        """self * x + c rounded once (llvm.fma: exact products for error terms)."""
        return self._call("fma", self, x, c)

    def madd(self, x: Num | float, c: Num | float) -> Num:
        """self * x + c, fused where the target likes (llvm.fmuladd)."""
        return self._call("fmuladd", self, x, c)

    # ---- bits ------------------------------------------------------------------------------------
    def bits(self) -> ir.Value:
        """The value's bits as integers of its width."""
        width = 64 if element(self.t) == F64 else 32
        return self.b.bitcast(self.v, _like(self.t, ir.IntType(width)))

    def with_bits(self, bits: ir.Value) -> Num:
        """The float whose bits are `bits` (same type as self)."""
        return Num(self.b, self.b.bitcast(bits, self.t))

    def int_const(self, value: int) -> ir.Constant:
        """An integer constant as wide as this value's elements, splatted to its lanes."""
        width = 64 if element(self.t) == F64 else 32
        return splat(_like(self.t, ir.IntType(width)), value)


def where(mask: Mask, t: Num | float, f: Num | float) -> Num:
    """`t` where `mask`, else `f` (both evaluated)."""
    like = t if isinstance(t, Num) else f
    assert isinstance(like, Num)
    return Num(mask.b, mask.b.select(mask.v, like.lift(t).v, like.lift(f).v))


def poly(x: Num, coeffs: Sequence[float]) -> Num:
    """c0 + x*(c1 + x*(c2 + ...)) by Horner's rule, highest coefficient innermost."""
    acc = x.lift(coeffs[-1])
    for k in reversed(coeffs[:-1]):
        acc = acc.madd(x, k)
    return acc


Body = Callable[[Num, bool], Num]


def wide_function(module: ir.Module, name: str, t: ir.Type, body: Body) -> ir.Function:
    """The internal function `tvmc.<name>.<suffix>` of type t -> t, computing `body` in float64.

    `body(x, single)` gets x as float64 and whether the result rounds to float32 (a body may
    then use a shorter polynomial)."""
    fname = f"tvmc.{name}.{type_suffix(t)}"
    existing = module.globals.get(fname)
    if existing is not None:
        return existing
    if str(element(t)) not in ("float", "double"):
        raise TypeError(f"{name} takes float32 or float64 values, got {t}")
    fn = ir.Function(module, ir.FunctionType(t, [t]), fname)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    single = element(t) != F64
    x = b.fpext(fn.args[0], _like(t, F64)) if single else fn.args[0]
    y = body(Num(b, x), single).v
    b.ret(b.fptrunc(y, t) if single else y)
    return fn


def to_int(x: Num) -> ir.Value:
    """An integral float64 value (|x| < 2**62, never NaN) as int64."""
    return x.b.fptosi(x.v, _like(x.t, I64))


def from_int(b: ir.IRBuilder, v: ir.Value, like: Num) -> Num:
    """An int64 value as a float of `like`'s type."""
    return Num(b, b.sitofp(v, like.t))
