"""Buffers: named, statically shaped, contiguous row-major arrays in a memory scope."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tvmc.dtypes import numpy_dtype
from tvmc.kernel.expr import Expr, ExprLike, KernelIRError, Load, as_expr, check_dtype
from tvmc.kernel.stmt import Allocate, Stmt, Store

SCOPES = ("global", "local", "shared")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A contiguous row-major array; kernel params are `global`, scratch is `local`/`shared`."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    scope: str = "global"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        check_dtype(self.dtype)
        if self.scope not in SCOPES:
            raise KernelIRError(f"buffer {self.name}: scope {self.scope!r} is not one of {SCOPES}")
        if any(d <= 0 for d in self.shape):
            raise KernelIRError(f"buffer {self.name}: dimensions must be positive: {self.shape}")

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return numpy_dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """Bytes in all."""
        return self.size * self.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Element (not byte) strides of the row-major layout."""
        out, step = [], 1
        for d in reversed(self.shape):
            out.append(step)
            step *= d
        return tuple(reversed(out))

    def __getitem__(self, index: ExprLike | tuple[ExprLike, ...]) -> Load:
        return Load(self, _indices(index))

    def load(self, *index: ExprLike) -> Load:
        """`buffer[index]` as a method, for call sites that build index tuples."""
        return Load(self, _indices(index))

    def store(self, index: ExprLike | tuple[ExprLike, ...], value: ExprLike) -> Store:
        """The statement `buffer[index] = value` (vector when the index or value has lanes)."""
        return Store(self, _indices(index), as_expr(value, self.dtype))

    def __repr__(self) -> str:
        return f"Buffer({self.name}: {self.dtype}{list(self.shape)} {self.scope})"


def _indices(index: ExprLike | tuple[ExprLike, ...]) -> tuple[Expr, ...]:
    items = index if isinstance(index, tuple) else (index,)
    return tuple(as_expr(i, "int32") for i in items)


def allocate(
    name: str,
    shape: tuple[int, ...],
    body: Callable[[Buffer], Stmt],
    dtype: str = "float32",
    scope: str = "local",
) -> Allocate:
    """`Allocate` of a fresh scratch buffer; `body(buffer)` builds the scope."""
    buf = Buffer(name, shape, dtype, scope)
    return Allocate(buf, body(buf))
