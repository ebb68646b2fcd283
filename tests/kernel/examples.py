"""Hand-built kernels shared by the interpreter and code generator tests.

Each builder returns an Example: the kernel, `inputs(rng)` giving its arrays (outputs zeroed),
and `reference(*arrays)` giving the expected outputs (the kernel's last `n_outputs` params)
computed with plain numpy in float64 where it matters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from tvmc.kernel import (
    Barrier,
    Buffer,
    Kernel,
    Stmt,
    Var,
    allocate,
    broadcast,
    ceil,
    erf,
    exp,
    fabs,
    floor,
    fma,
    if_then_else,
    let,
    log,
    loop,
    maximum,
    minimum,
    nest,
    power,
    ramp,
    reduce_add,
    reduce_max,
    round_even,
    select,
    seq,
    sigmoid,
    sqrt,
    tanh,
)

# Output tolerances (rtol, atol) against the float64 references. The interpreter rounds each
# intrinsic once from float64, so what remains is float32 rounding and summation order (rtol
# 1e-5 covers sums of ~100 terms); float16 is good to about one ulp.
TOLERANCE = {"float16": (2e-3, 1e-3), "float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)}


class Example(NamedTuple):
    kernel: Kernel
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., tuple[np.ndarray, ...]]
    n_outputs: int = 1


def _randn(rng: np.random.Generator, *shape: int, scale: float = 1.0, dtype=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dtype)


_erf = np.vectorize(math.erf)


def add(n: int = 100) -> Example:
    """C = A + B, one scalar loop."""
    a, b, c = Buffer("A", (n,)), Buffer("B", (n,)), Buffer("C", (n,))
    k = Kernel("add", (a, b, c), loop("i", n, lambda i: c.store(i, a[i] + b[i])))
    return Example(
        k, lambda r: [_randn(r, n), _randn(r, n), np.zeros(n, np.float32)], lambda x, y, _: (x + y,)
    )


def add_vectorized(n: int = 100, lanes: int = 16) -> Example:
    """C = A + B: a vectorized main loop plus a serial tail."""
    a, b, c = Buffer("A", (n,)), Buffer("B", (n,)), Buffer("C", (n,))
    main = n // lanes * lanes

    def at(i):
        return c.store(i, a[i] + b[i])

    body = seq(
        nest([("io", n // lanes), ("ii", lanes, "vectorized")], lambda io, ii: at(io * lanes + ii)),
        loop("t", n - main, lambda t: at(main + t)),
    )
    k = Kernel("add_vec", (a, b, c), body)
    return Example(
        k, lambda r: [_randn(r, n), _randn(r, n), np.zeros(n, np.float32)], lambda x, y, _: (x + y,)
    )


def fused_chain(rows: int = 4, n: int = 64) -> Example:
    """Y = tanh(x) * sigmoid(x) + erf(0.7 x) + exp(-x^2/2): parallel rows, vectorized columns."""
    x, y = Buffer("X", (rows, n)), Buffer("Y", (rows, n))

    def point(r: Var, jo: Var, ji: Var) -> Stmt:
        v = x[r, jo * 16 + ji]
        return y.store((r, jo * 16 + ji), tanh(v) * sigmoid(v) + erf(v * 0.7) + exp(v * v * -0.5))

    axes = [("r", rows, "parallel"), ("jo", n // 16), ("ji", 16, "vectorized")]
    k = Kernel("chain", (x, y), nest(axes, point))

    def ref(xv, _):
        d = xv.astype(np.float64)
        return ((np.tanh(d) / (1 + np.exp(-d)) + _erf(0.7 * d) + np.exp(-d * d / 2)),)

    return Example(
        k, lambda r: [_randn(r, rows, n, scale=2.0), np.zeros((rows, n), np.float32)], ref
    )


def relu_chain(depth: int = 100, n: int = 64, lanes: int = 16) -> Example:
    """Y = depth fused Relu(x - c_k): a DAG that shares each step's x twice (2**depth as a tree)."""
    x, y = Buffer("X", (n,)), Buffer("Y", (n,))
    shifts = [0.03 if k % 2 else -0.02 for k in range(depth)]

    def point(jo: Var, ji: Var) -> Stmt:
        v = x[jo * lanes + ji]
        for c in shifts:
            v = v - c
            v = select(v < 0.0, 0.0, v)
        return y.store(jo * lanes + ji, v)

    k = Kernel("relu_chain", (x, y), nest([("jo", n // lanes), ("ji", lanes, "vectorized")], point))

    def ref(xv, _):
        v = xv.copy()
        for c in shifts:
            v = np.maximum(v - np.float32(c), np.float32(0))
        return (v,)

    return Example(k, lambda r: [_randn(r, n), np.zeros(n, np.float32)], ref)


def softmax_rows(rows: int = 8, n: int = 48, v: int = 16) -> Example:
    """Row softmax: 16-lane max and sum partials in local scratch, then horizontal reductions."""
    x, y = Buffer("X", (rows, n)), Buffer("Y", (rows, n))

    def row(r: Var) -> Stmt:
        def over_row(body: Callable[[Var, Var], Stmt]) -> Stmt:  # body(column, lane)
            return nest([("jo", n // v), ("l", v, "vectorized")], lambda jo, l: body(jo * v + l, l))

        def with_max(acc: Buffer, mx: Var) -> Stmt:
            def exp_and_sum(j, l):
                return seq(y.store((r, j), exp(x[r, j] - mx)), acc.store(l, acc[l] + y[r, j]))

            inv = 1.0 / reduce_add(acc[ramp(0, v)])
            return seq(
                loop("l", v, lambda l: acc.store(l, 0.0), kind="vectorized"),
                over_row(exp_and_sum),
                let("inv", inv, lambda inv: loop("j", n, lambda j: y.store((r, j), y[r, j] * inv))),
            )

        def body(acc: Buffer) -> Stmt:
            return seq(
                loop("l", v, lambda l: acc.store(l, x[r, l]), kind="vectorized"),
                over_row(lambda j, l: acc.store(l, maximum(acc[l], x[r, j]))),
                let("mx", reduce_max(acc[ramp(0, v)]), lambda mx: with_max(acc, mx)),
            )

        return allocate("acc", (v,), body)

    k = Kernel("softmax", (x, y), loop("r", rows, row, kind="parallel"))

    def ref(xv, _):
        e = np.exp(xv.astype(np.float64) - xv.max(1, keepdims=True))
        return (e / e.sum(1, keepdims=True),)

    return Example(
        k, lambda r: [_randn(r, rows, n, scale=3.0), np.zeros((rows, n), np.float32)], ref
    )


def matmul_tiled(m: int = 8, n: int = 64, kk: int = 24, mr: int = 4) -> Example:
    """C = A @ B with an MR x 32 accumulator tile (two 16-lane vectors per row) and llvm.fma."""
    a, b, c = Buffer("A", (m, kk)), Buffer("B", (kk, n)), Buffer("C", (m, n))
    tile_axes = [("r", mr, "unrolled"), ("v", 2, "unrolled")]

    def tile(io: Var, jo: Var) -> Stmt:
        def body(acc: Buffer) -> Stmt:
            def lanes(v):
                return ramp(v * 16, 16)

            def update(k, r, v):
                a_rk = broadcast(a[io * mr + r, k], 16)
                b_kv = b[k, ramp(jo * 32 + v * 16, 16)]
                return acc.store((r, lanes(v)), fma(a_rk, b_kv, acc[r, lanes(v)]))

            def write(r, j):
                return c.store((io * mr + r, jo * 32 + j), acc[r, j])

            return seq(
                nest(tile_axes, lambda r, v: acc.store((r, lanes(v)), broadcast(0.0, 16))),
                nest([("k", kk), *tile_axes], update),
                nest([("r", mr, "unrolled"), ("j", 32, "vectorized")], write),
            )

        return allocate("acc", (mr, 32), body)

    k = Kernel("matmul", (a, b, c), nest([("io", m // mr, "parallel"), ("jo", n // 32)], tile))
    return Example(
        k,
        lambda r: [_randn(r, m, kk), _randn(r, kk, n), np.zeros((m, n), np.float32)],
        lambda x, y, _: (x.astype(np.float64) @ y,),
    )


def parallel_rows(rows: int = 37, n: int = 33) -> Example:
    """Y[r, j] = X[r, j] * (r + 1) + j over a parallel row loop (odd sizes: uneven chunks)."""
    x, y = Buffer("X", (rows, n)), Buffer("Y", (rows, n))

    def point(r, j):
        return y.store((r, j), x[r, j] * (r + 1).astype("float32") + j.astype("float32"))

    k = Kernel("prows", (x, y), nest([("r", rows, "parallel"), ("j", n)], point))
    scale = np.arange(1, rows + 1, dtype=np.float32)[:, None]
    cols = np.arange(n, dtype=np.float32)[None, :]
    return Example(
        k,
        lambda r: [_randn(r, rows, n), np.zeros((rows, n), np.float32)],
        lambda xv, _: (xv * scale + cols,),
    )


def branch_scratch(n: int = 20) -> Example:
    """IfThenElse on data plus a local scratch buffer per iteration."""
    x, y = Buffer("X", (n, 4)), Buffer("Y", (n,))

    def point(i: Var) -> Stmt:
        def body(tmp: Buffer) -> Stmt:
            return seq(
                loop("q", 4, lambda q: tmp.store(q, x[i, q] * (q + 1).astype("float32"))),
                if_then_else(
                    tmp[0] > 0.0, y.store(i, tmp[0] + tmp[3]), y.store(i, tmp[1] - tmp[2])
                ),
            )

        return allocate("tmp", (4,), body)

    k = Kernel("branch", (x, y), loop("i", n, point))

    def ref(xv, _):
        t = xv * np.arange(1, 5, dtype=np.float32)
        return (np.where(t[:, 0] > 0, t[:, 0] + t[:, 3], t[:, 1] - t[:, 2]),)

    return Example(k, lambda r: [_randn(r, n, 4), np.zeros(n, np.float32)], ref)


def integer_ops(n: int = 64) -> Example:
    """Floor division/modulo on negatives, truncating division, select, casts, bool stores."""
    x, y, z = Buffer("X", (n,), "int32"), Buffer("Y", (n,), "int32"), Buffer("Z", (n,), "bool")

    def point(i: Var) -> Stmt:
        v = x[i]
        half = (v.astype("float32") * 0.5).astype("int32")
        return seq(
            y.store(i, v // 3 + v % 5 * 7 - v / 4 + select(v < 0, v, -v) + half),
            z.store(i, (v % 2).eq(0) | (v > 10)),
        )

    k = Kernel("intops", (x, y, z), loop("i", n, point))

    def ref(xv, _, __):
        trunc = np.trunc(xv / 4).astype(np.int32)
        half = np.trunc(xv.astype(np.float32) * 0.5).astype(np.int32)
        return xv // 3 + xv % 5 * 7 - trunc + np.where(xv < 0, xv, -xv) + half, (xv % 2 == 0) | (
            xv > 10
        )

    def inputs(r):
        return [r.integers(-50, 50, n).astype(np.int32), np.zeros(n, np.int32), np.zeros(n, bool)]

    return Example(k, inputs, ref, n_outputs=2)


def misc_math(n: int = 64) -> Example:
    """sqrt/fabs/floor/ceil/round/pow/min/log, a strided (gather) vector load, int64 loops."""
    x, y, s = Buffer("X", (2 * n,)), Buffer("Y", (n,)), Buffer("S", (n,))

    def point(io: Var, ii: Var) -> Stmt:
        i = io * 16 + ii
        v = x[i]
        value = sqrt(fabs(v)) + floor(v) * ceil(v) + round_even(v * 2.0) + minimum(v, 0.5)
        value = value + power(fabs(v) + 1.0, 1.5) + log(fabs(v) + 1.0)
        return seq(y.store(i, value), s.store(i, x[i * 2] - x[i * 2 + 1]))

    k = Kernel("misc", (x, y, s), nest([("io", n // 16), ("ii", 16, "vectorized")], point, "int64"))

    def ref(xv, _, __):
        v = xv[:n].astype(np.float64)
        out = np.sqrt(np.abs(v)) + np.floor(v) * np.ceil(v) + np.rint(v * 2) + np.minimum(v, 0.5)
        out += (np.abs(v) + 1) ** 1.5 + np.log(np.abs(v) + 1)
        return out, xv[0::2] - xv[1::2]

    def inputs(r):
        return [_randn(r, 2 * n, scale=3.0), np.zeros(n, np.float32), np.zeros(n, np.float32)]

    return Example(k, inputs, ref, n_outputs=2)


def float64_and_float16(n: int = 32) -> Example:
    """float64 math through libm (tanh, erf, exp, log), float16 arithmetic via float32."""
    x, y = Buffer("X", (n,), "float64"), Buffer("Y", (n,), "float64")
    h, g = Buffer("H", (n,), "float16"), Buffer("G", (n,), "float16")

    def point(i: Var) -> Stmt:
        v = x[i]
        return seq(
            y.store(i, tanh(v) + erf(v) * exp(v) + log(fabs(v) + 1.0) + sigmoid(v)),
            g.store(i, sqrt(fabs(h[i])) * 2.0 + h[i]),
        )

    k = Kernel("wide_narrow", (x, h, y, g), loop("i", n, point))

    def ref(xv, hv, _, __):
        out = np.tanh(xv) + _erf(xv) * np.exp(xv) + np.log(np.abs(xv) + 1) + 1 / (1 + np.exp(-xv))
        hh = hv.astype(np.float32)
        return out, (np.sqrt(np.abs(hh)).astype(np.float16) * np.float16(2) + hv)

    def inputs(r):
        return [
            _randn(r, n, dtype=np.float64),
            _randn(r, n, dtype=np.float16),
            np.zeros(n, np.float64),
            np.zeros(n, np.float16),
        ]

    return Example(k, inputs, ref, n_outputs=2)


def gpu_elementwise(n: int = 1000, threads: int = 128) -> Example:
    """Y = tanh(X) * 2 over blockIdx.x x threadIdx.x with a bounds guard."""
    x, y = Buffer("X", (n,)), Buffer("Y", (n,))

    def point(bx: Var, tx: Var) -> Stmt:
        i = bx * threads + tx
        return if_then_else(i < n, y.store(i, tanh(x[i]) * 2.0))

    axes = [("bx", -(-n // threads), "blockIdx.x"), ("tx", threads, "threadIdx.x")]
    k = Kernel("gpu_ew", (x, y), nest(axes, point))
    return Example(
        k,
        lambda r: [_randn(r, n), np.zeros(n, np.float32)],
        lambda xv, _: (np.tanh(xv.astype(np.float64)) * 2,),
    )


def gpu_row_sum(rows: int = 6, n: int = 256, threads: int = 64) -> Example:
    """Y[r] = sum(X[r, :]): one block per row, strided partial sums, a shared-memory tree."""
    x, y = Buffer("X", (rows, n)), Buffer("Y", (rows,))

    def block(r: Var) -> Stmt:
        def thread(sm: Buffer, tx: Var) -> Stmt:
            tree, s = [], threads // 2
            while s:
                tree += [if_then_else(tx < s, sm.store(tx, sm[tx] + sm[tx + s])), Barrier()]
                s //= 2
            return seq(
                sm.store(tx, 0.0),
                loop("q", n // threads, lambda q: sm.store(tx, sm[tx] + x[r, q * threads + tx])),
                Barrier(),
                *tree,
                if_then_else(tx.eq(0), y.store(r, sm[0])),
            )

        def body(sm: Buffer) -> Stmt:
            return loop("tx", threads, lambda tx: thread(sm, tx), kind="threadIdx.x")

        return allocate("sm", (threads,), body, scope="shared")

    k = Kernel("gpu_rowsum", (x, y), loop("r", rows, block, kind="blockIdx.x"))
    return Example(
        k,
        lambda r: [_randn(r, rows, n), np.zeros(rows, np.float32)],
        lambda xv, _: (xv.astype(np.float64).sum(1),),
    )


CPU_EXAMPLES = {
    "add": add,
    "add_vectorized": add_vectorized,
    "fused_chain": fused_chain,
    "relu_chain": relu_chain,
    "softmax_rows": softmax_rows,
    "matmul_tiled": matmul_tiled,
    "parallel_rows": parallel_rows,
    "branch_scratch": branch_scratch,
    "integer_ops": integer_ops,
    "misc_math": misc_math,
    "float64_and_float16": float64_and_float16,
}
GPU_EXAMPLES = {"gpu_elementwise": gpu_elementwise, "gpu_row_sum": gpu_row_sum}
