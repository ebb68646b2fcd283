"""Vectorisable float32 exp, log, tanh, erf and sigmoid emitted as LLVM IR (no libm calls).

Each is an internal, always-inlined function per type (`float` or `<N x float>`), built from
selects, `llvm.fmuladd` and bit tricks only, so it vectorises and also lowers for NVPTX.
Max relative error against float64 (tests/codegen/test_mathfuncs.py, Zen 4): exp 7.7e-8,
log 7.4e-8, tanh 2.3e-7, erf 3.2e-7, sigmoid 1.2e-7. exp flushes results below FLT_MIN to 0.
Sources: Cephes expf/logf (range reduction and minimax polynomials); Eigen's rational tanh and erf.

The trigonometric and hyperbolic functions, their inverses and expm1 (`WIDE_FUNCTIONS`) take
float32 or float64 and compute in float64 (`math_trig`, `math_inverse`, `math_hyperbolic`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from tvmc.codegen import math_hyperbolic, math_inverse, math_trig
from tvmc.codegen.llvm_util import I32, element, intrinsic, lanes_of, splat, type_suffix
from tvmc.codegen.math_builder import Body, wide_function

_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1)
_LOG_Q = (
    7.0376836292e-2,
    -1.1514610310e-1,
    1.1676998740e-1,
    -1.2420140846e-1,
    1.4249322787e-1,
    -1.6668057665e-1,
    2.0000714765e-1,
    -2.4999993993e-1,
    3.3333331174e-1,
)
_TANH_P = (
    -2.76076847742355e-16,
    2.00018790482477e-13,
    -8.60467152213735e-11,
    5.12229709037114e-08,
    1.48572235717979e-05,
    6.37261928875436e-04,
    4.89352455891786e-03,
)
_TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
_ERF_P = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_ERF_Q = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)
_EXP_HI, _EXP_LO = 88.72283, -87.33654  # beyond: inf / flushed to 0 (FLT_MIN is e**-87.3365)


class _Emit:
    """IRBuilder wrapper whose arithmetic works the same on scalars and vectors."""

    def __init__(self, b: ir.IRBuilder, t: ir.Type) -> None:
        self.b, self.t, self.m = b, t, b.module
        self.it = I32 if lanes_of(t) == 1 else ir.VectorType(I32, lanes_of(t))

    def c(self, v: float) -> ir.Constant:
        return splat(self.t, v)

    def ci(self, v: int) -> ir.Constant:
        return splat(self.it, v)

    def madd(self, a: ir.Value, x: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.call(intrinsic(self.m, "fmuladd", self.t, 3), [a, x, c])

    def horner(self, x: ir.Value, coeffs: tuple[float, ...]) -> ir.Value:
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.madd(acc, x, self.c(k))
        return acc

    def call(self, name: str, x: ir.Value) -> ir.Value:
        return self.b.call(intrinsic(self.m, name, self.t, 1), [x])

    def sel(self, op: str, a: ir.Value, b: ir.Value, t: ir.Value, f: ir.Value) -> ir.Value:
        return self.b.select(self.b.fcmp_ordered(op, a, b), t, f)

    def clamp(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        # Ordered compares keep NaN: neither branch fires, x passes through.
        x = self.sel("<", x, self.c(lo), self.c(lo), x)
        return self.sel(">", x, self.c(hi), self.c(hi), x)

    def keep_nan(self, x: ir.Value, result: ir.Value) -> ir.Value:
        return self.b.select(self.b.fcmp_unordered("uno", x, x), x, result)


def _exp(e: _Emit, x: ir.Value) -> ir.Value:
    b = e.b
    xc = e.clamp(x, _EXP_LO, _EXP_HI)
    fx = e.call("floor", e.madd(xc, e.c(math.log2(math.e)), e.c(0.5)))
    r = e.madd(fx, e.c(-0.693359375), xc)  # ln 2 split in two for an exact reduction
    r = e.madd(fx, e.c(2.12194440e-4), r)
    y = e.horner(r, (*_EXP_P, 5.0000001201e-1))
    y = b.fadd(e.madd(y, b.fmul(r, r), r), e.c(1.0))
    n = b.add(b.fptosi(fx, e.it), e.ci(127))
    scale = b.bitcast(b.shl(n, e.ci(23)), e.t)
    out = b.fmul(y, scale)
    out = e.sel(">", x, e.c(_EXP_HI), e.c(math.inf), out)
    out = e.sel("<", x, e.c(_EXP_LO), e.c(0.0), out)
    return e.keep_nan(x, out)


def _log(e: _Emit, x: ir.Value) -> ir.Value:
    b = e.b
    tiny = b.fcmp_ordered("<", x, e.c(1.1754943508222875e-38))  # subnormal: scale into range
    xs = b.select(tiny, b.fmul(x, e.c(8388608.0)), x)
    bits = b.bitcast(xs, e.it)
    ex = b.sub(b.ashr(bits, e.ci(23)), b.select(tiny, e.ci(126 + 23), e.ci(126)))
    m = b.bitcast(b.or_(b.and_(bits, e.ci(0x007FFFFF)), e.ci(0x3F000000)), e.t)  # in [0.5, 1)
    small = b.fcmp_ordered("<", m, e.c(0.707106781186547524))
    ex = b.sub(ex, b.zext(small, e.it))
    m = b.select(small, b.fsub(b.fadd(m, m), e.c(1.0)), b.fsub(m, e.c(1.0)))
    ef = b.sitofp(ex, e.t)
    z = b.fmul(m, m)
    y = b.fmul(b.fmul(e.horner(m, _LOG_Q), m), z)
    y = e.madd(ef, e.c(-2.12194440e-4), y)
    y = e.madd(z, e.c(-0.5), y)
    out = b.fadd(m, y)
    out = e.madd(ef, e.c(0.693359375), out)
    out = e.sel("<", x, e.c(0.0), e.c(math.nan), out)
    out = e.sel("==", x, e.c(0.0), e.c(-math.inf), out)
    out = e.sel("==", x, e.c(math.inf), e.c(math.inf), out)
    return e.keep_nan(x, out)


def _tanh(e: _Emit, x: ir.Value) -> ir.Value:
    xc = e.clamp(x, -7.90531110763549805, 7.90531110763549805)  # tanh is +-1 in float32 beyond
    x2 = e.b.fmul(xc, xc)
    p = e.b.fmul(e.horner(x2, _TANH_P), xc)
    r = e.b.fdiv(p, e.horner(x2, _TANH_Q))
    # The rational form stops at 1 - 2**-22; float32 tanh is exactly +-1 from |x| = 9 on, and
    # expressions such as 1 + tanh(x) (tanh-Gelu) depend on it.
    r = e.b.select(e.b.fcmp_ordered(">=", x, e.c(9.0)), e.c(1.0), r)
    return e.b.select(e.b.fcmp_ordered("<=", x, e.c(-9.0)), e.c(-1.0), r)


def _erf(e: _Emit, x: ir.Value) -> ir.Value:
    xc = e.clamp(x, -4.0, 4.0)  # erf is +-1 in float32 beyond
    x2 = e.b.fmul(xc, xc)
    p = e.b.fmul(e.horner(x2, _ERF_P), xc)
    return e.b.fdiv(p, e.horner(x2, _ERF_Q))


def _sigmoid(e: _Emit, x: ir.Value) -> ir.Value:
    ex = _exp(e, e.b.fsub(e.c(-0.0), x))
    return e.b.fdiv(e.c(1.0), e.b.fadd(e.c(1.0), ex))


_BODIES: dict[str, Callable[[_Emit, ir.Value], ir.Value]] = {
    "exp": _exp,
    "log": _log,
    "tanh": _tanh,
    "erf": _erf,
    "sigmoid": _sigmoid,
}
POLY_FUNCTIONS = tuple(_BODIES)


def math_function(module: ir.Module, name: str, t: ir.Type) -> ir.Function:
    """The internal function `tvmc.<name>.<suffix>` of type t -> t (float32 element) in `module`."""
    if str(element(t)) != "float":
        raise TypeError(f"polynomial {name} is float32-only, got {t}")
    fname = f"tvmc.{name}.{type_suffix(t)}"
    existing = module.globals.get(fname)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(t, [t]), fname)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(_BODIES[name](_Emit(b, t), fn.args[0]))
    return fn


_WIDE: dict[str, Body] = {
    "sin": math_trig.sin,
    "cos": math_trig.cos,
    "tan": math_trig.tan,
    "asin": math_inverse.asin,
    "acos": math_inverse.acos,
    "atan": math_inverse.atan,
    "sinh": math_hyperbolic.sinh,
    "cosh": math_hyperbolic.cosh,
    "asinh": math_hyperbolic.asinh,
    "acosh": math_hyperbolic.acosh,
    "atanh": math_hyperbolic.atanh,
    "expm1": math_hyperbolic.expm1,
}
WIDE_FUNCTIONS = tuple(_WIDE)


def wide_math_function(module: ir.Module, name: str, t: ir.Type) -> ir.Function:
    """The internal function `tvmc.<name>.<suffix>` of type t -> t (float32 or float64 element)."""
    return wide_function(module, name, t, _WIDE[name])
