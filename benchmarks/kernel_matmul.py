"""Benchmark (not a test): a register-blocked fp32 matmul written in kernel IR, in GFLOP/s.

    .venv/bin/python benchmarks/kernel_matmul.py [--size 512] [--mr 4] [--nr 64] [--kc 128]

For each column panel of NR (the parallel loop) and each K block of KC: pack B[KC, NR] into
local scratch (32 KiB at the defaults, about L1's size), then for each block of MR rows keep
an MR x NR accumulator tile in `<16 x float>` registers, updated with llvm.fma from broadcast A
values, and add it into C. Prints the median and best of --repeat calls per thread count, and
numpy's BLAS (all its threads) for scale.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tvmc.codegen import emit_cpu, load_shared, set_num_threads
from tvmc.kernel import (
    Buffer,
    Kernel,
    Stmt,
    Var,
    allocate,
    broadcast,
    fma,
    if_then_else,
    loop,
    ramp,
    seq,
)

LANES = 16


def matmul_kernel(
    m: int, n: int, k: int, mr: int = 4, nr: int = 64, kc: int = 128,
    batch: int | None = None, lanes: int = LANES, name: str = "matmul",
) -> Kernel:  # fmt: skip
    """C[m, n] = A[m, k] @ B[k, n] for m % mr == n % nr == k % kc == 0, nr % lanes == 0; with
    `batch`, C[t] = A[t] @ B[t] for each t < batch (the parallel loop's outer axis)."""
    lead = (batch,) if batch else ()
    a, b, c = Buffer("A", (*lead, m, k)), Buffer("B", (*lead, k, n)), Buffer("C", (*lead, m, n))

    def over_tile(body) -> Stmt:
        """body(r, v) for each of the MR x NR/lanes vectors of the tile, fully unrolled."""

        def row(r: Var) -> Stmt:
            return loop("v", nr // lanes, lambda v: body(r, v), kind="unrolled")

        return loop("r", mr, row, kind="unrolled")

    def tile(t: tuple, jo: Var, ko: Var, bp: Buffer, io: Var) -> Stmt:
        def compute(acc: Buffer) -> Stmt:
            def vector(v):
                return ramp(v * lanes, lanes)

            def c_at(r, v):
                return (*t, io * mr + r, ramp(jo * nr + v * lanes, lanes))

            def update(kk: Var) -> Stmt:
                def one(r, v):
                    a_rk = broadcast(a[(*t, io * mr + r, ko * kc + kk)], lanes)
                    return acc.store((r, vector(v)),
                                     fma(a_rk, bp[kk, vector(v)], acc[r, vector(v)]))  # fmt: skip

                return over_tile(one)

            return seq(
                if_then_else(
                    ko.eq(0),
                    over_tile(lambda r, v: acc.store((r, vector(v)), broadcast(0.0, lanes))),
                    over_tile(lambda r, v: acc.store((r, vector(v)), c[c_at(r, v)])),
                ),
                loop("kk", kc, update),
                over_tile(lambda r, v: c.store(c_at(r, v), acc[r, vector(v)])),
            )

        return allocate("acc", (mr, nr), compute)

    def panel(t: tuple, jo: Var, ko: Var) -> Stmt:
        def body(bp: Buffer) -> Stmt:
            def pack(kk: Var) -> Stmt:
                def copy(j: Var) -> Stmt:
                    return bp.store((kk, j), b[(*t, ko * kc + kk, jo * nr + j)])

                return loop("j", nr, copy, kind="vectorized")

            return seq(loop("kk", kc, pack),
                       loop("io", m // mr, lambda io: tile(t, jo, ko, bp, io)))  # fmt: skip

        return allocate("Bp", (kc, nr), body)

    def panels(t: tuple, kind: str = "serial") -> Stmt:
        return loop(
            "jo", n // nr, lambda jo: loop("ko", k // kc, lambda ko: panel(t, jo, ko)), kind
        )

    body = loop("t", batch, lambda t: panels((t,)), "parallel") if batch else panels((), "parallel")
    return Kernel(name, (a, b, c), body)


def _time(fn, repeat: int) -> tuple[float, float]:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--mr", type=int, default=4)
    parser.add_argument("--nr", type=int, default=64)
    parser.add_argument("--kc", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    s = args.size
    m = s // args.mr * args.mr
    t0 = time.perf_counter()
    artifact = emit_cpu([matmul_kernel(m, s, s, args.mr, args.nr, args.kc)])
    compile_ms = (time.perf_counter() - t0) * 1e3
    mod = load_shared(artifact)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, s), dtype=np.float32)
    b = rng.standard_normal((s, s), dtype=np.float32)
    c = np.zeros((m, s), np.float32)
    mod.run("matmul", a, b, c)
    err = np.abs(c - a @ b).max() / np.abs(a @ b).max()
    print(
        f"matmul {m}x{s}x{s}, MR={args.mr} NR={args.nr} KC={args.kc}: "
        f"compile {compile_ms:.0f} ms, max rel error {err:.1e}"
    )
    fn, ptrs = mod["matmul"], [x.ctypes.data for x in (a, b, c)]
    gflop = 2.0 * m * s * s / 1e9
    for nthreads in (1, 2):
        set_num_threads(nthreads)
        med, best = _time(lambda: fn(*ptrs), args.repeat)
        rate = f"{gflop / med:6.1f} GFLOP/s median, {gflop / best:6.1f} best"
        print(f"  tvmc {nthreads} thread(s): {rate}")
    set_num_threads(None)
    med, best = _time(lambda: a @ b, args.repeat)
    print(f"  numpy BLAS:         {gflop / med:6.1f} GFLOP/s median, {gflop / best:6.1f} best")


if __name__ == "__main__":
    main()
