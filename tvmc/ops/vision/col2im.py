"""Col2Im: sliding blocks (N, C * prod(block), L) summed back into an image (N, C, spatial...),
the inverse of im2col (PyTorch's fold); one template on both targets.

`image_shape` and `block_shape` are constants the frontend resolves; `pads` holds begin values,
then end values. Each output element gathers the blocks that cover it (one row per element, a
loop over the block's taps), so no two rows write one element and no atomics are needed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, Stmt, allocate, const, if_then_else, nest, seq
from tvmc.ops.lowering import Attrs, Epilogue, LowerContext, TensorRef
from tvmc.ops.registry import REQUIRED
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import unflatten
from tvmc.ops.schedule.reduction_stages import accumulator_dtype
from tvmc.ops.tensor.common import ROWS

COL2IM_ATTRS = {"image_shape": REQUIRED, "block_shape": REQUIRED, "dilations": None,
                "pads": None, "strides": None}  # fmt: skip


def _window(attrs: Attrs) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """(image, block, dilations, pads, strides) with the defaults filled in."""
    image, block = list(attrs["image_shape"]), list(attrs["block_shape"])
    k = len(image)
    dilations = list(attrs["dilations"] or [1] * k)
    pads = list(attrs["pads"] or [0] * 2 * k)
    strides = list(attrs["strides"] or [1] * k)
    return image, block, dilations, pads, strides


def block_counts(attrs: Attrs) -> list[int]:
    """Block positions along each spatial axis."""
    image, block, dilations, pads, strides = _window(attrs)
    k = len(image)
    return [(image[d] + pads[d] + pads[d + k] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
            for d in range(k)]  # fmt: skip


def col2im_rule(attrs: Attrs, types: list[TensorType]) -> list[TensorType]:
    (x,) = types
    image, block, dilations, pads, strides = _window(attrs)
    k = len(image)
    if len(block) != k or len(dilations) != k or len(strides) != k or len(pads) != 2 * k:
        raise ValueError(f"Col2Im needs one block size, dilation, stride and two pads per axis of "
                         f"image_shape {image}")  # fmt: skip
    if min(image + block + dilations + strides) < 1 or min(pads) < 0:
        raise ValueError("Col2Im sizes, dilations and strides must be positive, pads >= 0")
    if x.ndim != 3 or x.dtype == "bool":
        raise ValueError(f"Col2Im needs a numeric (N, C * prod(block), L) input, got {x}")
    size, counts = math.prod(block), block_counts(attrs)
    if min(counts) < 1 or x.shape[1] % size or x.shape[2] != math.prod(counts):
        raise ValueError(
            f"Col2Im input {list(x.shape)} does not hold (N, C * {size}, {math.prod(counts)}) "
            f"blocks of {block} for image {image}"
        )
    return [TensorType((x.shape[0], x.shape[1] // size, *image), x.dtype)]


def col2im(attrs, x):
    """Every block added back where it was taken from (overlaps sum), the pads cut off."""
    image, block, dilations, pads, strides = _window(attrs)
    k, counts = len(image), block_counts(attrs)
    n, c = x.shape[0], x.shape[1] // math.prod(block)
    acc = np.dtype(accumulator_dtype(x.dtype.name))
    cols = x.astype(acc).reshape(n, c, *block, *counts)
    padded = np.zeros((n, c, *(image[d] + pads[d] + pads[d + k] for d in range(k))), acc)
    for tap in itertools.product(*(range(b) for b in block)):
        region = tuple(slice(t * dl, t * dl + s * (m - 1) + 1, s)
                       for t, dl, s, m in zip(tap, dilations, strides, counts))  # fmt: skip
        padded[(slice(None), slice(None), *region)] += cols[(slice(None), slice(None), *tap)]
    crop = tuple(slice(pads[d], pads[d] + image[d]) for d in range(k))
    return padded[(slice(None), slice(None), *crop)].astype(x.dtype)


def col2im_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Per output element: the sum over block taps whose block position lands on it."""
    (x,), (out,) = inputs, outputs
    image, block, dilations, pads, strides = _window(attrs)
    counts = block_counts(attrs)
    acc_t = accumulator_dtype(x.dtype)

    def element(flat: Expr) -> Stmt:
        n, c, *p = unflatten(flat, out.shape)

        def body(acc: Buffer) -> Stmt:
            def tap(*t: Expr) -> Stmt:
                cond: Expr | None = None
                where = []
                for d, (pd, td) in enumerate(zip(p, t)):
                    z = pd + pads[d] - td * dilations[d]  # the block start's padded offset
                    s = strides[d]
                    test = (z >= 0) & (z < counts[d] * s)
                    test = test & (z % s).eq(0) if s > 1 else test
                    cond = test if cond is None else cond & test
                    where.append(z // s if s > 1 else z)
                row = c * math.prod(block) + _flat(t, block)
                value = x.read((n, row, _flat(where, counts))).astype(acc_t)
                return if_then_else(cond, acc.store(0, acc[0] + value))

            taps = nest([(f"t{d}", b) for d, b in enumerate(block)], tap)
            result = out.store((n, c, *p), acc[0].astype(out.dtype))
            return seq(acc.store(0, const(0, acc_t)), taps, result)

        return allocate("acc", (1,), body, acc_t)

    size = math.prod(out.shape)
    body = ROWS[ctx.target.kind](ctx, size, size * math.prod(block), element)
    return [make_kernel(ctx.name("col2im"), body)]


def _flat(index, shape) -> Expr:
    """Row-major position of `index` in `shape`."""
    pos: Expr = const(0)
    for i, d in zip(index, shape):
        pos = pos * d + i
    return pos
