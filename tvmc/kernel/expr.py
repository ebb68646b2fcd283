"""Kernel IR expressions: frozen dataclasses with operator overloading for template authors.

Every expression has an element `dtype` (a numpy dtype name) and a number of `lanes` (1 for a
scalar). A binary operation may mix a scalar with a vector: the scalar is broadcast implicitly.
Vars and Buffers compare by identity (two loops may both call their variable `i`); every other
node compares structurally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Union

from tvmc.dtypes import DTYPES, FLOATS, INTS

if TYPE_CHECKING:
    from tvmc.kernel.buffer import Buffer

FLOAT_DTYPES = FLOATS  # native and narrow (a narrow float computes in float32: legalize.py)
INT_DTYPES = INTS


class KernelIRError(ValueError):
    """A malformed kernel: a bug in a schedule template, never in the user's model."""


def is_float(dtype: str) -> bool:
    """True for float16/32/64 and the narrow floats (bfloat16, float8, float4)."""
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    """True for signed and unsigned integers, narrow ones included (not bool)."""
    return dtype in INT_DTYPES


def check_dtype(dtype: str) -> str:
    """`dtype` itself, or a KernelIRError naming the valid ones."""
    if dtype not in DTYPES:
        raise KernelIRError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
    return dtype


ExprLike = Union["Expr", int, float, bool]


class Expr:
    """Base of all expressions; arithmetic operators build new nodes.

    `child_fields` names the fields that hold child nodes (an Expr or a tuple of them): the one
    place generic walks, rewrites and visitors learn a node's shape from. A node whose dtype,
    lanes and tree size follow from its children computes them once, when built (its children
    have theirs already): derived recursively on every read, they made each pass exponential on
    expressions that share subexpressions.
    """

    dtype: str
    lanes: int
    tree_nodes: int = 1  # nodes as a tree, a shared subexpression counted at each use (leaves: 1)
    child_fields: ClassVar[tuple[str, ...]] = ()
    binding_fields: ClassVar[tuple[str, ...]] = ()  # none: only statements bind names

    def __add__(self, other: ExprLike) -> Expr:
        return Add(*coerce_pair(self, other))

    def __radd__(self, other: ExprLike) -> Expr:
        return Add(*coerce_pair(other, self))

    def __sub__(self, other: ExprLike) -> Expr:
        return Sub(*coerce_pair(self, other))

    def __rsub__(self, other: ExprLike) -> Expr:
        return Sub(*coerce_pair(other, self))

    def __mul__(self, other: ExprLike) -> Expr:
        return Mul(*coerce_pair(self, other))

    def __rmul__(self, other: ExprLike) -> Expr:
        return Mul(*coerce_pair(other, self))

    def __truediv__(self, other: ExprLike) -> Expr:
        return Div(*coerce_pair(self, other))

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return Div(*coerce_pair(other, self))

    def __floordiv__(self, other: ExprLike) -> Expr:
        return FloorDiv(*coerce_pair(self, other))

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return FloorDiv(*coerce_pair(other, self))

    def __mod__(self, other: ExprLike) -> Expr:
        return Mod(*coerce_pair(self, other))

    def __rmod__(self, other: ExprLike) -> Expr:
        return Mod(*coerce_pair(other, self))

    def __neg__(self) -> Expr:
        return Sub(const(0, self.dtype), self)

    def __lt__(self, other: ExprLike) -> Expr:
        return LT(*coerce_pair(self, other))

    def __le__(self, other: ExprLike) -> Expr:
        return LE(*coerce_pair(self, other))

    def __gt__(self, other: ExprLike) -> Expr:
        return GT(*coerce_pair(self, other))

    def __ge__(self, other: ExprLike) -> Expr:
        return GE(*coerce_pair(self, other))

    def __and__(self, other: ExprLike) -> Expr:  # logical on bools, bitwise on integers
        a, b = coerce_pair(self, other)
        return And(a, b) if a.dtype == "bool" else BitAnd(a, b)

    def __or__(self, other: ExprLike) -> Expr:
        a, b = coerce_pair(self, other)
        return Or(a, b) if a.dtype == "bool" else BitOr(a, b)

    def __xor__(self, other: ExprLike) -> Expr:
        return BitXor(*coerce_pair(self, other))

    def __invert__(self) -> Expr:
        return Not(self) if self.dtype == "bool" else BitNot(self)

    def __lshift__(self, other: ExprLike) -> Expr:
        return ShiftLeft(*coerce_pair(self, other))

    def __rshift__(self, other: ExprLike) -> Expr:
        return ShiftRight(*coerce_pair(self, other))

    def __bool__(self) -> bool:
        # `if i < n:` in a template is a bug (it would test the node, not the value).
        raise TypeError("a kernel IR expression has no truth value; use select() or IfThenElse")

    def eq(self, other: ExprLike) -> Expr:
        """Elementwise `==` (Python's `==` stays structural equality)."""
        return EQ(*coerce_pair(self, other))

    def ne(self, other: ExprLike) -> Expr:
        """Elementwise `!=`."""
        return NE(*coerce_pair(self, other))

    def astype(self, dtype: str) -> Expr:
        """A Cast to `dtype` (no node when already of that dtype)."""
        return self if dtype == self.dtype else Cast(dtype, self)


def const(value: int | float | bool, dtype: str = "int32") -> Expr:
    """A literal of `dtype`."""
    check_dtype(dtype)
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    if isinstance(value, float) and not value.is_integer():
        raise KernelIRError(f"literal {value} is not an integer but the dtype is {dtype}")
    return IntImm(int(value), dtype)


def as_expr(value: ExprLike, like: str = "int32") -> Expr:
    """`value` as an Expr; Python numbers become literals of dtype `like`."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, float) and not is_float(like):
        raise KernelIRError(f"float literal {value} mixed with a {like} expression; cast first")
    return const(value, like)


def _derive(node: Expr, dtype: str, lanes: int) -> None:
    """Sets a frozen node's derived dtype, lanes and tree_nodes (instance attributes, not
    fields, so equality and repr are unchanged)."""
    object.__setattr__(node, "dtype", dtype)
    object.__setattr__(node, "lanes", lanes)
    size = 1
    for name in node.child_fields:
        value = getattr(node, name)
        for child in value if isinstance(value, tuple) else (value,):
            size += getattr(child, "tree_nodes", 1)
    object.__setattr__(node, "tree_nodes", size)


def _lanes(*children: Any) -> int:
    # a non-Expr child is the validator's to report, not the constructor's
    return max((getattr(c, "lanes", 1) for c in children), default=1)


def _dtype(child: Any) -> str:
    return getattr(child, "dtype", "?")


def coerce_pair(a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    """Two operands as Exprs of one dtype (numbers adopt the other side's dtype)."""
    like = a.dtype if isinstance(a, Expr) else b.dtype  # type: ignore[union-attr]
    x, y = as_expr(a, like), as_expr(b, like)
    if x.dtype != y.dtype:
        raise KernelIRError(f"dtype mismatch: {x.dtype} vs {y.dtype} in {x!r} and {y!r}; cast one")
    return x, y


# ---- leaves --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A loop or let variable; compared by identity."""

    name: str
    dtype: str = "int32"
    lanes: int = 1

    def __repr__(self) -> str:
        return f"Var({self.name}: {self.dtype})"


@dataclass(frozen=True)
class IntImm(Expr):
    """An integer (or bool) literal."""

    value: int
    dtype: str = "int32"
    lanes: ClassVar[int] = 1


@dataclass(frozen=True)
class FloatImm(Expr):
    """A floating-point literal."""

    value: float
    dtype: str = "float32"
    lanes: ClassVar[int] = 1


# ---- arithmetic and logic ------------------------------------------------------------------------
@dataclass(frozen=True)
class BinaryOp(Expr):
    """Base of two-operand nodes; the result has the operands' dtype and the wider lanes."""

    a: Expr
    b: Expr
    symbol: ClassVar[str] = "?"
    child_fields = ("a", "b")

    def __post_init__(self) -> None:
        _derive(self, self.result_dtype(), _lanes(self.a, self.b))

    def result_dtype(self) -> str:
        """The operands' dtype (comparisons: bool)."""
        return _dtype(self.a)


class Add(BinaryOp):
    """a + b."""

    symbol = "+"


class Sub(BinaryOp):
    """a - b."""

    symbol = "-"


class Mul(BinaryOp):
    """a * b."""

    symbol = "*"


class Div(BinaryOp):
    """True division for floats; C-style truncating division for integers."""

    symbol = "/"


class FloorDiv(BinaryOp):
    """Division rounding towards minus infinity (Python's `//`)."""

    symbol = "//"


class Mod(BinaryOp):
    """Remainder with the divisor's sign (Python's `%`, numpy's mod)."""

    symbol = "%"


class Min(BinaryOp):
    """`a < b ? a : b` (so NaN handling is the select's, identically in every backend)."""

    symbol = "min"


class Max(BinaryOp):
    """`a > b ? a : b`."""

    symbol = "max"


class CmpOp(BinaryOp):
    """Base of comparisons: the result is bool."""

    def result_dtype(self) -> str:
        """bool."""
        return "bool"


class LT(CmpOp):
    """a < b."""

    symbol = "<"


class LE(CmpOp):
    """a <= b."""

    symbol = "<="


class GT(CmpOp):
    """a > b."""

    symbol = ">"


class GE(CmpOp):
    """a >= b."""

    symbol = ">="


class EQ(CmpOp):
    """a == b (ordered for floats)."""

    symbol = "=="


class NE(CmpOp):
    """a != b (true when either float is NaN)."""

    symbol = "!="


class And(BinaryOp):
    """Logical and of bools (both sides evaluated)."""

    symbol = "&&"


class Or(BinaryOp):
    """Logical or of bools (both sides evaluated)."""

    symbol = "||"


@dataclass(frozen=True)
class Not(Expr):
    """Logical negation of a bool."""

    a: Expr
    child_fields = ("a",)

    def __post_init__(self) -> None:
        _derive(self, "bool", _lanes(self.a))


class BitwiseOp(BinaryOp):
    """Base of the operations on the bits of integers (two's complement)."""


class BitAnd(BitwiseOp):
    """a & b."""

    symbol = "&"


class BitOr(BitwiseOp):
    """a | b."""

    symbol = "|"


class BitXor(BitwiseOp):
    """a ^ b."""

    symbol = "^"


class ShiftLeft(BitwiseOp):
    """a << b, wrapping; an amount outside [0, bits) shifts every bit out (0), as in numpy."""

    symbol = "<<"


class ShiftRight(BitwiseOp):
    """a >> b (arithmetic for signed a); an amount outside [0, bits) leaves the sign fill."""

    symbol = ">>"


@dataclass(frozen=True)
class BitNot(Expr):
    """~a: every bit of an integer flipped."""

    a: Expr
    child_fields = ("a",)

    def __post_init__(self) -> None:
        _derive(self, _dtype(self.a), _lanes(self.a))


@dataclass(frozen=True)
class Select(Expr):
    """`cond ? t : f`; both arms are evaluated (so never guard an out-of-bounds load with it)."""

    cond: Expr
    t: Expr
    f: Expr
    child_fields = ("cond", "t", "f")

    def __post_init__(self) -> None:
        _derive(self, _dtype(self.t), _lanes(self.cond, self.t, self.f))


@dataclass(frozen=True)
class Cast(Expr):
    """Conversion to `dtype`; float to int truncates towards zero."""

    dtype: str
    value: Expr
    child_fields = ("value",)

    def __post_init__(self) -> None:
        _derive(self, self.dtype, _lanes(self.value))


@dataclass(frozen=True)
class Reinterpret(Expr):
    """The bits of `value` read as `dtype`, which has the same width (float32 <-> uint32,
    bfloat16 <-> uint16, a float8 or int4 <-> its uint8 byte): no conversion, a bitcast."""

    dtype: str
    value: Expr
    child_fields = ("value",)

    def __post_init__(self) -> None:
        _derive(self, self.dtype, _lanes(self.value))


# ---- memory and vectors --------------------------------------------------------------------------
@dataclass(frozen=True)
class Load(Expr):
    """`buffer[indices]`; a vector load when an index has lanes (e.g. a unit-stride Ramp)."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    child_fields = ("indices",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", tuple(as_expr(i) for i in self.indices))
        _derive(self, self.buffer.dtype, _lanes(*self.indices))


# A vector load whose lanes step by a constant stride up to this is, on CPUs, one load of the
# span they cover and a shuffle (codegen). The span is about `stride` vectors for one, so past
# this most of what it loads is dropped; such loads stay lane by lane. Templates may vectorize
# strided reads up to it.
MAX_SPAN_STRIDE = 4


@dataclass(frozen=True)
class Ramp(Expr):
    """The vector `[base, base + stride, ..., base + (lanes - 1) * stride]`."""

    base: Expr
    stride: Expr
    lanes: int
    child_fields = ("base", "stride")

    def __post_init__(self) -> None:
        _derive(self, _dtype(self.base), self.lanes)


@dataclass(frozen=True)
class Broadcast(Expr):
    """A scalar repeated over `lanes`."""

    value: Expr
    lanes: int
    child_fields = ("value",)

    def __post_init__(self) -> None:
        _derive(self, _dtype(self.value), self.lanes)


@dataclass(frozen=True)
class Shuffle(Expr):
    """Lanes `picks` of `vectors` laid end to end (all of one dtype and lanes): LLVM's
    shufflevector over any count of vectors; `intrin.interleave` builds the common one. (A
    GPU's WarpShuffle statement moves values between threads; this moves lanes of one.)"""

    vectors: tuple[Expr, ...]
    picks: tuple[int, ...]
    child_fields = ("vectors",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "picks", tuple(int(p) for p in self.picks))
        _derive(self, _dtype(self.vectors[0]) if self.vectors else "?", len(self.picks))


# Intrinsics: name -> (number of args, float only, reduces lanes to 1). CIRCULAR: the
# trigonometric and hyperbolic functions and their inverses.
CIRCULAR = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
INTRINSICS: dict[str, tuple[int, bool, bool]] = {
    **{name: (1, True, False) for name in ("exp", "log", "tanh", "erf", "sigmoid", "sqrt")},
    **{name: (1, True, False) for name in CIRCULAR},
    "expm1": (1, True, False),
    **{name: (1, True, False) for name in ("fabs", "floor", "ceil", "round_even")},
    "pow": (2, True, False),
    "fma": (3, True, False),
    "reduce_add": (1, False, True),
    "reduce_max": (1, False, True),
    "reduce_min": (1, False, True),
}


@dataclass(frozen=True)
class Call(Expr):
    """An intrinsic from INTRINSICS applied to `args` (elementwise over lanes unless reduce_*)."""

    name: str
    args: tuple[Expr, ...]
    child_fields = ("args",)

    def __post_init__(self) -> None:
        reduces = INTRINSICS.get(self.name, (0, False, False))[2]
        dtype = _dtype(self.args[0]) if self.args else "?"
        _derive(self, dtype, 1 if reduces else _lanes(*self.args))
