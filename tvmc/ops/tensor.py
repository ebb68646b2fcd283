"""Tensor and shape manipulation ops: Concat, Split, Slice, Reshape, Transpose, Gather, ...

Every static parameter is a resolved attribute: Reshape holds the full target shape, Slice one
start/end/step per axis already clamped, Pad one begin/end pair per axis. The frontend lowers
Flatten, Squeeze, Unsqueeze (to Reshape) and DepthToSpace/SpaceToDepth (Reshape, Transpose).
Converters emit non-negative axes; the rules also accept negative ones.
"""

from __future__ import annotations

import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.ops.common import broadcast_shape, normalize_axis, same_dtype
from tvmc.ops.registry import BROADCAST, INJECTIVE, REQUIRED, Attrs, register

_MANY = (1, 1 << 16)
INDEX_DTYPES = ("int32", "int64")
PAD_MODES = ("constant", "reflect", "edge", "wrap")


# ---- Concat / Split ------------------------------------------------------------------------------
def _concat_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    dtype = same_dtype(types, "Concat")
    rank = types[0].ndim
    if any(t.ndim != rank for t in types):
        raise ValueError(
            f"Concat inputs must share one rank, got shapes {[list(t.shape) for t in types]}"
        )
    axis = normalize_axis(attrs["axis"], rank, "Concat")
    shape = list(types[0].shape)
    for t in types[1:]:
        if any(a != b for i, (a, b) in enumerate(zip(shape, t.shape)) if i != axis):
            raise ValueError(
                f"Concat inputs differ outside axis {axis}: {[list(t.shape) for t in types]}"
            )
    shape[axis] = sum(t.shape[axis] for t in types)
    return [TensorType(tuple(shape), dtype)]


@register("Concat", _concat_rule, attrs={"axis": REQUIRED}, kind=INJECTIVE, num_inputs=_MANY)
def concat(attrs, *xs):
    return np.concatenate(xs, axis=attrs["axis"])


def _split_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    axis = normalize_axis(attrs["axis"], x.ndim, "Split")
    sizes = attrs["split"]
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise ValueError(f"Split sizes {list(sizes)} do not add up to dimension {x.shape[axis]}")
    return [TensorType(x.shape[:axis] + (s,) + x.shape[axis + 1 :], x.dtype) for s in sizes]


@register("Split", _split_rule, attrs={"axis": 0, "split": REQUIRED}, kind=INJECTIVE)
def split(attrs, x):
    """`split` holds every part's size along `axis` (the frontend resolves equal splits)."""
    bounds = np.cumsum(attrs["split"])[:-1]
    return tuple(np.split(x, bounds, axis=attrs["axis"]))


def equal_split(dim: int, parts: int, uneven_ok: bool) -> tuple[int, ...]:
    """Sizes of `parts` chunks of `dim`; the last may be smaller when `uneven_ok` (Split-18)."""
    if parts <= 0:
        raise ValueError(f"Split into {parts} parts")
    if dim % parts and not uneven_ok:
        raise ValueError(f"dimension {dim} does not split into {parts} equal parts")
    chunk = -(-dim // parts)
    return tuple(max(0, min(chunk, dim - i * chunk)) for i in range(parts))


# ---- Slice ---------------------------------------------------------------------------------------
def normalize_slice(dim: int, start: int, end: int, step: int) -> tuple[int, int]:
    """ONNX start/end clamped for `dim`; an empty range becomes (0, 0); end may be -1 (step < 0)."""
    if step == 0:
        raise ValueError("Slice step must not be 0")
    start += dim if start < 0 else 0
    end += dim if end < 0 else 0
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return (start, end) if len(range(start, end, step)) else (0, 0)


def _slice_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    starts, ends, steps = attrs["starts"], attrs["ends"], attrs["steps"]
    if not len(starts) == len(ends) == len(steps) == x.ndim:
        raise ValueError(f"Slice needs one start, end and step per axis of {x}")
    shape = []
    for dim, start, end, step in zip(x.shape, starts, ends, steps):
        lowest = 0 if step > 0 else -1
        if step == 0 or not (0 <= start <= dim and lowest <= end <= dim):
            raise ValueError(f"Slice bounds {start}:{end}:{step} are not normalized for dim {dim}")
        shape.append(len(range(start, end, step)))
    return [TensorType(tuple(shape), x.dtype)]


@register(
    "Slice",
    _slice_rule,
    attrs={"starts": REQUIRED, "ends": REQUIRED, "steps": REQUIRED},
    kind=INJECTIVE,
)
def slice_(attrs, x):
    """out[i] = x[start + i * step] per axis; ends of -1 mean 'through index 0' (step < 0)."""
    index = tuple(
        slice(s, e if e >= 0 else None, st)
        for s, e, st in zip(attrs["starts"], attrs["ends"], attrs["steps"])
    )
    return x[index]


# ---- Reshape / Transpose / Expand / Tile ---------------------------------------------------------
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


@register("Reshape", _reshape_rule, attrs={"shape": REQUIRED}, kind=INJECTIVE)
def reshape(attrs, x):
    """`shape` is fully resolved: no 0 or -1 placeholders."""
    return x.reshape(attrs["shape"])


def _transpose_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    perm = attrs["perm"]
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"Transpose perm {list(perm)} is not a permutation of {x.ndim} axes")
    return [TensorType(tuple(x.shape[p] for p in perm), x.dtype)]


@register("Transpose", _transpose_rule, attrs={"perm": REQUIRED}, kind=INJECTIVE)
def transpose(attrs, x):
    return np.transpose(x, attrs["perm"])


def _expand_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    return [TensorType(broadcast_shape(x.shape, tuple(attrs["shape"])), x.dtype)]


@register("Expand", _expand_rule, attrs={"shape": REQUIRED}, kind=BROADCAST)
def expand(attrs, x):
    """ONNX broadcasting works both ways: a dim of 1 in `shape` keeps the input's dim."""
    return np.broadcast_to(x, broadcast_shape(x.shape, tuple(attrs["shape"]))).copy()


def _tile_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    repeats = attrs["repeats"]
    if len(repeats) != x.ndim or any(r < 0 for r in repeats):
        raise ValueError(
            f"Tile repeats {list(repeats)} must be one non-negative count per axis of {x}"
        )
    return [TensorType(tuple(d * r for d, r in zip(x.shape, repeats)), x.dtype)]


@register("Tile", _tile_rule, attrs={"repeats": REQUIRED}, kind=INJECTIVE)
def tile(attrs, x):
    return np.tile(x, attrs["repeats"])


# ---- Gather --------------------------------------------------------------------------------------
def _gather_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    data, indices = types
    if indices.dtype not in INDEX_DTYPES:
        raise ValueError(f"Gather indices must be int32 or int64, got {indices.dtype}")
    if data.ndim == 0:
        raise ValueError("Gather needs data of rank >= 1")
    axis = normalize_axis(attrs["axis"], data.ndim, "Gather")
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1 :]
    return [TensorType(shape, data.dtype)]


@register("Gather", _gather_rule, attrs={"axis": 0}, kind=INJECTIVE, num_inputs=2)
def gather(attrs, data, indices):
    """Negative indices count from the end; out-of-range ones raise IndexError."""
    axis = normalize_axis(attrs["axis"], data.ndim)
    dim = data.shape[axis]
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        raise IndexError(f"Gather index out of range [{-dim}, {dim - 1}] on axis {axis}")
    return np.take(data, np.where(indices < 0, indices + dim, indices), axis=axis)


# ---- Pad -----------------------------------------------------------------------------------------
def _pad_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    pads, mode = attrs["pads"], attrs["mode"]
    if mode not in PAD_MODES:
        raise ValueError(f"Pad mode {mode!r} is not one of {list(PAD_MODES)}")
    if len(pads) != 2 * x.ndim:
        raise ValueError(f"Pad needs {2 * x.ndim} pads (begins then ends) for {x}, got {len(pads)}")
    shape = []
    for i, dim in enumerate(x.shape):
        begin, end = pads[i], pads[i + x.ndim]
        kept = dim + min(begin, 0) + min(end, 0)
        if kept < 0:
            raise ValueError(f"Pad crops axis {i} of size {dim} by more than its size")
        grow = max(begin, 0), max(end, 0)
        if mode != "constant" and max(grow) > 0:
            limit = kept - 1 if mode == "reflect" else kept if mode == "wrap" else math.inf
            if kept == 0 or max(grow) > limit:
                raise ValueError(f"Pad {mode} cannot pad axis {i} of size {kept} by {max(grow)}")
        shape.append(kept + sum(grow))
    return [TensorType(tuple(shape), x.dtype)]


@register(
    "Pad",
    _pad_rule,
    attrs={"pads": REQUIRED, "mode": "constant", "constant_value": 0},
    kind=INJECTIVE,
)
def pad(attrs, x):
    """`pads` is [x1_begin, x2_begin, ..., x1_end, ...]; negative pads crop before padding."""
    n = x.ndim
    pads = attrs["pads"]
    crop = tuple(slice(max(-pads[i], 0), x.shape[i] - max(-pads[i + n], 0)) for i in range(n))
    widths = [(max(pads[i], 0), max(pads[i + n], 0)) for i in range(n)]
    if attrs["mode"] == "constant":
        return np.pad(x[crop], widths, constant_values=x.dtype.type(attrs["constant_value"]))
    return np.pad(x[crop], widths, mode=attrs["mode"])
