"""Elementwise and broadcasting ops: one input (`unary`), two or more (`binary`); each op's
numpy reference beside its kernel IR expression (a compute that serves every target); `cast`
converts between element types.
`literals`: how computes read constants and broadcast operands. Registered here."""

from tvmc.ops.elementwise import binary, cast, unary
from tvmc.ops.registry import register

for _opdef in (*unary.DEFINITIONS, *cast.DEFINITIONS, *binary.DEFINITIONS):
    register(_opdef)
