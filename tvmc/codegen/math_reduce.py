"""Payne-Hanek reduction of huge arguments by pi/2, in float64 arithmetic.

A value c = m * 2**e with m < 2**24 an integer times 2/pi, modulo 4, needs only the bits of 2/pi
from position e - 1 on: the ones before make multiples of 4. A table holds, per e, those bits
(times 2**e) in
float64 pieces of 28 bits, the last one the rest rounded: m times each piece but the last is
exact, so c * 2/pi = j + hi + lo (mod 4) to about 2**-80 with three pieces (float32), 2**-108
with four (float64).
A float32 argument is one such c; a float64 one is split into three (24 + 24 + 5 bits) whose
remainders add up as double-double. Only lanes past the Cody-Waite range need this: it runs
behind a branch taken when any lane does, and loads its pieces per lane.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from llvmlite import ir

from tvmc.codegen.math_builder import F64, I64, Num, where

# 2/pi = 0.a2f9836e... in hexadecimal, 1152 bits (tests/codegen/test_math_accuracy.py checks them)
TWO_OVER_PI = int(
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561"
    "b7246e3a424dd2e006492eea09d1921cfe1deb1cb129a73ee88235f52ebb4484"
    "e99c7026b45f7e413991d639835339f49c845f8bbdf9283b1ff897ffde05980f"
    "ef2f118b5a0a6d1f6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5f17b"
    "3d0739f78a5292ea6bfb5fb11f8d5d08",
    16,
)
_BITS = 1152
PIO2_HI, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17


@dataclass(frozen=True)
class Table:
    """Pieces of 2/pi for the exponents e_lo..e_hi of 24-bit values (e_lo: the first piece 0)."""

    name: str
    e_lo: int
    e_hi: int
    pieces: int  # 28 bits each from bit e - 1 on, the last one the rest rounded

    def values(self) -> list[float]:
        """`pieces` values per exponent: bits e-1..e+26, e+27..e+54, ..., and the rest, times
        2**e (so none is subnormal: the significand m multiplies them)."""
        out: list[float] = []
        for e in range(self.e_lo, self.e_hi + 1):
            starts = [e - 1 + 28 * k for k in range(self.pieces)]
            ends = [s + 27 for s in starts[:-1]] + [_BITS]
            out += [float(_window(s, end) * Fraction(2) ** e) for s, end in zip(starts, ends)]
        return out


SINGLE = Table("tvmc.two_over_pi_f32", 0, 104, 3)  # float32: 2**23 <= m * 2**e < 2**128
DOUBLE = Table("tvmc.two_over_pi_f64", -26, 1000, 4)  # float64's pieces, to ones of no weight


def _window(first: int, last: int) -> Fraction:
    """The bits of 2/pi at positions first..last after the binary point (1-based), as a value."""
    first = max(first, 1)
    if last < first:
        return Fraction(0)
    chunk = (TWO_OVER_PI >> (_BITS - last)) & ((1 << (last - first + 1)) - 1)
    return Fraction(chunk, 1 << last)


def _global(module: ir.Module, table: Table) -> ir.GlobalVariable:
    existing = module.globals.get(table.name)
    if existing is not None:
        return existing
    values = table.values()
    t = ir.ArrayType(F64, len(values))
    space = 1 if str(module.triple).startswith("nvptx") else 0  # the GPU's global memory
    gv = ir.GlobalVariable(module, t, table.name, addrspace=space)
    gv.global_constant = True
    gv.linkage = "internal"
    gv.initializer = ir.Constant(t, values)
    gv.align = 8
    gv.type = ir.PointerType(addrspace=space)  # opaque, so geps type-check
    return gv


def _gather(x: Num, table: Table, index: ir.Value) -> Num:
    """The table's values at `index` (an int64 per lane)."""
    b = x.b
    gv = _global(b.module, table)
    array = ir.ArrayType(F64, (table.e_hi - table.e_lo + 1) * table.pieces)
    zero = ir.Constant(I64, 0)

    def load(i: ir.Value) -> ir.Value:
        ptr = b.gep(gv, [zero, i], inbounds=True, source_etype=array)
        return b.load(ptr, typ=F64, align=8)

    if not isinstance(x.t, ir.VectorType):
        return Num(b, load(index))
    out = ir.Constant(x.t, ir.Undefined)
    for k in range(x.t.count):
        lane = ir.Constant(I64, k)
        out = b.insert_element(out, load(b.extract_element(index, lane)), lane)
    return Num(b, out)


def two_sum(a: Num, c: Num) -> tuple[Num, Num]:
    """(a + c rounded, its exact rounding error)."""
    s = a + c
    back = s - a
    return s, (a - (s - back)) + (c - back)


def _pieces(c: Num, table: Table) -> tuple[Num, Num, Num]:
    """(j, hi, lo): c * 2/pi = j + hi + lo modulo 4, |hi| <= ~1/2, for c of <= 24 bits."""
    b = c.b
    a = c.abs()
    e = b.sub(b.lshr(a.bits(), c.int_const(52)), c.int_const(1023 + 23))
    e = b.select(b.icmp_signed("<", e, c.int_const(table.e_lo)), c.int_const(table.e_lo), e)
    e = b.select(b.icmp_signed(">", e, c.int_const(table.e_hi)), c.int_const(table.e_hi), e)
    base = b.mul(b.sub(e, c.int_const(table.e_lo)), c.int_const(table.pieces))
    h = [_gather(c, table, b.add(base, c.int_const(k))) for k in range(table.pieces)]
    a = a * c.with_bits(b.shl(b.sub(c.int_const(1023), e), c.int_const(52)))  # m = a * 2**-e
    p0 = a * h[0]  # exact: 24 bits times 28, as are all products but the last
    p0 = p0 - (p0 * 0.25).floor() * 4.0  # exact: drops multiples of 4
    j = (p0 + a * h[1]).rint()
    s, t = p0 - j, a.lift(0.0)  # p0 - j is exact
    for piece in h[1:-1]:
        s, err = two_sum(s, a * piece)
        t = t + err
    t = t + a * h[-1]
    hi = s + t
    lo = (s - hi) + t
    negative = c < 0.0
    return where(negative, -j, j), where(negative, -hi, hi), where(negative, -lo, lo)


def _split24(x: Num) -> tuple[Num, Num, Num]:
    """x as three values of at most 24 significant bits each, exactly."""
    b = x.b
    keep = x.int_const(-(1 << 29))  # clears 29 of the 52 fraction bits
    x1 = x.with_bits(b.and_(x.bits(), keep))
    rest = x - x1
    x2 = rest.with_bits(b.and_(rest.bits(), keep))
    return x1, x2, rest - x2


def _any(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    if not isinstance(mask.type, ir.VectorType):
        return mask
    packed = b.bitcast(mask, ir.IntType(mask.type.count))
    return b.icmp_unsigned("!=", packed, ir.Constant(packed.type, 0))


def reduce_huge(x: Num, huge: ir.Value, single: bool) -> tuple[Num, Num, Num]:
    """(n, hi, lo) with x = n * pi/2 + hi + lo and |hi| <= ~pi/4, for the lanes in the mask
    `huge` (x: a float32 value as float64 when `single`); other lanes get zeros."""
    b = x.b
    before = b.block
    with b.if_then(_any(b, huge), likely=False):
        if single:
            n, hi, lo = _pieces(x, SINGLE)
        else:
            parts = [_pieces(c, DOUBLE) for c in _split24(x)]
            n = parts[0][0] + parts[1][0] + parts[2][0]
            hi, lo = two_sum(parts[0][1], parts[1][1])
            lo = lo + parts[0][2] + parts[1][2]
            hi, err = two_sum(hi, parts[2][1])
            lo = lo + err + parts[2][2]
            k = hi.rint()
            n, hi = n + k, hi - k  # exact
        f = hi + lo
        f_lo = (hi - f) + lo
        r = f * PIO2_HI
        r_lo = f.fma(PIO2_HI, -r) + (f * PIO2_LO + f_lo * PIO2_HI)
        r_hi = r + r_lo
        r_lo = (r - r_hi) + r_lo
        then = b.block
    out = []
    for value in (n, r_hi, r_lo):
        phi = b.phi(x.t)
        phi.add_incoming(value.v, then)
        phi.add_incoming(x.lift(0.0).v, before)
        out.append(Num(b, phi))
    return out[0], out[1], out[2]
