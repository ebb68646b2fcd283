"""Ops on the bits of integers: BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot and BitShift, each
op's numpy reference beside its kernel IR expression (`&`, `|`, `^`, `~`, `<<`, `>>`).

BitShift follows ONNX (opset 28) and numpy: a right shift of a signed type is arithmetic, and a
shift amount that is negative or not below the bit width shifts every bit out (0, or -1 for a
right shift of a negative value).
"""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import INT_DTYPES, broadcast_rule, unary_rule
from tvmc.ops.elementwise.binary import binary
from tvmc.ops.elementwise.literals import operand
from tvmc.ops.elementwise.unary import unary
from tvmc.ops.lowering import Accessor, Attrs, TensorRef, computed
from tvmc.ops.registry import BROADCAST, REQUIRED, OpDef

INTEGERS = (INT_DTYPES, "integer")
DIRECTIONS = ("LEFT", "RIGHT")


def _shift_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    if attrs["direction"] not in DIRECTIONS:
        raise ValueError(f"BitShift direction must be LEFT or RIGHT, got {attrs['direction']!r}")
    return broadcast_rule("BitShift", dtypes=INTEGERS)(attrs, types)


def _shift_reference(attrs: Attrs, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x, y = np.broadcast_arrays(x, y)
    k = y.astype(np.int64)  # a uint64 amount past 2**63 turns negative: out of range either way
    inside = (k >= 0) & (k < x.dtype.itemsize * 8)
    amount = np.where(inside, k, 0).astype(x.dtype)
    if attrs["direction"] == "LEFT":
        return np.where(inside, np.left_shift(x, amount), x.dtype.type(0))
    bits = x.dtype.itemsize * 8  # the sign fill, computed in x's dtype (uint64 has no -1)
    fill = np.right_shift(x, bits - 1) if x.dtype.kind == "i" else np.zeros_like(x)
    return np.where(inside, np.right_shift(x, amount), fill)


def _shift(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    read_x, read_y = (operand(r, out_types[0].shape) for r in inputs)
    if attrs["direction"] == "LEFT":
        return [lambda idx: read_x(idx) << read_y(idx)]
    return [lambda idx: read_x(idx) >> read_y(idx)]


BIT_SHIFT = OpDef("BitShift", _shift_rule, _shift_reference, computed(_shift),
                  {"direction": REQUIRED}, BROADCAST, (2, 2),
                  doc="x << y (LEFT) or x >> y (RIGHT, arithmetic for signed types); amounts "
                      "outside [0, bits) shift every bit out.")  # fmt: skip

DEFINITIONS = [
    binary("BitwiseAnd", np.bitwise_and, lambda a, b: a & b, "a & b.", dtypes=INTEGERS),
    binary("BitwiseOr", np.bitwise_or, lambda a, b: a | b, "a | b.", dtypes=INTEGERS),
    binary("BitwiseXor", np.bitwise_xor, lambda a, b: a ^ b, "a ^ b.", dtypes=INTEGERS),
    unary("BitwiseNot", lambda a, x: np.invert(x), lambda a, x: ~x, doc="~x: every bit flipped.",
          infer=unary_rule("BitwiseNot", *INTEGERS)),
    BIT_SHIFT,
]  # fmt: skip
