"""Kernel IR statements, the Kernel itself, and small builders for template authors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from tvmc.kernel.expr import Expr, ExprLike, KernelIRError, Var, as_expr

if TYPE_CHECKING:
    from tvmc.kernel.buffer import Buffer

GPU_KINDS = tuple(f"{axis}.{d}" for axis in ("blockIdx", "threadIdx") for d in "xyz")
LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", *GPU_KINDS)


class Stmt:
    """Base of all statements; `child_fields` names the fields holding child nodes (an Expr, a
    Stmt, None or a tuple of them), `binding_fields` those that bind a name rather than use it."""

    child_fields: ClassVar[tuple[str, ...]] = ()
    binding_fields: ClassVar[tuple[str, ...]] = ()


@dataclass(frozen=True)
class For(Stmt):
    """`for var in [0, extent)`; `kind` says how codegen maps the iterations."""

    var: Var
    extent: Expr
    kind: str
    body: Stmt
    child_fields = ("var", "extent", "body")
    binding_fields = ("var",)

    def __post_init__(self) -> None:
        if self.kind not in LOOP_KINDS:
            raise KernelIRError(f"unknown loop kind {self.kind!r}; valid: {', '.join(LOOP_KINDS)}")
        object.__setattr__(self, "extent", as_expr(self.extent, self.var.dtype))


@dataclass(frozen=True)
class Store(Stmt):
    """`buffer[indices] = value`; a vector store when value and indices have lanes."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    child_fields = ("indices", "value")

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", tuple(as_expr(i) for i in self.indices))
        object.__setattr__(self, "value", as_expr(self.value, self.buffer.dtype))


@dataclass(frozen=True)
class Let(Stmt):
    """Binds `var` to `value` for the duration of `body`."""

    var: Var
    value: Expr
    body: Stmt
    child_fields = ("var", "value", "body")
    binding_fields = ("var",)


@dataclass(frozen=True)
class IfThenElse(Stmt):
    """`if (cond) then else else_` with a scalar bool condition."""

    cond: Expr
    then: Stmt
    else_: Stmt | None = None
    child_fields = ("cond", "then", "else_")


@dataclass(frozen=True)
class SeqStmt(Stmt):
    """Statements run in order."""

    stmts: tuple[Stmt, ...]
    child_fields = ("stmts",)


@dataclass(frozen=True)
class Allocate(Stmt):
    """Scratch `buffer` (scope local or shared) live for the duration of `body`, uninitialised."""

    buffer: Buffer
    body: Stmt
    child_fields = ("body",)


@dataclass(frozen=True)
class Barrier(Stmt):
    """A GPU block-wide barrier (`__syncthreads`); every thread of the block must reach it."""

    symbol: ClassVar[str] = "barrier"


@dataclass(frozen=True)
class WarpShuffle(Stmt):
    """`buffer[indices] = value` of the thread whose lane is this one's XOR `lane_mask`.

    CUDA's `__shfl_xor_sync(0xffffffff, value, lane_mask)`: a butterfly exchange inside a warp
    of 32 threadIdx.x lanes (blockDim.x a multiple of 32). Every lane must execute it, so, like
    a Barrier, it never sits under a thread guard. float32 and int32 values.
    """

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    lane_mask: int
    child_fields = ("indices", "value")

    DTYPES: ClassVar[tuple[str, ...]] = ("float32", "int32")

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", tuple(as_expr(i) for i in self.indices))
        object.__setattr__(self, "value", as_expr(self.value, self.buffer.dtype))
        if not 1 <= self.lane_mask < 32:
            raise KernelIRError(f"shuffle lane mask {self.lane_mask}: 1 to 31 (a warp of 32)")


def shuffle_xor(
    buffer: Buffer, index: ExprLike | tuple[ExprLike, ...], value: ExprLike, lane_mask: int
) -> WarpShuffle:
    """`buffer[index] = value` from lane (this lane ^ lane_mask) of the warp."""
    items = index if isinstance(index, tuple) else (index,)
    return WarpShuffle(buffer, tuple(as_expr(i, "int32") for i in items), value, lane_mask)


@dataclass(frozen=True)
class Prefetch(Stmt):
    """A hint that `buffer[indices]` (one scalar element, in bounds) is read soon: its cache line
    is fetched towards the core. It changes no value; a target without prefetch skips it."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    child_fields = ("indices",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", tuple(as_expr(i) for i in self.indices))


def prefetch(buffer: Buffer, index: ExprLike | tuple[ExprLike, ...]) -> Prefetch:
    """`Prefetch` of the cache line holding `buffer[index]`."""
    items = index if isinstance(index, tuple) else (index,)
    return Prefetch(buffer, tuple(as_expr(i, "int32") for i in items))


@dataclass(frozen=True)
class Evaluate(Stmt):
    """Evaluates an expression for its effect (none today; kept for intrinsics with effects)."""

    value: Expr
    child_fields = ("value",)


@dataclass(frozen=True, eq=False)
class Kernel:
    """A function `void name(params...)` over contiguous buffers.

    attrs: "noalias" (default True) says the params never overlap; it may also be a collection of
    the param names that do not alias anything.
    """

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        if not self.name.isidentifier():
            raise KernelIRError(f"kernel name {self.name!r} is not an identifier")

    def noalias(self, buffer: Buffer) -> bool:
        """Whether codegen may mark `buffer`'s pointer noalias."""
        flag = self.attrs.get("noalias", True)
        return bool(flag) if isinstance(flag, bool) else buffer.name in flag


# ---- builders ------------------------------------------------------------------------------------
def seq(*stmts: Stmt | None) -> Stmt:
    """A SeqStmt of `stmts`, flattening nested sequences and dropping None."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        elif s is not None:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def loop(
    name: str,
    extent: ExprLike,
    body: Callable[[Var], Stmt],
    kind: str = "serial",
    dtype: str = "int32",
) -> For:
    """`For` over a fresh Var named `name`; `body(var)` builds the loop body."""
    var = Var(name, dtype)
    return For(var, as_expr(extent, dtype), kind, body(var))


Axis = tuple  # (name, extent) or (name, extent, kind): one loop of a nest


def nest(axes: list[Axis], body: Callable[..., Stmt], dtype: str = "int32") -> Stmt:
    """Perfectly nested loops, outermost first; `body(*vars)` builds the innermost body.

    nest([("i", 4, "parallel"), ("j", 16, "vectorized")], lambda i, j: ...)
    """
    vars_ = [Var(axis[0], dtype) for axis in axes]
    stmt = body(*vars_)
    for var, axis in zip(reversed(vars_), reversed(axes)):
        kind = axis[2] if len(axis) > 2 else "serial"
        stmt = For(var, as_expr(axis[1], dtype), kind, stmt)
    return stmt


def let(name: str, value: Expr, body: Callable[[Var], Stmt]) -> Let:
    """`Let` of a fresh Var (same dtype and lanes as `value`); `body(var)` builds the scope."""
    var = Var(name, value.dtype, value.lanes)
    return Let(var, value, body(var))


def if_then_else(cond: Expr, then: Stmt, else_: Stmt | None = None) -> IfThenElse:
    """`IfThenElse`, named for symmetry with the other builders."""
    return IfThenElse(cond, then, else_)
