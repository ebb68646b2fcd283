"""Computes of the injective tensor ops: each output element reads one input element.

Reshape, Transpose, Concat, Split, Slice, Expand, Tile, Gather and Pad only re-index: the
accessor turns output indices into input indices. Every index handed to `read` is clamped into
the input's bounds wherever it could leave them (a Concat or Pad select evaluates both arms, and
Gather indices come from data), so no lane of a vector ever loads out of bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, IntImm, const, maximum, minimum, select
from tvmc.ops.common import normalize_axis
from tvmc.ops.elementwise_kernels import literal
from tvmc.ops.lowering import Accessor, Indices, TensorRef, broadcast_read, compute
from tvmc.ops.registry import Attrs

ZERO = IntImm(0, "int32")


def clamp(i: Expr, lo: int, hi: int) -> Expr:
    """`i` limited to [lo, hi] (bounds known at compile time)."""
    return minimum(maximum(i, const(lo, i.dtype)), const(hi, i.dtype))


# ---- Reshape -------------------------------------------------------------------------------------
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


@compute("Reshape")
def reshape(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
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


# ---- Transpose / Expand / Tile / Slice / Split ---------------------------------------------------
@compute("Transpose")
def transpose(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """Output axis k is input axis perm[k]."""
    (x,) = inputs
    perm = [normalize_axis(p, x.type.ndim) for p in attrs["perm"]]
    inverse = [perm.index(a) for a in range(len(perm))]
    return [lambda idx: x.read(tuple(idx[k] for k in inverse))]


@compute("Expand")
def expand(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """Numpy broadcasting of the input to the output shape."""
    return [broadcast_read(inputs[0], out_types[0].shape)]


@compute("Tile")
def tile(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """Each repeated axis reads index modulo the input dim."""
    (x,) = inputs
    repeats = attrs["repeats"]

    def read(idx: Indices) -> Expr:
        return x.read(
            tuple(i % d if r > 1 and d > 1 else i for i, d, r in zip(idx, x.shape, repeats))
        )

    return [read]


@compute("Slice")
def slice_(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """in[start + i * step] per axis (steps may be negative)."""
    (x,) = inputs
    bounds = list(zip(attrs["starts"], attrs["steps"]))

    def axis_index(i: Expr, start: int, step: int) -> Expr:
        i = i * step if step != 1 else i
        return i + start if start else i

    return [lambda idx: x.read(tuple(axis_index(i, *b) for i, b in zip(idx, bounds)))]


@compute("Split")
def split(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """One accessor per part: the part's index along `axis` shifted by its offset."""
    (x,) = inputs
    axis = normalize_axis(attrs["axis"], x.type.ndim)
    offsets = np.cumsum([0, *attrs["split"]])[:-1]

    def part(offset: int) -> Accessor:
        def read(idx: Indices) -> Expr:
            return x.read(
                tuple(i + offset if a == axis and offset else i for a, i in enumerate(idx))
            )

        return read

    return [part(int(off)) for off in offsets]


# ---- Concat --------------------------------------------------------------------------------------
@compute("Concat")
def concat(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """A select over the inputs' ranges along `axis`; each arm's index is clamped into its input
    because a select evaluates every arm."""
    axis = normalize_axis(attrs["axis"], out_types[0].ndim)
    parts, offset = [], 0
    for ref in inputs:
        size = ref.shape[axis]
        if size:  # an empty input owns no range
            parts.append((ref, offset, size))
        offset += size

    def read(idx: Indices) -> Expr:
        j = idx[axis]

        def arm(ref: TensorRef, start: int, size: int) -> Expr:
            local = clamp(j - start, 0, size - 1) if len(parts) > 1 else j
            return ref.read(tuple(local if a == axis else i for a, i in enumerate(idx)))

        value = arm(*parts[-1])
        for ref, start, size in reversed(parts[:-1]):
            value = select(j < start + size, arm(ref, start, size), value)
        return value

    return [read]


# ---- Gather --------------------------------------------------------------------------------------
def _constant_index(values: np.ndarray, dim: int) -> tuple[int, int] | None:
    """(first, step) when constant 1-D indices (after wrapping) form an arithmetic sequence."""
    v = np.where(values < 0, values + dim, values).astype(np.int64).reshape(-1)
    if v.size == 0 or v.min() < 0 or v.max() >= dim:
        return None
    step = int(v[1] - v[0]) if v.size > 1 else 0
    if np.array_equal(v, v[0] + step * np.arange(v.size)):
        return int(v[0]), step
    return None


@compute("Gather")
def gather(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """out[..., j..., ...] = data[..., indices[j...] (wrapped if negative, clamped), ...]."""
    data, indices = inputs
    axis = normalize_axis(attrs["axis"], data.type.ndim)
    dim, q = data.shape[axis], indices.type.ndim
    sequence = None
    if indices.value is not None and q <= 1:
        sequence = _constant_index(indices.value, dim)

    def position(idx: Indices) -> Expr:
        if sequence is not None:  # no load: a constant or an affine function of the index
            first, step = sequence
            return const(first) if q == 0 or step == 0 else idx[axis] * step + first
        i = indices.read(idx[axis : axis + q])
        i = select(i < const(0, i.dtype), i + const(dim, i.dtype), i)
        return clamp(i, 0, dim - 1).astype("int32")  # after clamping it fits the int32 index

    def read(idx: Indices) -> Expr:
        return data.read((*idx[:axis], position(idx), *idx[axis + q :]))

    return [read]


# ---- Pad -----------------------------------------------------------------------------------------
def _pad_axis(i: Expr, begin: int, end: int, dim: int, mode: str) -> tuple[Expr, Expr | None]:
    """(input index, in-bounds condition or None) of output index `i` along one axis."""
    src = i - begin if begin else i
    lo, hi = max(-begin, 0), dim - 1 - max(-end, 0)  # the kept (uncropped) input range
    if begin <= 0 and end <= 0:  # only cropping: always inside
        return src, None
    if mode == "constant":
        inside = (src >= const(lo)) & (src <= const(hi))
        safe_lo = min(lo, dim - 1)  # when everything is cropped, lo > hi may leave the input
        return clamp(src, safe_lo, max(hi, safe_lo)), inside
    if mode == "reflect":  # the rule guarantees one reflection suffices (pads < kept size)
        src = select(src < const(lo), const(2 * lo) - src, src)
        src = select(src > const(hi), const(2 * hi) - src, src)
    elif mode == "wrap":  # and one period here (pads <= kept size)
        n = hi - lo + 1
        src = select(src < const(lo), src + n, select(src > const(hi), src - n, src))
    return clamp(src, lo, hi), None  # edge: the clamp itself


@compute("Pad")
def pad(attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]) -> list[Accessor]:
    """Output index minus the begin pad, folded back (reflect/wrap/edge) or masked (constant)."""
    (x,) = inputs
    pads, mode, n = attrs["pads"], attrs["mode"], x.type.ndim
    fill = literal(attrs["constant_value"], x.dtype)

    def read(idx: Indices) -> Expr:
        src, inside = [], None
        for a, i in enumerate(idx):
            s, cond = _pad_axis(i, pads[a], pads[a + n], x.shape[a], mode)
            src.append(s)
            if cond is not None:
                inside = cond if inside is None else inside & cond
        value = x.read(tuple(src))
        return value if inside is None else select(inside, value, fill)

    return [read]
