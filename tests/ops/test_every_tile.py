"""`every_tile`, the tile loop the conv and GEMM templates share: every tile once, its flat index
and coordinates agreeing, the innermost dimension inside each step where that leaves the
parallel loop enough steps."""

from __future__ import annotations

import numpy as np
import pytest

from tvmc.kernel import Buffer, For, Kernel, interpret, seq
from tvmc.ops.schedule.microkernel import MIN_STEPS_PER_THREAD, every_tile


def visits(shape: tuple[int, ...], kind: str, threads: int) -> tuple[Kernel, np.ndarray]:
    """A kernel that adds one to `count[coordinates]` and stores each tile's flat index there."""
    count, flat = Buffer("count", shape, "int32"), Buffer("flat", shape, "int32")

    def tile(t, idx):
        return seq(count.store(idx, count[idx] + 1), flat.store(idx, t))

    kernel = Kernel("visits", (count, flat), every_tile(shape, kind, threads, tile))
    counts, flats = np.zeros(shape, np.int32), np.full(shape, -1, np.int32)
    interpret(kernel, counts, flats)
    assert (counts == 1).all(), "a tile run other than once"
    return kernel, flats


SHAPES = [(2, 3, 4), (1, 5, 1), (3, 1, 1), (1, 1), (7,), (2, 1, 6, 1), (4, 40, 14)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind,threads", [("serial", 1), ("parallel", 1), ("parallel", 2)])
def test_every_tile_once_with_its_row_major_index(shape, kind, threads):
    _, flats = visits(shape, kind, threads)
    np.testing.assert_array_equal(flats, np.arange(np.prod(shape)).reshape(shape))


def test_the_innermost_dimension_runs_inside_each_step():
    """(4, 40, 14) on 2 threads: 160 steps of 14 tiles, the last coordinate a loop's, not the
    flat index divided per tile; with too few steps for the threads, one flat parallel loop."""
    kernel, _ = visits((4, 40, 14), "parallel", 2)
    outer = kernel.body
    assert isinstance(outer, For) and outer.kind == "parallel" and outer.extent.value == 160
    inner = outer.body
    while not isinstance(inner, For):
        inner = inner.body  # the step's coordinates, bound once
    assert inner.kind == "serial" and inner.extent.value == 14
    few = (MIN_STEPS_PER_THREAD * 8 - 1, 3)  # fewer steps than 8 threads need
    kernel, _ = visits(few, "parallel", 8)
    assert kernel.body.extent.value == few[0] * 3 and not isinstance(kernel.body.body, For)
    kernel, _ = visits(few, "serial", 8)  # a serial loop has no threads to feed
    assert kernel.body.extent.value == few[0]
