"""Knob spaces, on CUDA only, of the templates built on `reduction_kernel`.

Reductions, softmax, norms and global pools have one template for both targets (the schedule
dispatches on the target inside), and none of them is tuned on the CPU. On a GPU their
`reduce_threads` (tvmc.ops.gpu.reduction) is worth tuning, so each registers a CUDA-only space
here (`tunable`): `extract_tasks` finds them for `cuda` targets and never for `llvm`. Each op
names the (shape, axes) its template hands `reduction_kernel`, so the space's default config is
the kernel the template builds untuned (a test checks it per op).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tvmc.graph import TensorType
from tvmc.ops.gpu.reduction import reduction_space
from tvmc.ops.lowering import LoweringTarget, buffer_shape, tunable
from tvmc.ops.reduce_kernels import REDUCE_OPS
from tvmc.ops.registry import Attrs
from tvmc.ops.space import ConfigSpace

Geometry = Callable[[Attrs, TensorType], tuple[Sequence[int], Sequence[int]]]


def _listed_axes(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    return buffer_shape(x.shape), tuple(attrs["axes"])  # Reduce*, Softmax family


def _one_axis(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    return x.shape, (int(attrs["axis"]) % x.ndim,)  # ArgMax, ArgMin


def _from_axis(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    return x.shape, tuple(range(int(attrs["axis"]) % x.ndim, x.ndim))  # LayerNormalization


def _spatial(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    return x.shape, tuple(range(2, x.ndim))  # InstanceNormalization, global pools


GEOMETRY: dict[str, Geometry] = {
    **{op: _listed_axes for op in (*REDUCE_OPS, "Softmax", "LogSoftmax", "Hardmax")},
    "ArgMax": _one_axis,
    "ArgMin": _one_axis,
    "LayerNormalization": _from_axis,
    "InstanceNormalization": _spatial,
    "GlobalAveragePool": _spatial,
    "GlobalMaxPool": _spatial,
}


def _space_of(
    geometry: Geometry,
) -> Callable[[Attrs, list[TensorType], LoweringTarget], ConfigSpace]:
    def space(attrs: Attrs, types: list[TensorType], target: LoweringTarget) -> ConfigSpace:
        """`reduce_threads` of the op's one reduction kernel."""
        return reduction_space(*geometry(attrs, types[0]))

    return space


for _op, _geometry in GEOMETRY.items():
    tunable(_op, _space_of(_geometry), "cuda")
