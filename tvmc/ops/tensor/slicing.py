"""Concat, Split, Slice and Pad: each op's rule and reference beside its compute. Indices a
select may evaluate on both arms are clamped into the input, so no vector lane reads out of
bounds.
"""

from __future__ import annotations

import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Expr, const, select
from tvmc.ops.common import normalize_axis, same_dtype
from tvmc.ops.elementwise.literals import literal
from tvmc.ops.lowering import Accessor, Attrs, Indices, TensorRef, computed
from tvmc.ops.registry import INJECTIVE, REQUIRED, OpDef
from tvmc.ops.tensor.common import MANY, PAD_MODES, clamp


# ---- Concat ----------------------------------------------------------------------------------
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


def concat(attrs, *xs):
    """The inputs joined along `axis`."""
    return np.concatenate(xs, axis=attrs["axis"])


def concat_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
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


# ---- Split -----------------------------------------------------------------------------------
def _split_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    axis = normalize_axis(attrs["axis"], x.ndim, "Split")
    sizes = attrs["split"]
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise ValueError(f"Split sizes {list(sizes)} do not add up to dimension {x.shape[axis]}")
    return [TensorType(x.shape[:axis] + (s,) + x.shape[axis + 1 :], x.dtype) for s in sizes]


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


def split_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
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


# ---- Slice -----------------------------------------------------------------------------------
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


def slice_(attrs, x):
    """out[i] = x[start + i * step] per axis; ends of -1 mean 'through index 0' (step < 0)."""
    index = tuple(
        slice(s, e if e >= 0 else None, st)
        for s, e, st in zip(attrs["starts"], attrs["ends"], attrs["steps"])
    )
    return x[index]


def slice_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
    """in[start + i * step] per axis (steps may be negative)."""
    (x,) = inputs
    bounds = list(zip(attrs["starts"], attrs["steps"]))

    def axis_index(i: Expr, start: int, step: int) -> Expr:
        i = i * step if step != 1 else i
        return i + start if start else i

    return [lambda idx: x.read(tuple(axis_index(i, *b) for i, b in zip(idx, bounds)))]


# ---- Pad -------------------------------------------------------------------------------------
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


def pad(attrs, x):
    """`pads` is [x1_begin, x2_begin, ..., x1_end, ...]; negative pads crop before padding."""
    n = x.ndim
    pads = attrs["pads"]
    crop = tuple(slice(max(-pads[i], 0), x.shape[i] - max(-pads[i + n], 0)) for i in range(n))
    widths = [(max(pads[i], 0), max(pads[i + n], 0)) for i in range(n)]
    if attrs["mode"] == "constant":
        return np.pad(x[crop], widths, constant_values=x.dtype.type(attrs["constant_value"]))
    return np.pad(x[crop], widths, mode=attrs["mode"])


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


def pad_compute(
    attrs: Attrs, inputs: list[TensorRef], out_types: list[TensorType]
) -> list[Accessor]:
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


DEFINITIONS = [
    OpDef("Concat", _concat_rule, concat, computed(concat_compute),
          attrs={"axis": REQUIRED}, kind=INJECTIVE, num_inputs=MANY),
    OpDef("Split", _split_rule, split, computed(split_compute),
          attrs={"axis": 0, "split": REQUIRED}, kind=INJECTIVE),
    OpDef("Slice", _slice_rule, slice_, computed(slice_compute),
          attrs={"starts": REQUIRED, "ends": REQUIRED, "steps": REQUIRED}, kind=INJECTIVE),
    OpDef("Pad", _pad_rule, pad, computed(pad_compute),
          attrs={"pads": REQUIRED, "mode": "constant", "constant_value": 0}, kind=INJECTIVE),
]  # fmt: skip
