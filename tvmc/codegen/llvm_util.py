"""Small llvmlite helpers shared by the code generators: types, constants, declarations."""

from __future__ import annotations

from llvmlite import ir

from tvmc.dtypes import NARROW_FLOATS, NARROW_INTS

_SCALAR = {
    "float16": ir.HalfType(),
    "float32": ir.FloatType(),
    "float64": ir.DoubleType(),
    "int8": ir.IntType(8),
    "int16": ir.IntType(16),
    "int32": ir.IntType(32),
    "int64": ir.IntType(64),
    "uint8": ir.IntType(8),
    "uint16": ir.IntType(16),
    "uint32": ir.IntType(32),
    "uint64": ir.IntType(64),
    "bool": ir.IntType(1),
    # narrow types, as the bits they are stored in (legalize computes on them wide)
    "bfloat16": ir.IntType(16),
    **dict.fromkeys(NARROW_FLOATS[1:] + NARROW_INTS, ir.IntType(8)),
}

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def ir_type(dtype: str, lanes: int = 1) -> ir.Type:
    """The register type of `dtype` over `lanes` (bool is i1)."""
    t = _SCALAR[dtype]
    return t if lanes == 1 else ir.VectorType(t, lanes)


def mem_type(dtype: str, lanes: int = 1) -> ir.Type:
    """The in-memory type: like ir_type, but bool is a byte (numpy's layout)."""
    t = I8 if dtype == "bool" else _SCALAR[dtype]
    return t if lanes == 1 else ir.VectorType(t, lanes)


def type_suffix(t: ir.Type) -> str:
    """The overload suffix LLVM intrinsics use: f32, v16f32, i64, ..."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(t)]


def lanes_of(t: ir.Type) -> int:
    """1 for scalars, the element count for vectors."""
    return t.count if isinstance(t, ir.VectorType) else 1


def element(t: ir.Type) -> ir.Type:
    """The scalar type of a scalar or vector type."""
    return t.element if isinstance(t, ir.VectorType) else t


def splat(t: ir.Type, value: int | float) -> ir.Constant:
    """A constant of type `t`, repeated over the lanes when `t` is a vector."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


def declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The function `name` in `module`, declared with this signature if not there yet.

    Intrinsics are declared by hand: `declare_intrinsic` mistypes vector and fma overloads.
    """
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name)


def shared_i32(module: ir.Module, name: str) -> ir.GlobalVariable:
    """The module's `i32 <name>` global, defined (as 0) on first use. A program's kernels
    compiled in several modules share one: the others declare it (`tvmc.codegen.program`)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    gv = ir.GlobalVariable(module, I32, name)
    gv.initializer = ir.Constant(I32, 0)
    gv.type = PTR  # llvmlite hands back a typed pointer; opaque keeps loads consistent
    return gv


def intrinsic(module: ir.Module, name: str, t: ir.Type, nargs: int) -> ir.Function:
    """The overloaded intrinsic `llvm.<name>.<suffix of t>` taking `nargs` values of type `t`."""
    return declare(module, f"llvm.{name}.{type_suffix(t)}", t, [t] * nargs)
