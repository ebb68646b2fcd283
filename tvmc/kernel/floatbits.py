"""Conversions between the narrow types and the wide ones, as kernel IR on the bits of floats.

A narrow float (bfloat16, float8_*, float4_e2m1fn) is held as its bits; no backend has
instructions for it, so a conversion is integer arithmetic on the bits of a float32 or float64
(`Reinterpret`), shifts and masks written as divisions and remainders by powers of two (LLVM
makes them shifts and ands), with selects for the special values. Each conversion is bit for bit
what numpy's `astype` does through ml_dtypes: round to nearest even; a value too big becomes inf
where the format has one, else NaN, else (float4) the largest value; NaN becomes the format's
NaN, or for float4, which has none, a zero. The ONNX Cast op adds saturation (a clamp before the
conversion) and float8_e8m0fnu's rounding modes (`onnx_e8m0`).

Decoding is exact: every narrow float is a float32. Encoding reads float32 or float64 bits (a
float16 is widened to float32 first, exactly), so nothing is rounded twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tvmc.dtypes import NARROW_FLOATS, NARROW_INTS, is_narrow, numpy_dtype, storage_dtype
from tvmc.kernel.expr import Cast, Expr, FloatImm, IntImm, Reinterpret, is_float, is_int
from tvmc.kernel.intrin import fabs, maximum, minimum, round_even, select


@dataclass(frozen=True)
class FloatFormat:
    """A float's bit fields, and what its top codes mean (`special`): "ieee" (an all-ones
    exponent is inf or NaN), "nan_max" (only the all-ones magnitude is NaN, no inf: e4m3fn),
    "fnuz" (0x80 is the only NaN, no inf, no -0), "none" (all finite: e2m1fn) or "e8m0"
    (unsigned powers of two, 0xFF is NaN)."""

    exponent: int
    mantissa: int
    bias: int
    special: str

    @property
    def signed(self) -> bool:
        return self.special != "e8m0"

    @property
    def sign_bit(self) -> int:
        return 1 << (self.exponent + self.mantissa) if self.signed else 0

    @property
    def inf_magnitude(self) -> int:
        """The magnitude bits of inf (ieee formats), where the specials start."""
        return ((1 << self.exponent) - 1) << self.mantissa

    @property
    def max_magnitude(self) -> int:
        """The magnitude bits of the largest finite value."""
        top = (1 << (self.exponent + self.mantissa)) - 1
        return {"ieee": self.inf_magnitude - 1, "nan_max": top - 1, "e8m0": 0xFE}.get(
            self.special, top
        )


FORMATS = {
    "bfloat16": FloatFormat(8, 7, 127, "ieee"),
    "float8_e4m3fn": FloatFormat(4, 3, 7, "nan_max"),
    "float8_e4m3fnuz": FloatFormat(4, 3, 8, "fnuz"),
    "float8_e5m2": FloatFormat(5, 2, 15, "ieee"),
    "float8_e5m2fnuz": FloatFormat(5, 2, 16, "fnuz"),
    "float8_e8m0fnu": FloatFormat(8, 0, 127, "e8m0"),
    "float4_e2m1fn": FloatFormat(2, 1, 1, "none"),
}
# The wide floats an encoder reads: exponent bits, mantissa bits, bias, the integer type of the
# bits (float64's signed: the interpreter holds integer vectors as int64).
_SOURCES = {"float32": (8, 23, 127, "uint32"), "float64": (11, 52, 1023, "int64")}
# Narrow integers: bits, signed.
_INT_BITS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}


def convert(value: Expr, dtype: str) -> Expr:
    """`value` converted to `dtype` as numpy's astype (ml_dtypes) does, in kernel IR that uses
    no narrow arithmetic; one side at least is narrow."""
    src = value.dtype
    if src == dtype:
        return value
    if src in NARROW_FLOATS:
        wide = decode_float(value)
        if is_int(dtype) and not is_narrow(dtype):  # as ml_dtypes: 0 when out of range
            info = np.iinfo(dtype)
            return _truncate(Cast("float64", wide), int(info.min), int(info.max), dtype)
        if src == "bfloat16" and dtype == "float16":  # NaN payloads dropped, as ml_dtypes does
            wide = select(wide.ne(wide), _copy_sign(wide, 0x7FC00000), wide)
        return convert(wide, dtype)
    if src in NARROW_INTS:
        return convert(decode_int(value), dtype)
    if not is_narrow(dtype):
        return value.astype(dtype)
    if dtype in NARROW_INTS:
        return encode_int(value, dtype)
    if src == "float16":  # exact in float32
        value = Cast("float32", value)
    elif not is_float(src):  # integers and bool, as ml_dtypes: through float64
        value = Cast("float64", value)
    if dtype == "float8_e8m0fnu":
        return encode_e8m0(value)
    return encode_float(value, dtype)


# ---- narrow floats -------------------------------------------------------------------------------
def _u32(value: int) -> Expr:
    return IntImm(value, "uint32")


def _bits(x: Expr, dtype: str) -> Expr:
    """Integer `x` (the bits, in its low bits) as the narrow `dtype`."""
    return Reinterpret(dtype, x.astype(storage_dtype(dtype)))


def decode_float(value: Expr) -> Expr:
    """A narrow float as the float32 of the same value (exact)."""
    fmt = FORMATS[value.dtype]
    b = Cast("uint32", Reinterpret(storage_dtype(value.dtype), value))
    if value.dtype == "bfloat16":  # float32's top half
        return Reinterpret("float32", b * _u32(1 << 16))
    field = fmt.exponent + fmt.mantissa
    magnitude = b % _u32(1 << field)
    shift = 1 << (23 - fmt.mantissa)
    normal = magnitude * _u32(shift) + _u32((127 - fmt.bias) << 23)
    if fmt.special == "e8m0":  # 2**(b - 127); code 0 is 2**-127, a float32 subnormal
        bits = select(b.eq(_u32(0)), _u32(1 << 22), normal)
        return Reinterpret("float32", select(b.eq(_u32(0xFF)), _u32(0x7FC00000), bits))
    subnormal_value = Cast("float32", magnitude) * FloatImm(2.0 ** (1 - fmt.bias - fmt.mantissa))
    bits = select(magnitude < _u32(1 << fmt.mantissa), Reinterpret("uint32", subnormal_value),
                  normal)  # fmt: skip
    sign = (b // _u32(1 << field)) * _u32(1 << 31)
    if fmt.special == "ieee":  # inf, and NaNs as float32's quiet NaN
        inf = fmt.inf_magnitude
        special = select(magnitude.eq(_u32(inf)), _u32(0x7F800000), _u32(0x7FC00000))
        bits = select(magnitude < _u32(inf), bits, special)
    elif fmt.special == "nan_max":
        bits = select(magnitude.eq(_u32(fmt.max_magnitude + 1)), _u32(0x7FC00000), bits)
    elif fmt.special == "fnuz":  # the negative zero code is the NaN (ml_dtypes: a negative NaN)
        bits = select(b.eq(_u32(0x80)), _u32(0x7FC00000), bits)
    return Reinterpret("float32", sign + bits)


def encode_float(x: Expr, dtype: str) -> Expr:
    """float32 or float64 `x` rounded to the narrow float `dtype` (nearest, ties to even)."""
    fmt = FORMATS[dtype]
    exponent, mantissa, bias, unsigned = _SOURCES[x.dtype]
    negative, a = _sign_and_magnitude(x)
    inf_src = ((1 << exponent) - 1) << mantissa

    def u(v: int) -> Expr:
        return IntImm(v, unsigned)

    # The normal range: drop the extra mantissa bits rounding to nearest even, and rebias. The
    # operand is clamped into the normal range, so nothing wraps (the select picks the lanes).
    k = mantissa - fmt.mantissa
    rebias = (bias - fmt.bias) << mantissa
    min_normal = (bias - fmt.bias + 1) << mantissa  # the target's smallest normal, as source bits
    if fmt.exponent == exponent:  # bfloat16 from float32: subnormals round the same way
        min_normal = 0
    an = maximum(minimum(a, u(inf_src)), u(min_normal))
    lsb = (an // u(1 << k)) % u(2)
    magnitude = (an - u(rebias) + u((1 << (k - 1)) - 1) + lsb) // u(1 << k)
    if min_normal:  # below it: a multiple of the smallest subnormal, rounded in the source float
        smallest_normal = FloatImm(2.0 ** (1 - fmt.bias), x.dtype)
        scaled = minimum(fabs(x), smallest_normal) * FloatImm(2.0 ** (fmt.bias - 1 + fmt.mantissa),
                                                                x.dtype)  # fmt: skip
        magnitude = select(a < u(min_normal), Cast(unsigned, round_even(scaled)), magnitude)
    sign = select(negative, u(fmt.sign_bit), u(0))
    if fmt.special == "ieee":
        too_big = sign + u(fmt.inf_magnitude)
        nan = sign + u(fmt.inf_magnitude | (1 << (fmt.mantissa - 1)))
    elif fmt.special == "nan_max":
        too_big = nan = sign + u(fmt.max_magnitude + 1)
    elif fmt.special == "fnuz":
        too_big = nan = u(0x80)
    else:  # float4: saturates, and NaN becomes a zero of the opposite sign (as ml_dtypes does)
        too_big = sign + u(fmt.max_magnitude)
        nan = select(negative, u(0), u(fmt.sign_bit))
    out = select(magnitude > u(fmt.max_magnitude), too_big, sign + magnitude)
    if fmt.special == "fnuz":  # no negative zero
        out = select(magnitude.eq(u(0)), u(0), out)
    out = select(a > u(inf_src), nan, out)
    return _bits(out, dtype)


def _sign_and_magnitude(x: Expr) -> tuple[Expr, Expr]:
    """Whether float `x`'s sign bit is set, and the bits of |x| (no sign bit: non-negative)."""
    exponent, mantissa, _, itype = _SOURCES[x.dtype]
    bits = Reinterpret(itype, x)
    if itype.startswith("u"):
        sign = IntImm(1 << (exponent + mantissa), itype)
        return bits >= sign, bits % sign
    return bits < IntImm(0, itype), Reinterpret(itype, fabs(x))


def encode_e8m0(x: Expr) -> Expr:
    """float32 or float64 `x` as float8_e8m0fnu, as ml_dtypes rounds: the nearest power of two
    by the mantissa's top bit (ties away), 2**-127 for anything smaller; NaN for NaN, inf, zero,
    negatives and overflow."""
    _, mantissa, bias, itype = _SOURCES[x.dtype]
    _, bits = _sign_and_magnitude(x)  # negatives are NaN whatever their bits
    e = Cast("int32", bits // IntImm(1 << mantissa, itype))
    half = Cast("int32", (bits // IntImm(1 << (mantissa - 1), itype)) % IntImm(2, itype))
    code = e - IntImm(bias - 127, "int32") + half
    tiny = fabs(x) >= FloatImm(1.5 * 2.0**-127, x.dtype)  # below 2**-126: 2**-127 or 2**-126
    code = select(e < IntImm(bias - 126, "int32"), select(tiny, IntImm(1, "int32"), 0), code)
    invalid = (x <= FloatImm(0.0, x.dtype)) | x.ne(x) | (code > IntImm(254, "int32"))
    return _bits(select(invalid, IntImm(0xFF, "int32"), code), "float8_e8m0fnu")


def onnx_e8m0(x: Expr, saturate: bool, round_mode: str) -> Expr:
    """float32 `x` as float8_e8m0fnu by ONNX's rule (onnx.numpy_helper.to_float8e8m0): the
    exponent field of |x| rounded by `round_mode` (up, down or nearest), clamped at 2**127 when
    `saturate`; NaN and inf give NaN."""
    bits = Reinterpret("uint32", x)
    e = Cast("int32", (bits // _u32(1 << 23)) % _u32(256))
    fraction = bits % _u32(1 << 23)
    if round_mode == "up":
        up = fraction > _u32(0)
    elif round_mode == "nearest":
        g = fraction >= _u32(1 << 22)
        rest = (fraction % _u32(1 << 22)) > _u32(0)
        up = g & (rest | (e > IntImm(0, "int32")))
    else:
        up = None
    code = e if up is None else e + select(up, IntImm(1, "int32"), 0)
    if saturate and up is not None:
        code = select(e.eq(IntImm(254, "int32")), e, code)
    code = select(e.eq(IntImm(255, "int32")) | (code > IntImm(254, "int32")),
                  IntImm(255, "int32"), code)  # fmt: skip
    return _bits(code, "float8_e8m0fnu")


def narrow_literal(value: float | int, dtype: str) -> Expr:
    """A literal of a narrow type as its bits (rounded as numpy rounds a Python number)."""
    bits = int(np.asarray(value).astype(numpy_dtype(dtype)).view(storage_dtype(dtype)))
    return Reinterpret(dtype, IntImm(bits, storage_dtype(dtype)))


def literal_array(e: Expr) -> np.ndarray | None:
    """The value of a narrow literal made by `narrow_literal` (a 0-d array), else None."""
    if isinstance(e, Reinterpret) and isinstance(e.value, IntImm):
        return np.asarray(e.value.value, storage_dtype(e.dtype)).view(e.dtype)
    return None


def _copy_sign(x: Expr, bits: int) -> Expr:
    """The float32 of `bits` with float32 `x`'s sign."""
    sign = Reinterpret("uint32", x) // _u32(1 << 31) * _u32(1 << 31)
    return Reinterpret("float32", sign + _u32(bits))


def _truncate(x: Expr, lo: int, hi: int, dtype: str) -> Expr:
    """Float `x` truncated to integer `dtype` when that lands in [lo, hi], else 0 (NaN too)."""
    below, low, above = (FloatImm(float(v), x.dtype) for v in (lo - 1, lo, hi + 1))
    inside = ((x > below) | x.eq(low)) & (x < above)  # lo - 1 may round to lo (int64)
    return Cast(dtype, select(inside, x, FloatImm(0.0, x.dtype)))


# ---- narrow integers -----------------------------------------------------------------------------
def decode_int(value: Expr) -> Expr:
    """int4/uint4/int2/uint2 as int32 (the byte's low bits, sign-extended when signed)."""
    n, signed = _INT_BITS[value.dtype]
    low = Cast("int32", Reinterpret("uint8", value)) % IntImm(1 << n, "int32")
    if not signed:
        return low
    return low - select(low >= IntImm(1 << (n - 1), "int32"), IntImm(1 << n, "int32"), 0)


def encode_int(x: Expr, dtype: str) -> Expr:
    """`x` as a narrow integer, as ml_dtypes converts: integers wrap; floats truncate, and one
    out of range (or NaN) becomes 0."""
    n, signed = _INT_BITS[dtype]
    lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)
    if is_float(x.dtype):
        x = _truncate(x, lo, hi, "int32")
    elif x.dtype == "bool":
        x = Cast("int32", x)
    low = x % IntImm(1 << n, x.dtype)  # floor remainder: the low bits, in [0, 2**n)
    return Reinterpret(dtype, Cast("uint8", low))
