"""Elementwise and broadcasting ops: one input (`unary`), two or more (`binary`), the
trigonometric and hyperbolic functions (`trigonometric`), integer bit operations (`bitwise`);
each op's numpy reference beside its kernel IR expression (a compute that serves every target);
`cast` converts between element types.
`literals`: how computes read constants and broadcast operands. Registered here."""

from tvmc.ops.elementwise import binary, bitwise, cast, trigonometric, unary
from tvmc.ops.registry import register

for _opdef in (*unary.DEFINITIONS, *trigonometric.DEFINITIONS, *cast.DEFINITIONS,
               *binary.DEFINITIONS, *bitwise.DEFINITIONS):  # fmt: skip
    register(_opdef)
