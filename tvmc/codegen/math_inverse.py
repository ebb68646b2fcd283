"""Vectorisable asin, acos and atan in float64 (float32 results round from them): no libm calls.

fdlibm's methods with every branch computed and selected. asin and acos share one rational
approximation R(z) of (asin(s) - s) / s**3 on [0, 0.5] (remez error below 2**-58.75); from
|x| = 0.5 on they use asin(x) = pi/2 - 2 asin(sqrt((1 - x) / 2)), with sqrt's value split in a
high part and a correction where the subtraction would cancel. atan reduces |x| to [0, 7/16]
through atan(x) = atan(c) + atan((x - c) / (1 + c x)) for c in 1/2, 1, 3/2 and infinity, then
evaluates an odd polynomial of degree 23 (error below 2**-59).
"""

from __future__ import annotations

from tvmc.codegen.math_builder import Num, poly, where

PIO2_HI, PIO2_LO = 1.57079632679489655800e00, 6.12323399573676603587e-17
PIO4_HI = 7.85398163397448278999e-01
ASIN_P = (
    1.66666666666666657415e-01,
    -3.25565818622400915405e-01,
    2.01212532134862925881e-01,
    -4.00555345006794114027e-02,
    7.91534994289814532176e-04,
    3.47933107596021167570e-05,
)
ASIN_Q = (
    1.0,
    -2.40339491173441421878e00,
    2.02094576023350569471e00,
    -6.88283971605453293030e-01,
    7.70381505559019352791e-02,
)
# atan(c) as hi + lo for c = 1/2, 1, 3/2, infinity
ATAN_HI = (
    4.63647609000806093515e-01,
    7.85398163397448278999e-01,
    9.82793723247329054082e-01,
    1.57079632679489655800e00,
)
ATAN_LO = (
    2.26987774529616870924e-17,
    3.06161699786838301793e-17,
    1.39033110312309984516e-17,
    6.12323399573676603587e-17,
)
ATAN_T = (
    3.33333333333329318027e-01,
    -1.99999999998764832476e-01,
    1.42857142725034663711e-01,
    -1.11111104054623557880e-01,
    9.09088713343650656196e-02,
    -7.69187620504482999495e-02,
    6.66107313738753120669e-02,
    -5.83357013379057348645e-02,
    4.97687799461593236017e-02,
    -3.65315727442169155270e-02,
    1.62858201153657823623e-02,
)


def _r(z: Num) -> Num:
    """R(z) ~ (asin(sqrt z) - sqrt z) / sqrt(z)**3, for z in [0, 0.25]."""
    return z * poly(z, ASIN_P) / poly(z, ASIN_Q)


def _high_part(s: Num) -> Num:
    """`s` with the low 32 bits of its significand cleared (its square is exact)."""
    return s.with_bits(s.b.and_(s.bits(), s.int_const(-(1 << 32))))


def asin(x: Num, single: bool) -> Num:
    """asin x; NaN outside [-1, 1], asin(-0) = -0."""
    a = x.abs()
    small = a < 0.5
    z = where(small, x * x, (1.0 - a) * 0.5)
    r = _r(z)
    s = z.sqrt()
    near_one = PIO2_HI - (2.0 * (s + s * r) - PIO2_LO)
    f = _high_part(s)
    c = (z - f * f) / (s + f)
    middle = PIO4_HI - ((2.0 * s * r - (PIO2_LO - 2.0 * c)) - (PIO4_HI - 2.0 * f))
    large = where(a >= 0.975, near_one, middle).copysign(x)
    out = where(small, x + x * r, large)
    return where(a > 1.0, x.lift(float("nan")), out)


def acos(x: Num, single: bool) -> Num:
    """acos x; NaN outside [-1, 1]."""
    a = x.abs()
    small = a < 0.5
    negative = x < 0.0
    z = where(small, x * x, (1.0 - a) * 0.5)
    r = _r(z)
    s = z.sqrt()
    centre = PIO2_HI - (x - (PIO2_LO - x * r))
    left = 3.14159265358979311600e00 - 2.0 * (s + (r * s - PIO2_LO))
    f = _high_part(s)
    c = (z - f * f) / (s + f)
    right = where(x.eq(1.0), 0.0, 2.0 * (f + (r * s + c)))  # c would be 0/0 at x = 1
    out = where(small, centre, where(negative, left, right))
    return where(a > 1.0, x.lift(float("nan")), out)


def atan(x: Num, single: bool) -> Num:
    """atan x; atan(+-inf) = +-pi/2, atan(-0) = -0."""
    a = x.abs()
    bands = (a >= 0.4375, a >= 0.6875, a >= 1.1875, a >= 2.4375)
    # (numerator, denominator) of the reduced argument, band by band
    num = where(bands[0], 2.0 * a - 1.0, x)
    den = where(bands[0], 2.0 + a, x.lift(1.0))
    num = where(bands[1], a - 1.0, num)
    den = where(bands[1], a + 1.0, den)
    num = where(bands[2], a - 1.5, num)
    den = where(bands[2], 1.0 + 1.5 * a, den)
    num = where(bands[3], x.lift(-1.0), num)
    den = where(bands[3], a, den)
    t = num / den
    z = t * t
    w = z * z
    s1 = z * poly(w, ATAN_T[0::2])
    s2 = w * poly(w, ATAN_T[1::2])
    hi, lo = x.lift(ATAN_HI[0]), x.lift(ATAN_LO[0])
    for band, h, low in zip(bands[1:], ATAN_HI[1:], ATAN_LO[1:]):
        hi, lo = where(band, h, hi), where(band, low, lo)
    reduced = hi - ((t * (s1 + s2) - lo) - t)
    out = where(bands[0], reduced, t - t * (s1 + s2)).copysign(x)  # odd: atan(-0) = -0
    return where(x.is_nan(), x, out)
