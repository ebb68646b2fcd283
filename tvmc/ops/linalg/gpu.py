"""GPU templates for MatMul and Gemm: numpy matmul semantics on `tiled_gemm`.

Batched and broadcast operands, 1-D operands, Gemm's transA/transB, alpha, beta and C. When B
has no batch dims, A's batch dims fold into M (one GEMM with taller tiles); otherwise each batch
is one group of the GEMM. Knobs and defaults: tvmc.ops.schedule.gemm_gpu.
"""

from __future__ import annotations

import math

from tvmc.kernel import Buffer, Expr, Kernel, Stmt, const
from tvmc.ops.common import broadcast_shape
from tvmc.ops.linalg.cpu import batch_index
from tvmc.ops.lowering import Epilogue, LowerContext, Template, TensorRef, broadcast_read
from tvmc.ops.registry import Attrs
from tvmc.ops.schedule.gemm_gpu import gemm_gpu_space, problem, span
from tvmc.ops.schedule.gemm_gpu_kernel import GemmProblem, tiled_gemm
from tvmc.ops.schedule.microkernel import accumulator_dtype, finalize, unflatten


def gemm_gpu(
    ctx: LowerContext,
    a: TensorRef,
    b: TensorRef,
    out: Buffer,
    epilogue: Epilogue | None,
    attrs: Attrs,
    c: TensorRef | None = None,
) -> list[Kernel]:
    """out = alpha * op(A) @ op(B) + beta * C (numpy matmul semantics) as one tiled GEMM."""
    trans_a, trans_b = bool(attrs.get("transA", False)), bool(attrs.get("transB", False))
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    groups, m, n, k = problem(attrs, a.shape, b.shape)
    a_batch, b_batch = tuple(a.shape[:-2]), tuple(b.shape[:-2])
    batch = broadcast_shape(a_batch, b_batch)
    rows = 1 if a.type.ndim == 1 else (a.shape[-1] if trans_a else a.shape[-2])
    folded = groups == 1 and math.prod(batch) > 1
    acc = accumulator_dtype(out.dtype)
    c_read = broadcast_read(c, (rows, n)) if c is not None and beta != 0.0 else None

    def coords(g: Expr, i: Expr) -> tuple[tuple[Expr, ...], Expr]:
        """(output batch indices, row within the batch) of (group, GEMM row)."""
        if folded:
            return unflatten(i // rows, batch), i % rows
        return unflatten(g, batch), i

    def a_read(g: Expr, i: Expr, kk: Expr, lanes: int) -> Expr:
        kk = span(kk, lanes)  # lanes > 1 only where k is A's contiguous axis
        if a.type.ndim == 1:
            return a.read((kk,))
        bidx, r = coords(g, i)
        own = batch_index(bidx, batch, a_batch)
        return a.read((*own, kk, r) if trans_a else (*own, r, kk))

    def b_read(g: Expr, kk: Expr, j: Expr, lanes: int) -> Expr:
        j = span(j, lanes)  # lanes > 1 only where j is B's contiguous axis
        if b.type.ndim == 1:
            return b.read((kk,))
        own = batch_index(unflatten(g, batch) if not folded else (), batch, b_batch)
        return b.read((*own, j, kk) if trans_b else (*own, kk, j))

    def store(g: Expr, i: Expr, j: Expr, v: Expr) -> Stmt:
        bidx, r = coords(g, i)
        idx = (*bidx, *(() if a.type.ndim == 1 else (r,)), *(() if b.type.ndim == 1 else (j,)))
        v = v * const(alpha, acc) if alpha != 1.0 else v
        if c_read is not None:
            cv = c_read((r, j)).astype(acc)
            v = v + (cv * const(beta, acc) if beta != 1.0 else cv)
        return finalize(v, idx, out, epilogue)

    # float4 tile loads where a row of the operand is contiguous along the loaded axis
    a_vector = 4 if a.type.ndim == 1 or not trans_a else 1
    b_vector = 4 if b.type.ndim > 1 and not trans_b else 1
    gemm = GemmProblem("gemm", groups, m, n, k, acc, a_read, b_read, store,
                       a_vector=a_vector, b_vector=b_vector)  # fmt: skip
    return tiled_gemm(ctx, gemm)


def matmul_gpu(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """Numpy matmul through the shared-memory tiled GEMM."""
    return gemm_gpu(ctx, inputs[0], inputs[1], outputs[0], epilogue, {})


def gemm_gpu_template(
    ctx: LowerContext,
    attrs: Attrs,
    inputs: list[TensorRef],
    outputs: list[Buffer],
    epilogue: Epilogue | None,
) -> list[Kernel]:
    """alpha * op(A) @ op(B) + beta * C through the shared-memory tiled GEMM."""
    c = inputs[2] if len(inputs) > 2 else None
    return gemm_gpu(ctx, inputs[0], inputs[1], outputs[0], epilogue, attrs, c)


MATMUL = Template(matmul_gpu, gemm_gpu_space, epilogue=True)
GEMM = Template(gemm_gpu_template, gemm_gpu_space, epilogue=True)
