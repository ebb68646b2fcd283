"""Benchmark (not a test): this machine's float32 FMA peak and memory bandwidth, measured with
kernels written in tvmc's own kernel IR.

    .venv/bin/python benchmarks/peak.py [--watch SECONDS]

Peak: each thread keeps 12 independent vector accumulators of the host's width (`<16 x float>`
with AVX-512, `<8 x float>` with AVX2: wider ones would not fit in 16 registers) in registers
and runs FMAs on them (no memory traffic), so the FMA units' throughput is the only limit.
Bandwidth: a copy of a 256 MiB array (read + write bytes counted). Medians of several runs, 1
and 2 threads.

`--watch SECONDS`: for that long, short peak runs (~5 ms) on all cores then on one, in pairs,
and how often all cores gave what one gives: a VM whose host now and then runs its vCPUs on
shared physical cores shows it here, below anything the guest's scheduler reports.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import numpy as np

from tvmc.codegen import CPUTarget, emit_cpu, load_shared, physical_cores, set_num_threads
from tvmc.kernel import Buffer, Kernel, allocate, broadcast, fma, loop, ramp, seq

LANES = max(CPUTarget.host().vector_bits // 32, 1)
ACCS, STEPS = 12, 2_000_000


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


@functools.cache
def _short_peak_module():
    """The peak kernel at ~5 ms a run on one core, built once (make bench probes twice)."""
    return load_shared(emit_cpu([peak_kernel(50_000)]))


def paired_speedups(seconds: float, threads: int) -> list[float]:
    """For `seconds`, short peak runs (~5 ms) on `threads` then on one, in pairs: the speedup
    of each pair, sorted. On a steady machine they sit near `threads`."""
    module = _short_peak_module()
    out = np.zeros((64, LANES), np.float32)
    module.run("peak", out)
    speedups = []
    end = time.perf_counter() + seconds
    while not speedups or time.perf_counter() < end:  # one pair at least
        pair = []
        for n in (threads, 1):
            set_num_threads(n)
            start = time.perf_counter()
            module.run("peak", out)
            pair.append(time.perf_counter() - start)
        speedups.append(pair[1] / pair[0])
    set_num_threads(None)
    return sorted(speedups)


def shared_core_share(speedups: list[float], threads: int) -> tuple[float, float]:
    """(share of pairs where all threads gave about what one gives, the bound used: a quarter
    of the way from 1x to `threads`x)."""
    bound = 1 + (threads - 1) / 4
    return sum(s < bound for s in speedups) / max(len(speedups), 1), bound


def watch(seconds: float) -> None:
    """`--watch`: the spread of the paired speedups, and how often all cores gave one's."""
    cores = physical_cores()
    speedups = paired_speedups(seconds, cores)
    tenths = " ".join(f"{speedups[len(speedups) * k // 10]:.2f}" for k in range(10))
    share, bound = shared_core_share(speedups, cores)
    print(f"{len(speedups)} pairs of ~5 ms FMA runs, {cores} cores against 1: speedup min, "
          f"deciles, max {tenths} {speedups[-1]:.2f}; {share:.0%} of pairs below {bound:.2f}x "
          "(all cores gave about what one gives)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--watch", type=float, metavar="SECONDS", help="paired short runs: how steady all cores are"
    )
    args = parser.parse_args()
    if args.watch is not None:
        if not args.watch > 0:
            parser.error(f"--watch takes a positive number of seconds, not {args.watch:g}")
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
