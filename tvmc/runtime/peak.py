"""This machine's fp32 FMA peak, measured (not assumed) with a kernel of tvmc's own code generator.

The kernel keeps 12 independent vector accumulators in registers and runs FMAs on them with no
memory traffic, so the FMA units' throughput is the only limit; the vector width is the host
target's. One core is measured (on the calling thread, timed by its CPU time, so other work on
the machine cannot lower the figure) and the peak of N threads is N physical cores' worth. A
measurement takes about half a second (two rounds of short bursts, the best of each; kept only
when the rounds agree and the figure is plausible) and is cached per CPU (model and features)
in a JSON file (`$TVMC_CACHE_DIR`, default `~/.cache/tvmc/peak.json`). CPU time does not see
a shared host's slow periods (its clock or an SMT sibling taken: on a Zen 3 VM the same kernel
measured 75 and 86 GFLOP/s a second apart), so one measurement can be low: the first
MEASUREMENTS processes that need the peak each measure once, and the cache keeps the best; a
benchmark whose peak bursts beat the cached figure raises it (`record_core_peak`).
`$TVMC_PEAK_GFLOPS` overrides it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time

import llvmlite.binding as llvm
import numpy as np

from tvmc.codegen import CPUTarget, emit_cpu, load_shared, num_threads, physical_cores
from tvmc.config import CACHE_DIR_ENV, PEAK_GFLOPS_ENV
from tvmc.errors import UsageError
from tvmc.kernel import Buffer, Kernel, allocate, broadcast, fma, loop, ramp, seq

ACCUMULATORS = 12  # independent FMA chains: more than latency x ports on current cores
ITERATIONS = 64  # parallel iterations (shared among the threads)
STABLE = 0.9  # two measurements agreeing this well are cached; else the machine was busy
MEASUREMENTS = 3  # processes that measure (at most once each) before the cached best stands
KERNEL_VERSION = 2  # cached figures of another kernel are measured again (1: calls 10x shorter)


def peak_kernel(lanes: int, steps: int) -> Kernel:
    """out[t] = a chain of `steps` x ACCUMULATORS vector FMAs per parallel iteration t."""
    out = Buffer("out", (ITERATIONS, lanes))
    vec = ramp(0, lanes)

    def body(t):
        def with_acc(acc):
            init = loop("a", ACCUMULATORS, lambda a: acc.store((a, vec), broadcast(1.0, lanes)),
                        kind="unrolled")  # fmt: skip
            step = loop("s", steps, lambda s: loop("a", ACCUMULATORS, lambda a: acc.store(
                (a, vec), fma(acc[a, vec], broadcast(0.999999, lanes), broadcast(1e-7, lanes)),
            ), kind="unrolled"))  # fmt: skip
            total = loop("a", ACCUMULATORS, lambda a: out.store(
                (t, vec), out[t, vec] + acc[a, vec]), kind="unrolled")  # fmt: skip
            return seq(init, step, total)

        return allocate("acc", (ACCUMULATORS, lanes), with_acc)

    return Kernel("peak", (out,), loop("t", ITERATIONS, body))


class PeakBursts:
    """Short runs of the peak kernel on this thread, built once: what one core delivers now.

    A benchmark brackets its timed blocks with bursts to tell the host's quiet moments from its
    slow ones (`benchmarks/heavy_convs.py`); `measure_core_peak_gflops` keeps the best burst.
    """

    STEPS = 4000  # ~0.5 ms a call: at 200 (25 us) the call's own cost hid 10-25% of the peak

    def __init__(self, lanes: int | None = None):
        self.lanes = lanes or max(CPUTarget.host().vector_bits // 32, 1)
        self._module = load_shared(emit_cpu([peak_kernel(self.lanes, self.STEPS)]))
        self._out = np.zeros((ITERATIONS, self.lanes), np.float32)
        self._module.run("peak", self._out)  # warm-up: code paged in, clocks up
        once = _thread_seconds(self._run)
        self._runs_per_ms = max(1, int(1e-3 / max(once, 1e-7)))
        self.best = 0.0  # the fastest burst so far: what this core has shown it delivers

    def _run(self) -> None:
        self._module.run("peak", self._out)

    def __call__(self, seconds: float = 0.002) -> float:
        """GFLOP/s of one burst of about `seconds` of this thread's CPU time, after an untimed
        call (right after other code the first call runs 5-15% slow)."""
        self._run()
        repeat = max(1, round(self._runs_per_ms * seconds * 1e3))
        elapsed = _thread_seconds(lambda: [self._run() for _ in range(repeat)])
        flops = ITERATIONS * self.STEPS * ACCUMULATORS * self.lanes * 2 * repeat
        gflops = flops / max(elapsed, 1e-9) / 1e9
        self.best = max(self.best, gflops)
        return gflops


def measure_core_peak_gflops(
    bursts: int = 20, burst_seconds: float = 0.01, lanes: int | None = None
) -> float:
    """One core's fp32 FMA peak, from the best of `bursts` short runs on this thread, with
    vectors of `lanes` floats (default: the host's widest).

    Each burst is timed by this thread's CPU time, not the wall clock: while the scheduler has
    the thread off its core it gains no CPU time, so a busy machine slows the measurement, not
    the figure. The best burst counts (a peak is a best case).
    """
    burst = PeakBursts(lanes)
    return max(burst(burst_seconds) for _ in range(bursts))


def _thread_seconds(fn) -> float:
    """CPU seconds of this thread while `fn` runs (the kernel runs on it: no parallel loop)."""
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def plausible(core_peak: float) -> bool:
    """At least one vector FMA per cycle at 1 GHz: anything less was a busy machine, not a CPU
    (the slowest core with these vectors does more); at most four a cycle at 10 GHz: anything
    more is a corrupt cache, not a CPU (today's cores do two at 3-6 GHz)."""
    lanes = max(CPUTarget.host().vector_bits // 32, 1)
    return lanes * 2 * 1.0 <= core_peak <= lanes * 2 * 4 * 10.0


def cpu_key() -> str:
    """Names this CPU (model and features): what a cached per-core figure holds for."""
    llvm.initialize_native_target()
    features = llvm.get_host_cpu_features().flatten()
    digest = hashlib.sha1(features.encode()).hexdigest()[:12]
    return f"{llvm.get_host_cpu_name()}/{digest}"


def cache_path(name: str = "peak.json") -> str:
    """A JSON file of figures measured per CPU key (the peaks by default) in tvmc's cache."""
    root = os.environ.get(CACHE_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tvmc")
    return os.path.join(root, name)


def peak_gflops(threads: int | None = None) -> tuple[float, str]:
    """The CPU's fp32 peak in GFLOP/s for `threads` (default: the runtime's), and its source:
    $TVMC_PEAK_GFLOPS, or one core's measured peak (cached per CPU) times the cores used."""
    value = os.environ.get(PEAK_GFLOPS_ENV, "").strip()
    if value:
        try:
            peak = float(value)
        except ValueError:
            raise UsageError(f"${PEAK_GFLOPS_ENV} must be a number, got {value!r}") from None
        if not 0 < peak < float("inf"):
            raise UsageError(f"${PEAK_GFLOPS_ENV} must be a positive number, got {value!r}")
        return peak, f"${PEAK_GFLOPS_ENV}"
    cores = min(threads or num_threads(), physical_cores())  # SMT siblings share FMA units
    core, source = _core_peak()
    name = cpu_key().split("/")[0]
    return core * cores, f"{core:.0f} per core on {name} ({source}) x {cores} cores"


_measured_here: set[str] = set()  # CPU keys this process has measured


def _core_peak() -> tuple[float, str]:
    """One core's peak and its source: the cached best, measured again (best kept) while fewer
    than MEASUREMENTS processes have measured it."""
    key, path = cpu_key(), cache_path()
    cached = read_cache(path)
    best, count = _entry(cached.get(key))
    if count >= MEASUREMENTS or (best and key in _measured_here):
        return best, "cached"
    _measured_here.add(key)
    first, second = measure_core_peak_gflops(), measure_core_peak_gflops()
    core = max(first, second)
    if min(first, second) < STABLE * core or not plausible(core):
        if best:
            return best, "cached"  # this process met a busy machine: the cached best stands
        return core, "measured on a busy machine, not cached"
    cached = read_cache(path)  # another process may have measured meanwhile
    best, count = _entry(cached.get(key))
    best = max(best, core)
    _store(path, cached, key, best, count + 1)
    return best, "measured"


def record_core_peak(gflops: float) -> float:
    """Raise the cached per-core peak to `gflops`, one core's FMA rate this process timed with the
    host's widest vectors (a benchmark's best `PeakBursts`), where it is higher and plausible: a
    cached figure the core has beaten was measured in a slow spell, and shares of it would pass
    100%. Returns the per-core peak cached now (0 where none is; a read-only cache: the higher)."""
    key, path = cpu_key(), cache_path()
    cached = read_cache(path)
    best, count = _entry(cached.get(key))
    if not plausible(gflops):
        return best
    if gflops > best:
        _store(path, cached, key, gflops, count)
    return max(best, gflops)


def _store(path: str, cached: dict, key: str, gflops: float, measurements: int) -> None:
    """Writes `cached` with the entry of `key` replaced."""
    entry = {"gflops": round(gflops, 1), "measurements": measurements, "kernel": KERNEL_VERSION}
    write_cache(path, {**cached, key: entry})


def _entry(value: object) -> tuple[float, int]:
    """A cache entry's (best per-core GFLOP/s, measurements); (0, 0) if missing, implausible or
    measured by another kernel (earlier versions' bare figures and KERNEL_VERSION 1 read low)."""
    if not isinstance(value, dict) or value.get("kernel") != KERNEL_VERSION:
        return 0.0, 0
    gflops, count = value.get("gflops"), value.get("measurements")
    number = isinstance(gflops, int | float) and not isinstance(gflops, bool)
    if not (number and isinstance(count, int) and math.isfinite(gflops) and plausible(gflops)):
        return 0.0, 0
    return float(gflops), max(count, 0)  # 0: only raised by bursts, never measured


def read_cache(path: str) -> dict:
    """A cache file's mapping; empty where there is none yet or it is unreadable."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: measure again
    return data if isinstance(data, dict) else {}


def write_cache(path: str, data: dict) -> None:
    """Best effort: with a read-only home, each process measures again what it would have read."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass
