"""Shape/dtype helpers shared by the op modules."""

from __future__ import annotations

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.registry import Attrs, InferRule

FLOAT_DTYPES = ("float16", "float32", "float64", "bfloat16")  # bfloat16 computes in float32
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def same_as_first(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    """One output typed like the first input (unary elementwise ops)."""
    return [types[0]]


def check_dtypes(op: str, types: list[TensorType], dtypes: tuple[str, ...], what: str) -> None:
    """ValueError unless every input's dtype is one of `dtypes` (`what` names them)."""
    for t in types:
        if t.dtype not in dtypes:
            raise ValueError(f"{op} takes {what} tensors, got {t.dtype}")


def unary_rule(
    op: str, dtypes: tuple[str, ...], what: str, out_dtype: str | None = None
) -> InferRule:
    """Rule of a one-input elementwise op defined for `dtypes` only (`out_dtype`: e.g. 'bool')."""

    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        check_dtypes(op, types[:1], dtypes, what)
        return [TensorType(types[0].shape, out_dtype or types[0].dtype)]

    return rule


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """Numpy/ONNX multidirectional broadcasting; ValueError names the clash."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast") from None


def same_dtype(types: list[TensorType], op: str) -> str:
    """The common dtype of inputs that ONNX requires to agree."""
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise ValueError(f"{op} inputs must share one dtype, got {sorted(dtypes)}")
    return types[0].dtype


def broadcast_rule(
    op: str, out_dtype: str | None = None, dtypes: tuple[tuple[str, ...], str] | None = None
):
    """Rule for n-ary broadcasting ops; `out_dtype` overrides the result type (e.g. 'bool'),
    `dtypes` (allowed dtypes, their name) restricts the inputs."""

    def rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
        dtype = same_dtype(types, op)
        if dtypes is not None:
            check_dtypes(op, types, *dtypes)
        return [TensorType(broadcast_shape(*(t.shape for t in types)), out_dtype or dtype)]

    return rule


def normalize_axis(axis: int, ndim: int, op: str = "") -> int:
    """A possibly negative axis as an index into `ndim` dims; ValueError when out of range."""
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op} axis {axis} is out of range for rank {ndim}")
    return axis % ndim if ndim else 0


def normalize_axes(axes, ndim: int, op: str = "") -> tuple[int, ...]:
    return tuple(normalize_axis(int(a), ndim, op) for a in axes)


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether `shape` broadcasts one way onto `target` (ONNX unidirectional broadcasting)."""
    if len(shape) > len(target):
        return False
    return all(d in (1, t) for d, t in zip(reversed(shape), reversed(target)))
