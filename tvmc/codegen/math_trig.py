"""Vectorisable sin, cos and tan in float64 (float32 results round from them): no libm calls.

Range reduction: x = n * pi/2 + r with |r| <= pi/4 by Cody-Waite, pi/2 split into parts whose
products with n are exact. A float32 argument uses 25 + 25 + 53 bits of pi/2, exact for
|x| < 2**28 * pi/2 (4.2e8); beyond it `math_reduce` (Payne-Hanek) takes over, so every float32
argument reduces accurately. A float64 argument uses fdlibm's 33 + 33 + 33 + 53 bits as a
double-double remainder, accurate for |x| < 2**20 * pi/2 (1.6e6); beyond, the error grows like
|x| * 2**-53 (a one-ulp change of x). Kernels on [-pi/4, pi/4]: musl's float-target
polynomials (__sindf, __cosdf: relative error below 2**-34) for float32 results, fdlibm's
(__sin, __cos, __tan with the remainder's tail) for float64.
"""

from __future__ import annotations

from tvmc.codegen.math_builder import Num, poly, where
from tvmc.codegen.math_reduce import reduce_huge

INV_PIO2 = 0.6366197723675814
# float32 arguments: 25-bit parts (n < 2**28: products exact), then the rest
PIO2_F1, PIO2_F2, PIO2_F3 = 1.5707963109016418, 1.5893254712295857e-08, 6.123233995736766e-17
# float64 arguments: fdlibm's 33-bit parts (n < 2**20: products exact), then the rest
PIO2_D = (1.5707963267341256, 6.077100506303966e-11, 2.0222662487111665e-21, 8.4784276603689e-32)
SINGLE_EXACT = 2.0**28 * 1.5707963267948966  # beyond these: Payne-Hanek
DOUBLE_EXACT = 2.0**20 * 1.5707963267948966

# musl __sindf / __cosdf: |sin(x)/x - s(x)| < 2**-37.5, |cos(x) - c(x)| < 2**-34.1
SIN_F = (-0.16666666641626524, 0.008333329385889463, -0.00019839334836096632, 2.718311493989822e-06)
COS_F = (-0.499999997251031, 0.04166662332373906, -0.001388676377460993, 2.439044879627741e-05)
# fdlibm __sin / __cos
SIN_D = (
    -1.66666666666666324348e-01,
    8.33333333332248946124e-03,
    -1.98412698298579493134e-04,
    2.75573137070700676789e-06,
    -2.50507602534068634195e-08,
    1.58969099521155010221e-10,
)
COS_D = (
    4.16666666666666019037e-02,
    -1.38888888888741095749e-03,
    2.48015872894767294178e-05,
    -2.75573143513906633035e-07,
    2.08757232129817482790e-09,
    -1.13596475577881948265e-11,
)
# fdlibm __tan: T0..T12, then pi/4 as hi + lo
TAN_D = (
    3.33333333333334091986e-01,
    1.33333333333201242699e-01,
    5.39682539762260521377e-02,
    2.18694882948595424599e-02,
    8.86323982359930005737e-03,
    3.59207910759131235356e-03,
    1.45620945432529025516e-03,
    5.88041240820264096874e-04,
    2.46463134818469906812e-04,
    7.81794442939557092300e-05,
    7.14072491382608190305e-05,
    -1.85586374855275456654e-05,
    2.59073051863633712884e-05,
)
PIO4_HI, PIO4_LO = 7.85398163397448278999e-01, 3.06161699786838301793e-17


def two_diff(a: Num, b: Num) -> tuple[Num, Num]:
    """(a - b rounded, its exact rounding error) whatever the magnitudes (Knuth's TwoSum)."""
    s = a - b
    bb = s - a
    return s, (a - (s - bb)) - (b + bb)


def reduce_pio2(x: Num, single: bool) -> tuple[Num, Num, Num]:
    """(n, hi, lo): x = n * pi/2 + hi + lo with |hi + lo| <= ~pi/4 (lo is 0 for `single`)."""
    n = (x * INV_PIO2).rint()
    if single:
        hi = ((x - n * PIO2_F1) - n * PIO2_F2) - n * PIO2_F3
        lo = x.lift(0.0)
        huge = x.abs() >= SINGLE_EXACT
    else:
        h = x - n * PIO2_D[0]  # exact: n < 2**20 and the part has 33 bits
        h, lo = two_diff(h, n * PIO2_D[1])
        h, e = two_diff(h, n * PIO2_D[2])
        lo = (lo + e) - n * PIO2_D[3]
        hi = h + lo
        lo = (h - hi) + lo
        huge = x.abs() >= DOUBLE_EXACT
    n_big, hi_big, lo_big = reduce_huge(x, huge.v, single)
    return where(huge, n_big, n), where(huge, hi_big, hi), where(huge, lo_big, lo)


def _odd(n: Num) -> Num:
    """1.0 where the integer n is odd, else 0.0 (n may exceed any integer type)."""
    half = n * 0.5
    return (half - half.floor()) * 2.0


def _quarter(n: Num) -> Num:
    """n mod 4 as 0.0, 1.0, 2.0 or 3.0."""
    q = n * 0.25
    return (q - q.floor()) * 4.0


def sin_kernel(r: Num, lo: Num, single: bool) -> Num:
    """sin(r + lo) for |r| <= ~pi/4."""
    z = r * r
    s = z * r
    if single:
        w = z * z
        return (r + s * (SIN_F[0] + z * SIN_F[1])) + s * w * (SIN_F[2] + z * SIN_F[3])
    p = poly(z, SIN_D[1:])
    return r - ((z * (lo * 0.5 - s * p) - lo) - s * SIN_D[0])


def cos_kernel(r: Num, lo: Num, single: bool) -> Num:
    """cos(r + lo) for |r| <= ~pi/4."""
    z = r * r
    w = z * z
    if single:
        return ((1.0 + z * COS_F[0]) + w * COS_F[1]) + (w * z) * (COS_F[2] + z * COS_F[3])
    p = z * poly(z, COS_D[:3]) + w * w * poly(z, COS_D[3:])
    hz = z * 0.5
    v = 1.0 - hz
    return v + (((1.0 - v) - hz) + (z * p - r * lo))


def sin(x: Num, single: bool) -> Num:
    """sin x; sin(-0) = -0, non-finite x gives NaN."""
    n, r, lo = reduce_pio2(x, single)
    s, c = sin_kernel(r, lo, single), cos_kernel(r, lo, single)
    q = _quarter(n)
    v = where(_odd(n).eq(1.0), c, s)
    return where(x.eq(0.0), x, where(q >= 2.0, -v, v))


def cos(x: Num, single: bool) -> Num:
    """cos x; non-finite x gives NaN."""
    n, r, lo = reduce_pio2(x, single)
    s, c = sin_kernel(r, lo, single), cos_kernel(r, lo, single)
    q = _quarter(n + 1.0)
    v = where(_odd(n).eq(1.0), s, c)
    return where(q >= 2.0, -v, v)


def _tan_double(r: Num, lo: Num, odd: Num) -> Num:
    """fdlibm's __tan(r, lo, odd ? -1 : 1): tan, or -1/tan where `odd` is 1.0."""
    big = r.abs() >= 0.6744
    negative = r < 0.0
    sign = where(negative, r.lift(-1.0), 1.0)
    rb = where(big & negative, -r, r)
    lob = where(big & negative, -lo, lo)
    xx = where(big, (PIO4_HI - rb) + (PIO4_LO - lob), r)
    yy = where(big, 0.0, lo)
    z = xx * xx
    w = z * z
    p = poly(w, TAN_D[1::2])
    v = z * poly(w, TAN_D[2::2])
    s = z * xx
    q = yy + z * (s * (p + v) + yy)
    q = q + TAN_D[0] * s
    t = xx + q
    iy = 1.0 - 2.0 * odd
    near_quarter = sign * (iy - 2.0 * (xx - (t * t / (t + iy) - q)))
    # -1/t with t split so the product is exact (fdlibm): a = -1/t, corrected by one step
    th = t.with_bits(t.b.and_(t.bits(), t.int_const(-(1 << 32))))
    vv = q - (th - xx)
    a = -1.0 / t
    ah = a.with_bits(a.b.and_(a.bits(), a.int_const(-(1 << 32))))
    cot = ah + a * ((1.0 + ah * th) + ah * vv)
    return where(big, near_quarter, where(odd.eq(1.0), cot, t))


def tan(x: Num, single: bool) -> Num:
    """tan x; tan(-0) = -0, non-finite x gives NaN."""
    n, r, lo = reduce_pio2(x, single)
    odd = _odd(n)
    if single:  # sin/cos of the float kernels: a quotient within 2**-32
        s, c = sin_kernel(r, lo, True), cos_kernel(r, lo, True)
        v = where(odd.eq(1.0), -c / s, s / c)
    else:
        v = _tan_double(r, lo, odd)
    return where(x.eq(0.0), x, v)
