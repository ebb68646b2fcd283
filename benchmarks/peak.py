"""Benchmark (not a test): this machine's float32 FMA peak and memory bandwidth, measured with
kernels written in tvmc's own kernel IR.

    .venv/bin/python benchmarks/peak.py [--watch SECONDS]

Peak: each thread keeps 12 independent `<16 x float>` accumulators in registers and runs FMAs
on them (no memory traffic), so the FMA units' throughput is the only limit. Bandwidth: a copy
of a 256 MiB array (read + write bytes counted). Medians of several runs, 1 and 2 threads.

`--watch SECONDS`: for that long, short peak runs (~5 ms) on all cores then on one, in pairs,
and how often all cores gave what one gives: a VM whose host now and then runs its vCPUs on
shared physical cores shows it here, below anything the guest's scheduler reports.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tvmc.codegen import emit_cpu, load_shared, physical_cores, set_num_threads
from tvmc.kernel import Buffer, Kernel, allocate, broadcast, fma, loop, ramp, seq

LANES, ACCS, STEPS = 16, 12, 2_000_000


def peak_kernel(steps: int = STEPS) -> Kernel:
    """out[t] = a chain of `steps` x ACCS vector FMAs per parallel iteration t."""
    out = Buffer("out", (64, LANES))

    def body(t):
        def with_acc(acc):
            init = loop("a", ACCS, lambda a: acc.store((a, ramp(0, LANES)), broadcast(1.0, LANES)),
                        kind="unrolled")  # fmt: skip
            step = loop("s", steps, lambda s: loop("a", ACCS, lambda a: acc.store(
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


def watch(seconds: float) -> None:
    """Pairs of short peak runs, all cores then one, for `seconds`: the spread of their ratio."""
    steps = 50_000
    module = load_shared(emit_cpu([peak_kernel(steps)]))
    out = np.zeros((64, LANES), np.float32)
    flops = 64 * steps * ACCS * LANES * 2
    cores = physical_cores()
    module.run("peak", out)
    ratios = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pair = []
        for threads in (cores, 1):
            set_num_threads(threads)
            start = time.perf_counter()
            module.run("peak", out)
            pair.append(time.perf_counter() - start)
        ratios.append(pair[1] / pair[0])  # speedup of all cores over one
    set_num_threads(None)
    ratios.sort()
    deciles = (
        " ".join(f"{ratios[len(ratios) * k // 10]:.2f}" for k in range(10)) + f" {ratios[-1]:.2f}"
    )
    bound = 1 + (cores - 1) / 4
    low = sum(r < bound for r in ratios) / len(ratios)
    print(f"{len(ratios)} pairs of ~{flops / 1e9:.1f} GFLOP runs, {cores} cores against 1: "
          f"speedup min, deciles, max {deciles}; {low:.0%} of pairs below {bound:.2f}x "
          "(all cores gave about what one gives)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--watch", type=float, metavar="SECONDS", help="paired short runs: how steady all cores are"
    )
    args = parser.parse_args()
    if args.watch:
        watch(args.watch)
        return
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
