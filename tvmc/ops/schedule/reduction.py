"""The row-reduction kernel by target kind, and the lowering table of the ops built on it.

Reductions, ArgMax/ArgMin, softmax, the norms and the global pools each build one
`reduction_kernel` of `Stage`s (tvmc.ops.schedule.reduction_stages); `REDUCTION_KERNELS` routes
it to the CPU or the GPU form. Their templates are the same function on both targets, so their
lowering table (`row_reduction_lowerings`) differs only in the knob space: on CUDA
`reduce_threads` is worth tuning (one block per row vs one thread per row), on the CPU nothing is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tvmc.graph import TensorType
from tvmc.kernel import Kernel
from tvmc.ops.lowering import Attrs, LowerContext, Lowering, LoweringTarget, Template, TemplateFn
from tvmc.ops.schedule.reduction_cpu import cpu_reduction_kernel
from tvmc.ops.schedule.reduction_gpu import gpu_reduction_kernel, reduction_space
from tvmc.ops.schedule.reduction_stages import (
    Emit,
    Index,
    Results,
    Stage,
    accumulator_dtype,
    combine,
    combine_all,
    flat_loop,
    flat_position,
    identity,
    loader,
    output_index,
    parallel_kind,
    storer,
)
from tvmc.ops.space import ConfigSpace

REDUCTION_KERNELS = {"cpu": cpu_reduction_kernel, "cuda": gpu_reduction_kernel}

# (attrs, input type) -> (the shape and the reduced axes the template hands reduction_kernel)
RowGeometry = Callable[[Attrs, TensorType], tuple[Sequence[int], Sequence[int]]]


def reduction_kernel(
    ctx: LowerContext,
    name: str,
    shape: Sequence[int],
    axes: Sequence[int],
    stages: Sequence[Stage],
    result: Emit | None = None,
    element: Emit | None = None,
) -> Kernel:
    """A kernel running `stages` over `axes` of a `shape` tensor, then `result` and `element`.

    `result(idx, results)` stores one output (reduced axes at index 0 in `idx`);
    `element(idx, results)` runs for every element of the reduced region.
    """
    build = REDUCTION_KERNELS[ctx.target.kind]
    return build(ctx, name, shape, axes, stages, result, element)


def row_reduction_lowerings(build: TemplateFn, geometry: RowGeometry) -> dict[str, Lowering]:
    """The lowering table of a template that builds one `reduction_kernel`: the same template
    on both targets; on CUDA tunable in `reduce_threads` over `geometry`'s rows."""

    def cuda_space(
        attrs: Attrs, types: list[TensorType], target: LoweringTarget
    ) -> ConfigSpace | None:
        """`reduce_threads` of the op's one reduction kernel."""
        return reduction_space(*geometry(attrs, types[0]))

    return {
        "cpu": Template(build, epilogue=True),
        "cuda": Template(build, cuda_space, epilogue=True),
    }


__all__ = [
    "REDUCTION_KERNELS",
    "Emit",
    "Index",
    "Results",
    "RowGeometry",
    "Stage",
    "accumulator_dtype",
    "combine",
    "combine_all",
    "flat_loop",
    "flat_position",
    "identity",
    "loader",
    "output_index",
    "parallel_kind",
    "reduction_kernel",
    "row_reduction_lowerings",
    "storer",
]
