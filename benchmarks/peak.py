"""Benchmark (not a test): this machine's float32 FMA peak and memory bandwidth, measured with
kernels written in tvmc's own kernel IR.

    .venv/bin/python benchmarks/peak.py

Peak: each thread keeps 12 independent `<16 x float>` accumulators in registers and runs FMAs
on them (no memory traffic), so the FMA units' throughput is the only limit. Bandwidth: a copy
of a 256 MiB array (read + write bytes counted). Medians of several runs, 1 and 2 threads.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from tvmc.codegen import emit_cpu, load_shared, physical_cores, set_num_threads
from tvmc.kernel import Buffer, Kernel, allocate, broadcast, fma, loop, ramp, seq

LANES, ACCS, STEPS = 16, 12, 2_000_000


def peak_kernel() -> Kernel:
    """out[t] = a chain of STEPS x ACCS vector FMAs per parallel iteration t."""
    out = Buffer("out", (64, LANES))

    def body(t):
        def with_acc(acc):
            init = loop("a", ACCS, lambda a: acc.store((a, ramp(0, LANES)), broadcast(1.0, LANES)),
                        kind="unrolled")  # fmt: skip
            step = loop("s", STEPS, lambda s: loop("a", ACCS, lambda a: acc.store(
                (a, ramp(0, LANES)),
                fma(acc[a, ramp(0, LANES)], broadcast(0.999999, LANES), broadcast(1e-7, LANES)),
            ), kind="unrolled"))  # fmt: skip
            total = loop("a", ACCS, lambda a: out.store(
                (t, ramp(0, LANES)), out[t, ramp(0, LANES)] + acc[a, ramp(0, LANES)]),
                kind="unrolled")  # fmt: skip
            return seq(init, step, total)

        return allocate("acc", (ACCS, LANES), with_acc)

    return Kernel("peak", (out,), loop("t", 64, body, kind="parallel"))


def copy_kernel(n: int) -> Kernel:
    src, dst = Buffer("src", (n,)), Buffer("dst", (n,))

    def chunk(o):
        def vector(i):
            at = ramp(o * 4096 + i * LANES, LANES)
            return dst.store(at, src[at])

        return loop("i", 4096 // LANES, vector)

    body = loop("o", n // 4096, chunk, kind="parallel")
    return Kernel("copy", (src, dst), body)


def median_seconds(fn, repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    n = 64 << 20  # float32 elements: 256 MiB
    module = load_shared(emit_cpu([peak_kernel(), copy_kernel(n)]))
    out = np.zeros((64, LANES), np.float32)
    src, dst = np.ones(n, np.float32), np.zeros(n, np.float32)
    flops = 64 * STEPS * ACCS * LANES * 2
    for threads in sorted({1, physical_cores()}):
        set_num_threads(threads)
        peak = flops / median_seconds(lambda: module.run("peak", out)) / 1e9
        bandwidth = 2 * n * 4 / median_seconds(lambda: module.run("copy", src, dst)) / 1e9
        print(f"{threads} thread(s): fp32 FMA peak {peak:6.1f} GFLOP/s, copy {bandwidth:5.1f} GB/s")


if __name__ == "__main__":
    main()
