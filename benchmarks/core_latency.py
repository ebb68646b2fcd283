"""Benchmark (not a test): how far apart this process's cores are, as the round trip of a cache
line between two of them (benchmarks/core_latency.c, built with the system C compiler).

    .venv/bin/python benchmarks/core_latency.py [--watch SECONDS]

Two threads, one pinned to each CPU, take turns writing one counter; the nanoseconds per round
trip say whether the cores share a cache (tens of ns) or not (hundreds: another CCX or socket).
A VM's host may move its vCPUs between such placements every few seconds; while they are apart,
every parallel loop that reads what the other core wrote (a conv's input written by the layer
before, half on each core) waits on these trips, and a 2-thread model runs up to ~1.9x slower
with nothing on the FMA units to show it (`peak.py --watch` sees another slow mode: vCPUs
sharing one core). docs/performance.md, "Cores far apart". `--watch`: sample for that long.

"Apart" is judged against the fastest round trip seen on this CPU (model and features), kept in
tvmc's cache (`core-latency.json` beside the measured peaks): a window spent wholly apart then
reads as apart, not as this run's normal.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import statistics
import sys
import time

from tvmc.codegen.pool import build_shared
from tvmc.runtime.peak import cache_path, cpu_key, read_cache, write_cache

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "core_latency.c")
ITERATIONS = 20_000  # 1-8 ms a sample at 50-400 ns a round trip
APART = 2.0  # a round trip this many times the fastest seen: the cores were apart
CACHE = "core-latency.json"


@functools.cache
def _library() -> ctypes.CDLL | None:
    """The built probe (cached as the thread pool is: tvmc.codegen.pool.build_shared), or None
    without a C compiler or where it does not build."""
    path, _ = build_shared(SOURCE, "core-latency", ["-O2", "-fPIC", "-shared", "-pthread"])
    if path is None:
        return None
    lib = ctypes.CDLL(path)
    lib.tvmc_core_round_trip_ns.restype = ctypes.c_double
    lib.tvmc_core_round_trip_ns.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long]
    return lib


def round_trip_ns(iterations: int = ITERATIONS) -> float | None:
    """Nanoseconds per cache-line round trip between the first two CPUs this process may use;
    None on one CPU, without a C compiler, or where threads cannot be pinned."""
    cpus = sorted(os.sched_getaffinity(0))
    lib = _library()
    if len(cpus) < 2 or lib is None:
        return None
    ns = lib.tvmc_core_round_trip_ns(cpus[0], cpus[1], iterations)
    return ns if ns > 0 else None


def fastest_seen(samples: list[float | None]) -> float | None:
    """The fastest round trip of `samples` and of every earlier run on this CPU (tvmc's cache,
    which keeps the new fastest); None without any."""
    taken = [s for s in samples if s is not None and 0 < s < float("inf")]
    path, key = cache_path(CACHE), cpu_key()
    cached = read_cache(path)
    before = cached.get(key)
    number = isinstance(before, int | float) and not isinstance(before, bool)  # true is not 1 ns
    known = before if number and 0 < before < float("inf") else None
    best = min([*taken, *([known] if known else [])], default=None)
    if best is not None and best != known:
        write_cache(path, {**cached, key: round(best, 1)})
    return best


def describe(samples: list[float | None]) -> str:
    """Samples as the bench prints them ("62/351" ns), a dash for one that could not be taken."""
    return "/".join(f"{s:.0f}" if s is not None else "-" for s in samples)


def far_apart(samples: list[float | None], fastest: float) -> bool:
    """Whether any sample took over APART times the fastest round trip seen: cores apart then."""
    return any(s is not None and s > APART * fastest for s in samples)


def sampled_ns(seconds: float) -> list[float]:
    """Round trips taken every ~50 ms for `seconds` (one at least); empty where none can be."""
    samples = []
    end = time.perf_counter() + seconds
    while not samples or time.perf_counter() < end:
        ns = round_trip_ns()
        if ns is None:
            return []
        samples.append(ns)
        time.sleep(0.05)
    return samples


def watch(seconds: float) -> None:
    """Samples for `seconds`: deciles, and the share over APART times the fastest."""
    samples = sampled_ns(seconds)
    if not samples:
        sys.exit("core_latency: needs two CPUs, a C compiler and thread pinning")
    ordered = sorted(samples)
    tenths = " ".join(f"{ordered[len(ordered) * k // 10]:.0f}" for k in range(10))
    fastest = fastest_seen(samples)
    apart = sum(far_apart([s], fastest) for s in samples) / len(samples)
    print(f"{len(samples)} samples of the cores' round trip, ns: min, deciles, max {tenths} "
          f"{ordered[-1]:.0f}; median {statistics.median(samples):.0f}; {apart:.0%} over twice "
          f"the fastest seen on this CPU, {fastest:.0f} (cores apart)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watch", type=float, metavar="SECONDS", default=0.0,
                        help="sample for this long")  # fmt: skip
    args = parser.parse_args()
    if args.watch < 0:
        parser.error(f"--watch takes a positive number of seconds, not {args.watch:g}")
    if args.watch:
        watch(args.watch)
        return
    ns = round_trip_ns()
    if ns is None:
        sys.exit("core_latency: needs two CPUs, a C compiler and thread pinning")
    print(f"{ns:.0f} ns a round trip between CPUs {sorted(os.sched_getaffinity(0))[:2]}")


if __name__ == "__main__":
    main()
