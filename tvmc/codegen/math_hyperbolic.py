"""Vectorisable sinh, cosh, asinh, acosh, atanh and expm1 in float64 (float32 rounds from them).

They rest on a float64 exp and log of our own (fdlibm's methods, below 1 ulp, no libm calls):
`exp_scaled` returns e**x * 2**shift without overflowing early (sinh and cosh take e**|x| / 2,
finite up to |x| = 710.47), and `log_corrected(u, c)` is log(u + c) for a tiny correction c,
which makes log1p(x) exact for the rounding of 1 + x. Near 0, sinh is its Taylor series (odd,
so sinh(-0) = -0) and expm1(x) is 2 sinh(x/2) e**(x/2); the inverse functions go through log1p
of arguments built without cancellation (asinh: x + x**2 / (1 + sqrt(1 + x**2)); acosh:
t + sqrt(t * (t + 2)), t = x - 1; atanh: 2x / (1 - x)), and log(2|x|) beyond |x| = 2**28.
"""

from __future__ import annotations

import math

from tvmc.codegen.math_builder import Mask, Num, from_int, poly, to_int, where

INV_LN2 = 1.44269504088896338700e00
LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # LN2_HI: 32 bits
EXP_P = (
    1.66666666666666019037e-01,
    -2.77777777770155933842e-03,
    6.61375632143793436117e-05,
    -1.65339022054652515390e-06,
    4.13813679705723846039e-08,
)
LOG_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)
SINH_TAYLOR = tuple(1 / math.factorial(k) for k in range(3, 21, 2))  # x**3/3! ... x**19/19!
SINH_TAYLOR_SINGLE = SINH_TAYLOR[:5]  # to x**11/11!: within 2**-32 for |x| < 1
BIG = 2.0**28
INF, NAN = float("inf"), float("nan")


def pow2(k: Num) -> Num:
    """2**k for an integral k in [-1022, 1023]."""
    bits = k.b.shl(k.b.add(to_int(k), k.int_const(1023)), k.int_const(52))
    return k.with_bits(bits)


def exp_scaled(x: Num, shift: int = 0) -> Num:
    """e**x * 2**shift: below 1 ulp, +-inf and NaN as exp does, results rounded once even
    where they are subnormal."""
    xc = where(x.is_nan(), 0.0, where(x > 711.0, 711.0, where(x < -746.0, -746.0, x)))
    k = (xc * INV_LN2).rint()
    hi = xc - k * LN2_HI  # exact: |k| < 2**11
    lo = k * LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * poly(t, EXP_P)
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    # two power-of-two factors, so neither overflows nor goes subnormal before the last product
    total = k + float(shift)
    k1 = (total * 0.5).floor()
    out = (y * pow2(k1)) * pow2(total - k1)
    return where(x.is_nan(), x, out)


def log_corrected(u: Num, c: Num | float = 0.0) -> Num:
    """log(u + c) for u >= 0 and |c| <= ulp(u); log(0) = -inf, NaN below 0."""
    b = u.b
    tiny = u < 2.2250738585072014e-308  # subnormal: scaled into the normal range first
    us = where(tiny, u * 2.0**54, u)
    bits = us.bits()
    k = from_int(b, b.sub(b.lshr(bits, u.int_const(52)), u.int_const(1023)), u)
    k = where(tiny, k - 54.0, k)
    mantissa = b.and_(bits, u.int_const((1 << 52) - 1))
    m = u.with_bits(b.or_(mantissa, u.int_const(1023 << 52)))  # in [1, 2)
    high = m > 1.4142135623730951
    m = where(high, m * 0.5, m)
    k = where(high, k + 1.0, k)
    f = m - 1.0  # exact
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    big_r = z * poly(w, LOG_LG[0::2]) + w * poly(w, LOG_LG[1::2])
    hfsq = 0.5 * f * f
    tail = k * LN2_LO + u.lift(c) / u
    out = k * LN2_HI - ((hfsq - (s * (hfsq + big_r) + tail)) - f)
    out = where(u.eq(0.0), -INF, where(u.eq(INF), INF, out))
    return where(u < 0.0, NAN, where(u.is_nan(), u, out))


def _one_plus(x: Num) -> tuple[Num, Num]:
    """(1 + x rounded, its rounding error) by TwoSum; the error of 1 + inf is 0."""
    u = 1.0 + x
    back = u - 1.0
    err = (1.0 - (u - back)) + (x - back)
    return u, where(x.eq(INF), 0.0, err)


def log1p(x: Num) -> Num:
    """log(1 + x), exact for the rounding of 1 + x."""
    return log_corrected(*_one_plus(x))


def _log1p_or_log2x(y: Num, x: Num, big: Mask) -> Num:
    """log1p(y), or log(2x) where `big`: one logarithm either way."""
    u, err = _one_plus(y)
    out = log_corrected(where(big, x, u), where(big, 0.0, err))
    return where(big, out + math.log(2), out)


def _sinh_taylor(x: Num, single: bool) -> Num:
    """sinh x for |x| < 1 (odd: keeps -0)."""
    z = x * x
    return x + x * z * poly(z, SINH_TAYLOR_SINGLE if single else SINH_TAYLOR)


def sinh(x: Num, single: bool) -> Num:
    """sinh x, odd (sinh(-0) = -0)."""
    a = x.abs()
    h = exp_scaled(a, -1)  # e**|x| / 2
    return where(a < 1.0, _sinh_taylor(x, single), (h - 0.25 / h).copysign(x))


def expm1(x: Num, single: bool) -> Num:
    """e**x - 1 without cancellation near 0: 2 sinh(x/2) e**(x/2) for |x| < 1."""
    half = x * 0.5
    near_zero = 2.0 * _sinh_taylor(half, single) * exp_scaled(half)
    return where(x.abs() < 1.0, near_zero, exp_scaled(x) - 1.0)


def cosh(x: Num, single: bool) -> Num:
    """cosh x."""
    h = exp_scaled(x.abs(), -1)
    return h + 0.25 / h


def asinh(x: Num, single: bool) -> Num:
    """asinh x, odd."""
    a = x.abs()
    y = a + a * a / (1.0 + (1.0 + a * a).sqrt())
    return _log1p_or_log2x(y, a, a > BIG).copysign(x)


def acosh(x: Num, single: bool) -> Num:
    """acosh x; NaN below 1."""
    t = x - 1.0
    out = _log1p_or_log2x(t + (t * (t + 2.0)).sqrt(), x, x > BIG)
    return where(x < 1.0, NAN, out)


def atanh(x: Num, single: bool) -> Num:
    """atanh x; +-inf at +-1, NaN beyond."""
    a = x.abs()
    y = where(a < 0.5, 2.0 * a + 2.0 * a * a / (1.0 - a), 2.0 * a / (1.0 - a))
    return (0.5 * log1p(y)).copysign(x)
