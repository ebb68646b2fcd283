"""GPU templates for MaxPool, AveragePool, LpPool (1D/2D/3D, pads, strides, dilations,
ceil_mode) and LRN.

One thread per output: the window's taps (unrolled when small) fold into a register, skipping
taps in the padding; AveragePool counts the taps its divisor includes as it goes (padding cells
with count_include_pad, never the ceil-mode overhang), as the reference defines it; LpPool sums
|x| ** p and takes the p-th root. LRN sums the squares of its channel window the same way.
Knob: `block`, threads per block, tuned on CUDA only (`pool_gpu_space`; their CPU templates have
none, so the CPU gets no tuning task).
"""

from __future__ import annotations

from collections.abc import Callable

from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, Kernel, Stmt, allocate, const, if_then_else, loop, seq
from tvmc.ops.lowering import (
    Attrs,
    Epilogue,
    LowerContext,
    LoweringTarget,
    Template,
    TemplateFn,
    TensorRef,
)
from tvmc.ops.pool.cpu import POOL_KINDS, inverse_power, lp_power, lp_root
from tvmc.ops.pool.definition import average_pool_rule, lp_pool_rule, lrn_rule, max_pool_rule
from tvmc.ops.schedule.gpu_launch import (
    BLOCKS,
    DEFAULT_BLOCK,
    all_of,
    block_of,
    grid_loop,
    window_loops,
)
from tvmc.ops.schedule.injective import make_kernel
from tvmc.ops.schedule.microkernel import finalize, unflatten
from tvmc.ops.schedule.reduction import accumulator_dtype, combine, identity
from tvmc.ops.space import ConfigSpace


def block_space(outputs: int) -> ConfigSpace:
    """`block` for a kernel of `outputs` threads: BLOCKS clamped to it (a block never has more
    threads than outputs, so larger values build the same kernel), the default recorded."""
    space = ConfigSpace().other("block", sorted({min(b, max(outputs, 1)) for b in BLOCKS}))
    space.default_index = space.index_of({"block": min(DEFAULT_BLOCK, max(outputs, 1))})
    return space


RULES = {
    "MaxPool": max_pool_rule,
    "AveragePool": average_pool_rule,
    "LpPool": lp_pool_rule,
    "LRN": lrn_rule,
}


def pool_gpu_space(op: str) -> Callable[[Attrs, list[TensorType], LoweringTarget], ConfigSpace]:
    """The space of `op` (MaxPool, AveragePool, LpPool, LRN): `block`, one thread per output."""

    rule = RULES[op]

    def space(attrs: Attrs, types: list[TensorType], target: LoweringTarget) -> ConfigSpace:
        return block_space(rule(attrs, types)[0].size)

    return space


def pool_gpu(op: str) -> TemplateFn:
    """The GPU template of MaxPool, AveragePool or LpPool."""
    kind = POOL_KINDS[op]

    def lower(
        ctx: LowerContext,
        attrs: Attrs,
        inputs: list[TensorRef],
        outputs: list[Buffer],
        epilogue: Epilogue | None,
    ) -> list[Kernel]:
        x, out = inputs[0], outputs[0]
        kernel, strides = tuple(attrs["kernel_shape"]), tuple(attrs["strides"])
        dilations, pads = tuple(attrs["dilations"]), tuple(attrs["pads"])
        spatial, size = len(kernel), tuple(x.shape[2:])
        begin, end = pads[:spatial], pads[spatial:]
        include = bool(attrs.get("count_include_pad", 0))
        order = int(attrs["p"]) if op == "LpPool" else 0  # LpPool's p; 0 for the others
        average = kind == "sum" and not order  # counts the taps its divisor includes
        acc_t = accumulator_dtype(x.dtype, kind == "sum")
        if kind == "sum" and not acc_t.startswith("float"):
            acc_t = "float64"

        def output(flat: Expr) -> Stmt:
            n, c, *o = unflatten(flat, out.shape)

            def body(acc: Buffer, cnt: Buffer) -> Stmt:
                def tap(*t: Expr) -> Stmt:
                    pos = [
                        o[d] * strides[d] - begin[d] + t[d] * dilations[d] for d in range(spatial)
                    ]
                    reach = [
                        (out.shape[2 + d] - 1) * strides[d]
                        - begin[d]
                        + (kernel[d] - 1) * dilations[d]
                        for d in range(spatial)
                    ]
                    inside = all_of(
                        [p >= 0 for d, p in enumerate(pos) if begin[d] > 0]
                        + [p < size[d] for d, p in enumerate(pos) if reach[d] >= size[d]]
                    )
                    v = x.read((n, c, *pos)).astype(acc_t)
                    st = acc.store(0, combine(kind, acc[0], lp_power(v, order) if order else v))
                    counted = inside
                    if include:  # padding cells count, the ceil-mode overhang does not
                        counted = all_of(
                            [
                                p < size[d] + end[d]
                                for d, p in enumerate(pos)
                                if reach[d] >= size[d] + end[d]
                            ]
                        )
                    if average:
                        one = cnt.store(0, cnt[0] + const(1.0, acc_t))
                        count = if_then_else(counted, one) if counted is not None else one
                        st = seq(st, count) if counted is inside else st
                        extra = None if counted is inside else count
                    else:
                        extra = None
                    guarded = if_then_else(inside, st) if inside is not None else st
                    return seq(guarded, extra)

                value = acc[0] / cnt[0] if average else acc[0]
                value = lp_root(value, order) if order else value
                return seq(
                    acc.store(0, identity(kind, acc_t)),
                    cnt.store(0, const(0.0, acc_t)),
                    window_loops(kernel, tap),
                    finalize(value, (n, c, *o), out, epilogue),
                )

            return allocate(
                "acc", (1,), lambda a: allocate("cnt", (1,), lambda k: body(a, k), acc_t), acc_t
            )

        return [make_kernel(ctx.name(op.lower()), grid_loop(out.size, output, block_of(ctx)))]

    lower.__doc__ = f"{op}: one thread per output folding its window."
    return lower


def lrn_gpu(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """One thread per output: the squares of its channel window, then the scaling."""
    x, out = inputs[0], outputs[0]
    size = int(attrs["size"])
    before = (size - 1) // 2
    acc_t = accumulator_dtype(x.dtype)
    channels = x.shape[1]
    alpha = float(attrs["alpha"]) / size

    def output(flat: Expr) -> Stmt:
        idx = unflatten(flat, out.shape)
        c = idx[1]

        def body(sq: Buffer) -> Stmt:
            def add(j: Expr) -> Stmt:
                ch = c - before + j
                v = x.read((idx[0], ch, *idx[2:])).astype(acc_t)
                return if_then_else((ch >= 0) & (ch < channels), sq.store(0, sq[0] + v * v))

            scale = const(float(attrs["bias"]), acc_t) + sq[0] * alpha
            y = x.read(idx).astype(acc_t) * inverse_power(scale, float(attrs["beta"]))
            return seq(
                sq.store(0, const(0.0, acc_t)),
                loop("j", size, add, kind="unrolled"),
                finalize(y, idx, out, epilogue),
            )

        return allocate("sq", (1,), body, acc_t)

    return [make_kernel(ctx.name("lrn"), grid_loop(out.size, output, block_of(ctx)))]


MAX_POOL = Template(pool_gpu("MaxPool"), pool_gpu_space("MaxPool"), epilogue=True)
AVERAGE_POOL = Template(pool_gpu("AveragePool"), pool_gpu_space("AveragePool"), epilogue=True)
LP_POOL = Template(pool_gpu("LpPool"), pool_gpu_space("LpPool"), epilogue=True)
LRN = Template(lrn_gpu, pool_gpu_space("LRN"), epilogue=True)
