"""Reshape, Transpose, Expand and Tile: each op's rule and reference beside its compute, which
only re-indexes (output indices -> input indices).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr
from tvmc.ops.common import broadcast_shape, normalize_axis
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, broadcast_read, computed
from tvmc.ops.registry import BROADCAST, INJECTIVE, REQUIRED, OpDef
from tvmc.ops.tensor.common import ZERO


# ---- Reshape ---------------------------------------------------------------------------------
def resolve_reshape(in_shape: tuple[int, ...], shape, allowzero: bool = False) -> tuple[int, ...]:
    """ONNX Reshape's target (0 copies a dim unless `allowzero`, one -1 is inferred) resolved."""
    out = [int(d) for d in shape]
    if not allowzero:
        for i, d in enumerate(out):
            if d == 0:
                if i >= len(in_shape):
                    raise ValueError(f"Reshape target {list(shape)}: 0 at {i} has no input dim")
                out[i] = in_shape[i]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ValueError(f"Reshape target {list(shape)} is invalid (at most one -1, no other < 0)")
    total = math.prod(in_shape)
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape {list(in_shape)} to {list(shape)}")
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ValueError(f"cannot reshape {list(in_shape)} ({total} elements) to {list(shape)}")
    return tuple(out)


def _reshape_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    shape = tuple(attrs["shape"])
    if any(d < 0 for d in shape) or math.prod(shape) != x.size:
        raise ValueError(f"cannot reshape {x} to {list(shape)}")
    return [TensorType(shape, x.dtype)]


def reshape(attrs, x):
    """`shape` is fully resolved: no 0 or -1 placeholders."""
    return x.reshape(attrs["shape"])


def reshape_groups(
    in_shape: Sequence[int], out_shape: Sequence[int]
) -> list[tuple[list[int], list[int]]]:
    """Pairs (input axes, output axes) of equal element count, as fine as the shapes allow.

    Reshape only re-indexes within a group, so dims the reshape keeps (a flatten's batch axis,
    an unsqueeze's every axis) map one to one and keep unit-stride, vectorizable loads.
    """
    groups: list[tuple[list[int], list[int]]] = []
    i = o = 0
    while i < len(in_shape) or o < len(out_shape):
        ins, outs, n_in, n_out = [], [], 1, 1
        # Grow the smaller side until the counts meet (and at least one axis was taken).
        while not ins and not outs or n_in != n_out:
            if o >= len(out_shape) or (i < len(in_shape) and n_in <= n_out):
                ins.append(i)
                n_in *= in_shape[i]
                i += 1
            else:
                outs.append(o)
                n_out *= out_shape[o]
                o += 1
        groups.append((ins, outs))
    return groups


def reshape_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """Within each group: output indices -> flat offset -> input indices (row-major)."""
    (x,) = inputs
    in_shape, out_shape = x.shape, out_types[0].shape
    if math.prod(in_shape) == 0:
        return [lambda idx: x.read(tuple(ZERO for _ in in_shape))]  # nothing is ever stored
    groups = reshape_groups(in_shape, out_shape)

    def read(idx: Indices) -> Expr:
        src: list[Expr] = [ZERO] * len(in_shape)
        for ins, outs in groups:
            flat: Expr = ZERO
            for o in outs:
                if out_shape[o] > 1:
                    flat = idx[o] if flat is ZERO else flat * out_shape[o] + idx[o]
            for i in reversed(ins):
                d = in_shape[i]
                src[i] = ZERO if d == 1 else (flat if i == ins[0] else flat % d)
                flat = flat // d if d > 1 else flat
        return x.read(tuple(src))

    return [read]


# ---- Transpose -------------------------------------------------------------------------------
def _transpose_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    perm = attrs["perm"]
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"Transpose perm {list(perm)} is not a permutation of {x.ndim} axes")
    return [TensorType(tuple(x.shape[p] for p in perm), x.dtype)]


def transpose(attrs, x):
    """Output axis k is input axis perm[k]."""
    return np.transpose(x, attrs["perm"])


def transpose_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """Output axis k is input axis perm[k]."""
    (x,) = inputs
    perm = [normalize_axis(p, x.type.ndim) for p in attrs["perm"]]
    inverse = [perm.index(a) for a in range(len(perm))]
    return [lambda idx: x.read(tuple(idx[k] for k in inverse))]


# ---- Expand ----------------------------------------------------------------------------------
def _expand_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    return [TensorType(broadcast_shape(x.shape, tuple(attrs["shape"])), x.dtype)]


def expand(attrs, x):
    """ONNX broadcasting works both ways: a dim of 1 in `shape` keeps the input's dim."""
    return np.broadcast_to(x, broadcast_shape(x.shape, tuple(attrs["shape"]))).copy()


def expand_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """Numpy broadcasting of the input to the output shape."""
    return [broadcast_read(inputs[0], out_types[0].shape)]


# ---- Tile ------------------------------------------------------------------------------------
def _tile_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    repeats = attrs["repeats"]
    if len(repeats) != x.ndim or any(r < 0 for r in repeats):
        raise ValueError(
            f"Tile repeats {list(repeats)} must be one non-negative count per axis of {x}"
        )
    return [TensorType(tuple(d * r for d, r in zip(x.shape, repeats)), x.dtype)]


def tile(attrs, x):
    """The input repeated `repeats[k]` times along each axis k."""
    return np.tile(x, attrs["repeats"])


def tile_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """Each repeated axis reads index modulo the input dim."""
    (x,) = inputs
    repeats = attrs["repeats"]

    def read(idx: Indices) -> Expr:
        return x.read(
            tuple(i % d if r > 1 and d > 1 else i for i, d, r in zip(idx, x.shape, repeats))
        )

    return [read]


DEFINITIONS = [
    OpDef("Reshape", _reshape_rule, reshape, computed(reshape_compute),
          attrs={"shape": REQUIRED}, kind=INJECTIVE),
    OpDef("Transpose", _transpose_rule, transpose, computed(transpose_compute),
          attrs={"perm": REQUIRED}, kind=INJECTIVE),
    OpDef("Expand", _expand_rule, expand, computed(expand_compute),
          attrs={"shape": REQUIRED}, kind=BROADCAST),
    OpDef("Tile", _tile_rule, tile, computed(tile_compute),
          attrs={"repeats": REQUIRED}, kind=INJECTIVE),
]  # fmt: skip
