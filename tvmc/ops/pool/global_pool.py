"""GlobalAveragePool and GlobalMaxPool: one row reduction over the spatial axes, on either
target (tvmc.ops.schedule.reduction), tunable on CUDA in `reduce_threads`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, const
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TemplateFn, TensorRef
from tvmc.ops.reduction.reduce import loader
from tvmc.ops.schedule.reduction import (
    Index,
    Results,
    Stage,
    accumulator_dtype,
    output_index,
    reduction_kernel,
    row_reduction_lowerings,
    storer,
)


def global_pool_template(op: str) -> TemplateFn:
    """The template of GlobalAveragePool or GlobalMaxPool (both targets)."""
    kind = "max" if op == "GlobalMaxPool" else "sum"

    def lower(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        x = inputs[0].type
        axes = tuple(range(2, x.ndim))
        acc = accumulator_dtype(x.dtype)
        count = math.prod(x.shape[2:])

        def value(idx: Index, results: Results) -> Expr:
            return results[0] if kind == "max" else results[0] / const(count, acc)

        emit = storer(
            outputs[0], epilogue, lambda idx: output_index(idx, x.ndim, axes, True), value
        )
        stage = Stage(kind, acc, loader(inputs[0], acc))
        return [reduction_kernel(ctx, op.lower(), x.shape, axes, [stage], result=emit)]

    lower.__doc__ = f"{op} as one reduction over the spatial axes."
    return lower


def spatial_rows(attrs: Attrs, x: TensorType) -> tuple[Sequence[int], Sequence[int]]:
    """The rows the template reduces: every spatial axis of each (n, c)."""
    return x.shape, tuple(range(2, x.ndim))


GLOBAL_AVERAGE_POOL = row_reduction_lowerings(
    global_pool_template("GlobalAveragePool"), spatial_rows
)
GLOBAL_MAX_POOL = row_reduction_lowerings(global_pool_template("GlobalMaxPool"), spatial_rows)
