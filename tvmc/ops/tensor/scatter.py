"""ScatterElements and ScatterND: the data copied, then the updates applied in order, each
replacing (`none`) or combining with (add, mul, max, min) the element or slice it addresses.

One template on both targets, of two kernels: the copy (the injective schedule), then the
updates. Updates that address one element must apply in order (duplicate indices: the last
`none` wins, `add` sums them all), so the update kernel runs in parallel (threads on the CPU,
one GPU thread each) only across elements no two updates can share, each walking its updates
serially: for ScatterElements the lines along `axis` (an update changes only its `axis`
coordinate), for ScatterND the positions within the addressed slices (on the CPU the tuples run
in order instead, each slice a contiguous loop). Constant indices that never repeat a target
let every update run on its own. Indices are wrapped and clamped as the gathers do, so no
update writes outside the output.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, Stmt, const, let, loop, maximum, minimum, nest
from tvmc.ops.common import normalize_axis
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, Template, TensorRef
from tvmc.ops.registry import OPAQUE, OpDef
from tvmc.ops.schedule.gpu_launch import grid_loop
from tvmc.ops.schedule.injective import make_kernel, schedule_injective
from tvmc.ops.schedule.microkernel import let_all, unflatten
from tvmc.ops.tensor.common import ROWS, check_index_dtype, data_index, wrapped

REDUCTIONS = ("none", "add", "mul", "max", "min")
_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _check(op: str, attrs: Attrs, data: TensorType, indices: TensorType, updates: TensorType):
    check_index_dtype(op, "indices", indices)
    reduction = attrs["reduction"]
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op} reduction {reduction!r} is not one of {list(REDUCTIONS)}")
    if updates.dtype != data.dtype:
        raise ValueError(f"{op} updates ({updates.dtype}) differ from data ({data.dtype})")


def _apply(reduction: str, old: Expr, new: Expr) -> Expr:
    """The element an update leaves: the update itself, or combined with what is there (on
    bools, add and max are `or`, mul and min `and`, as numpy and onnxruntime compute them)."""
    if old.dtype == "bool" and reduction != "none":
        return old | new if reduction in ("add", "max") else old & new
    if reduction == "add":
        return old + new
    if reduction == "mul":
        return old * new
    if reduction == "max":
        return maximum(old, new)
    return minimum(old, new) if reduction == "min" else new


def _scatter(reduction: str, data: np.ndarray, where: tuple, updates: np.ndarray) -> np.ndarray:
    """`data` with `updates` applied at the index arrays `where`, in order (numpy's ufunc.at)."""
    out = np.array(data, copy=True)
    if reduction == "none":
        out[where] = updates  # repeated indices: the last update wins
    else:
        _UFUNCS[reduction].at(out, where, updates)
    return out


# ---- ScatterElements -------------------------------------------------------------------------
def _scatter_elements_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    data, indices, updates = types
    _check("ScatterElements", attrs, data, indices, updates)
    if data.ndim == 0 or indices.ndim != data.ndim or updates.shape != indices.shape:
        raise ValueError(
            f"ScatterElements needs data and indices of one rank >= 1 and updates shaped like "
            f"indices, got {data}, {indices}, {updates}"
        )
    axis = normalize_axis(attrs["axis"], data.ndim, "ScatterElements")
    if any(i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != axis):
        raise ValueError(
            f"ScatterElements indices {list(indices.shape)} exceed data {list(data.shape)} "
            f"outside axis {axis}"
        )
    if data.shape[axis] == 0 and indices.size:
        raise ValueError(f"ScatterElements indexes axis {axis} of size 0")
    return [data]


def scatter_elements(attrs, data, indices, updates):
    """data with updates[i] written (or combined by `reduction`) at i with its `axis`
    coordinate replaced by indices[i]; in order, so of equal indices the last `none` wins."""
    axis = normalize_axis(attrs["axis"], data.ndim)
    where = list(np.indices(indices.shape, sparse=True))
    where[axis] = wrapped("ScatterElements", indices, data.shape[axis])
    return _scatter(attrs["reduction"], data, tuple(where), updates)


# ---- ScatterND -------------------------------------------------------------------------------
def _scatter_nd_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    data, indices, updates = types
    _check("ScatterND", attrs, data, indices, updates)
    k = indices.shape[-1] if indices.ndim else 0
    if data.ndim == 0 or not 1 <= k <= data.ndim:
        raise ValueError(
            f"ScatterND needs data of rank >= 1 and indices [..., k] with k from 1 to its rank, "
            f"got {data} and {indices}"
        )
    expected = indices.shape[:-1] + data.shape[k:]
    if updates.shape != expected:
        raise ValueError(
            f"ScatterND updates of shape {list(updates.shape)}; indices {list(indices.shape)} "
            f"into data {list(data.shape)} need {list(expected)}"
        )
    if indices.size and any(d == 0 for d in data.shape[:k]):
        raise ValueError(f"ScatterND indexes an empty dimension of {list(data.shape)}")
    return [data]


def scatter_nd(attrs, data, indices, updates):
    """data with each slice data[indices[m]] replaced by (or combined by `reduction` with)
    updates[m]; in order, so of equal index tuples the last `none` wins."""
    k = indices.shape[-1]
    tuples = indices.reshape(-1, k)
    where = tuple(wrapped("ScatterND", tuples[:, j], data.shape[j]) for j in range(k))
    return _scatter(attrs["reduction"], data, where, updates.reshape(-1, *data.shape[k:]))


# ---- the update kernels ----------------------------------------------------------------------
def _distinct(targets: np.ndarray | None) -> bool:
    """Whether constant targets (one row per update) never repeat: then no two updates meet,
    and each may run in its own thread."""
    return targets is not None and len(np.unique(targets, axis=0)) == len(targets)


def _clamped(indices: np.ndarray, dim: int) -> np.ndarray:
    """Constant indices as the kernels read them (`data_index`)."""
    return np.clip(np.where(indices < 0, indices + dim, indices), 0, max(dim - 1, 0))


class _Elements:
    """ScatterElements' updates: update i lands at i with its `axis` coordinate from indices.
    Only updates on one line along `axis` can meet."""

    def __init__(self, attrs: Attrs, inputs: list[TensorRef], out: Buffer):
        _, self.indices, self.updates = inputs
        self.reduction, self.out = attrs["reduction"], out
        self.axis = normalize_axis(attrs["axis"], out.ndim)
        shape = self.indices.shape
        self.lines = shape[: self.axis] + shape[self.axis + 1 :]
        self.count = self.indices.type.size
        self.distinct = False
        if self.indices.value is not None:  # the output position of every update
            where = np.indices(shape)
            where[self.axis] = _clamped(self.indices.value, out.shape[self.axis])
            self.distinct = _distinct(np.moveaxis(where, 0, -1).reshape(self.count, -1))

    def one(self, at: tuple[Expr, ...]) -> Stmt:
        """The update at index `at` of indices/updates applied."""
        axis, out = self.axis, self.out

        def write(t: Expr) -> Stmt:
            place = (*at[:axis], t, *at[axis + 1 :])
            return out.store(place, _apply(self.reduction, out[place], self.updates.read(at)))

        return let("t", data_index(self.indices.read(at), out.shape[axis]), write)

    def update(self, flat: Expr) -> Stmt:
        """Update number `flat` (row-major over indices) applied."""
        return self.one(unflatten(flat, self.indices.shape))

    def line(self, flat: Expr) -> Stmt:
        """The updates of line `flat` (every coordinate but `axis`), in order."""
        coords, axis = unflatten(flat, self.lines), self.axis
        return loop("j", self.indices.shape[axis],
                    lambda j: self.one((*coords[:axis], j, *coords[axis:])))  # fmt: skip

    def cpu(self, ctx: LowerContext) -> Stmt:
        """Lines in parallel, each in order."""
        return ROWS["cpu"](ctx, math.prod(self.lines), self.count, self.line)


class _Slices:
    """ScatterND's updates: tuple m of indices addresses the slice out[coords(m)], of shape
    `tail`. Only equal tuples meet, at the same position within their slices."""

    def __init__(self, attrs: Attrs, inputs: list[TensorRef], out: Buffer):
        _, self.indices, self.updates = inputs
        self.reduction, self.out = attrs["reduction"], out
        self.k = self.indices.shape[-1]
        self.lead, self.tail = self.indices.shape[:-1], out.shape[self.k :]
        self.tuples, self.size = math.prod(self.lead), math.prod(self.tail)
        self.count = self.tuples * self.size
        self.distinct = False
        if self.indices.value is not None:
            value = self.indices.value.reshape(self.tuples, self.k)
            self.distinct = _distinct(
                np.stack([_clamped(value[:, j], out.shape[j]) for j in range(self.k)], axis=1)
            )

    def at(self, m: Expr, body: Callable[[tuple[Expr, ...]], Stmt]) -> Stmt:
        """`body(coords)` with the clamped coordinates of tuple `m` bound once."""
        where = unflatten(m, self.lead)
        coords = [data_index(self.indices.read((*where, const(j))), self.out.shape[j])
                  for j in range(self.k)]  # fmt: skip
        return let_all("c", coords, body)

    def apply(self, m: Expr, coords: tuple[Expr, ...], inner: tuple[Expr, ...]) -> Stmt:
        """Element `inner` of update slice `m` applied at out[coords, inner]."""
        new = self.updates.read((*unflatten(m, self.lead), *inner))
        place = (*coords, *inner)
        return self.out.store(place, _apply(self.reduction, self.out[place], new))

    def update(self, flat: Expr) -> Stmt:
        """Element `flat` (row-major over updates) applied."""
        m, inner = flat // self.size, unflatten(flat % self.size, self.tail)
        return self.at(m, lambda c: self.apply(m, c, inner))

    def line(self, flat: Expr) -> Stmt:
        """Position `flat` within the slices: every tuple's element there, in order."""
        inner = unflatten(flat, self.tail)
        return loop("m", self.tuples, lambda m: self.at(m, lambda c: self.apply(m, c, inner)))

    @property
    def lines(self) -> tuple[int, ...]:
        """The shape of the positions whose updates never meet another position's."""
        return self.tail

    def cpu(self, ctx: LowerContext) -> Stmt:
        """Tuples in order (in parallel when they never repeat), each slice a contiguous loop
        nest that LLVM vectorizes."""
        axes = [(f"i{d}", n) for d, n in enumerate(self.tail)]

        def slice_(m: Expr) -> Stmt:
            return self.at(m, lambda c: nest(axes, lambda *inner: self.apply(m, c, inner)))

        if self.distinct:
            return ROWS["cpu"](ctx, self.tuples, self.count, slice_)
        return loop("m", self.tuples, slice_)


Updates = _Elements | _Slices


def _gpu(ctx: LowerContext, updates: Updates) -> Stmt:
    """One thread per update when no two meet, else one per line walking its updates."""
    if updates.distinct:
        return grid_loop(updates.count, updates.update)
    return grid_loop(math.prod(updates.lines), updates.line)


def _cpu(ctx: LowerContext, updates: Updates) -> Stmt:
    """Each op's CPU order (lines in parallel, or tuples in order)."""
    return updates.cpu(ctx)


UPDATE_SCHEDULES: dict[str, Callable[[LowerContext, Updates], Stmt]] = {"cpu": _cpu, "cuda": _gpu}


# ---- the template ----------------------------------------------------------------------------
def _scatter_template(op: str, geometry: type[_Elements] | type[_Slices]) -> Template:
    def build(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        data, indices, out = inputs[0], inputs[1], outputs[0]
        if not data.type.size:  # an empty output: nothing to write
            return []
        copy = schedule_injective(ctx, f"{op.lower()}_copy", [(out, data.type.ndim, data.read)])
        if not indices.type.size:
            return [copy]
        body = UPDATE_SCHEDULES[ctx.target.kind](ctx, geometry(attrs, inputs, out))
        return [copy, make_kernel(ctx.name(op.lower()), body)]

    build.__doc__ = f"{op}: the data copied, then the updates applied in order."
    return Template(build)


_ELEMENTS, _SLICES = (
    _scatter_template("ScatterElements", _Elements),
    _scatter_template("ScatterND", _Slices),
)

DEFINITIONS = [
    OpDef("ScatterElements", _scatter_elements_rule, scatter_elements,
          {"cpu": _ELEMENTS, "cuda": _ELEMENTS},
          attrs={"axis": 0, "reduction": "none"}, kind=OPAQUE, num_inputs=(3, 3)),
    OpDef("ScatterND", _scatter_nd_rule, scatter_nd, {"cpu": _SLICES, "cuda": _SLICES},
          attrs={"reduction": "none"}, kind=OPAQUE, num_inputs=(3, 3)),
]  # fmt: skip
