"""A load generator: the neighbours a shared machine gives a model (noisy-neighbour benchmark).

Each kind of load runs in its own processes until stopped:
- `spin`: busy loops, one core each;
- `blas`: numpy matmuls on `blas_threads` OpenBLAS threads each (threads that spin and join
  like an inference runtime's pool, as a neighbour's training or export job does);
- `spawn`: loops starting short-lived processes (`python -c pass`: fork, exec, import, exit,
  as a build or a test runner does);
- `memory`: copies through a `memory_mb` buffer (memory bandwidth and page faults);
- `bursty`: all of the above switched on and off every `burst_ms` (compiles come and go).

`python benchmarks/load.py mixed --seconds 60` runs a preset on its own (e.g. beside
`tvmc run`); `with Load(PRESETS["mixed"]): ...` wraps a measurement.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class LoadSpec:
    """How many processes of each kind; 0 everywhere is no load."""

    spin: int = 0
    blas: int = 0
    blas_threads: int = 2
    spawn: int = 0
    memory: int = 0
    memory_mb: int = 256
    burst_ms: int = 0  # > 0: every process alternates burst_ms on, burst_ms off

    def describe(self) -> str:
        parts = [f"{k} {v}" for k, v in vars(self).items() if v and k not in _DETAILS]
        if self.blas:
            parts.append(f"({self.blas_threads} BLAS threads each)")
        if self.burst_ms:
            parts.append(f"on/off every {self.burst_ms} ms")
        return ", ".join(parts) or "none"


_DETAILS = ("blas_threads", "memory_mb", "burst_ms")
CORES = os.cpu_count() or 1
PRESETS = {
    "alone": LoadSpec(),
    "one-core": LoadSpec(spin=1),
    "all-cores": LoadSpec(spin=CORES),
    # what reproduced the collapse here: a neighbour's multi-threaded numeric job beside process
    # churn and memory traffic, three to four runnable threads per core
    "mixed": LoadSpec(spin=1, blas=2, blas_threads=CORES, spawn=1, memory=1),
    "bursty": LoadSpec(spin=1, blas=2, blas_threads=CORES, spawn=1, memory=1, burst_ms=50),
}


def _paced(parent: int, work, burst_ms: int) -> None:
    """Runs `work()` steps while process `parent` (the load generator) is this one's parent;
    with burst_ms, only in every other burst_ms window. (A neighbour outliving a killed load
    generator spun on for good and slowed every later measurement on the machine.)"""
    while os.getppid() == parent:
        if burst_ms:
            phase = int(time.monotonic() * 1000 / burst_ms)
            if phase % 2:
                time.sleep(burst_ms / 1000)
                continue
        work()


def _spin(parent: int, burst_ms: int) -> None:
    def work() -> None:
        for _ in range(20000):
            pass

    _paced(parent, work, burst_ms)


def _blas(parent: int, threads: int, burst_ms: int) -> None:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    import numpy as np  # after the thread count is set: OpenBLAS reads it when it loads

    a = np.random.default_rng(0).standard_normal((384, 384), dtype=np.float32)
    _paced(parent, lambda: a @ a, burst_ms)


def _spawn(parent: int, burst_ms: int) -> None:
    cmd = [sys.executable, "-c", "pass"]
    _paced(parent, lambda: subprocess.run(cmd, check=False), burst_ms)


def _memory(parent: int, megabytes: int, burst_ms: int) -> None:
    import numpy as np

    src = np.ones(megabytes * (1 << 20) // 8)
    dst = np.empty_like(src)
    _paced(parent, lambda: np.copyto(dst, src), burst_ms)


class Load:
    """Context manager: starts the processes of `spec`, stops (kills) them on exit."""

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        self.procs: list[mp.Process] = []

    def __enter__(self) -> Load:
        s = self.spec
        ctx = mp.get_context("spawn")  # no inherited thread pools or locks
        jobs = (
            [(_spin, (s.burst_ms,))] * s.spin
            + [(_blas, (s.blas_threads, s.burst_ms))] * s.blas
            + [(_spawn, (s.burst_ms,))] * s.spawn
            + [(_memory, (s.memory_mb, s.burst_ms))] * s.memory
        )
        for fn, args in jobs:
            p = ctx.Process(target=fn, args=(os.getpid(), *args), daemon=True)
            p.start()
            self.procs.append(p)
        time.sleep(0.5 if jobs else 0)  # let them start and allocate
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
        for p in self.procs:
            p.join()
        self.procs.clear()


def parse_spec(text: str) -> LoadSpec:
    """A preset name, optionally with overrides: `mixed`, `spin=2,blas=1`, `mixed:burst_ms=20`."""
    name, _, overrides = text.partition(":") if text in PRESETS or ":" in text else ("", "", text)
    spec = PRESETS[name] if name else LoadSpec()
    fields = {}
    for item in filter(None, overrides.split(",")):
        key, _, value = item.partition("=")
        if key not in LoadSpec.__dataclass_fields__:
            raise SystemExit(f"unknown load field {key!r}; valid: {', '.join(vars(spec))}")
        if not value.isdigit():
            raise SystemExit(f"load field {key!r} takes a whole number, not {value!r}")
        fields[key] = int(value)
    return replace(spec, **fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", help=f"a preset ({', '.join(PRESETS)}) or spin=1,blas=2,...")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    spec = parse_spec(args.spec)
    print(f"load: {spec.describe()} for {args.seconds:g} s", flush=True)
    # `kill` (SIGTERM) ends the sleep as an exception, so that the neighbours are stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with Load(spec):
        time.sleep(args.seconds)


if __name__ == "__main__":
    main()
