"""Benchmark timing: the measurement loop (`--repeat`, `--number`, `--min-repeat-ms`,
`--warmup`, `--duration`) and the statistics of its results (`Timings`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PERCENTILES = (50, 90, 95, 99)
SUMMARY = ("mean", "median", "max", "min", "std")  # TVMC's columns, in its order


@dataclass(frozen=True)
class Timings:
    """Seconds per inference, one value per measurement (each the mean of `number` or more
    runs), and how the benchmark went: `runs` inferences run in the `seconds` of measuring,
    after `warmup` untimed ones; `load_seconds` (package read to ready) and `first_seconds`
    (the first inference, cold) when the caller measured them; `thread_runs`, the inferences run
    on each thread count when the executor chose it run by run (runtime/thread_choice.py)."""

    results: tuple[float, ...]
    runs: int = 0
    seconds: float = 0.0
    warmup: int = 0
    load_seconds: float | None = None
    first_seconds: float | None = None
    thread_runs: tuple[tuple[int, int], ...] = ()  # (threads, runs) per count used, warm-up too

    def _ms(self) -> list[float]:
        return [t * 1e3 for t in self.results]

    @property
    def mean(self) -> float:
        return statistics.fmean(self._ms())

    @property
    def median(self) -> float:
        return statistics.median(self._ms())

    @property
    def max(self) -> float:
        return max(self._ms())

    @property
    def min(self) -> float:
        return min(self._ms())

    @property
    def std(self) -> float:
        return statistics.pstdev(self._ms())

    def percentile(self, q: float) -> float:
        """The q-th percentile of the measurements in ms (linear interpolation, numpy's)."""
        return float(np.percentile(self._ms(), q))

    @property
    def throughput(self) -> float:
        """Inferences per second: runs over the time they took (one after another), or
        1000 / mean when the run count is unknown."""
        if self.runs and self.seconds > 0:
            return self.runs / self.seconds
        return 1e3 / self.mean if self.mean > 0 else 0.0

    def to_json(self) -> dict[str, float | int | None]:
        """TVMC's mean/median/max/min/std, percentiles and load/first times in ms; throughput."""
        document: dict[str, float | int | None] = {f"{k}_ms": getattr(self, k) for k in SUMMARY}
        document.update({f"p{q}_ms": self.percentile(q) for q in PERCENTILES})
        document["throughput_per_s"] = self.throughput
        document["load_ms"] = _ms_or_none(self.load_seconds)
        document["first_inference_ms"] = _ms_or_none(self.first_seconds)
        document["warmup"] = self.warmup
        document["runs"] = self.runs
        document["seconds"] = self.seconds
        document["thread_runs"] = [{"threads": n, "runs": r} for n, r in self.thread_runs]
        return document


def _ms_or_none(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def mean_seconds(fn: Callable[[], None], number: int, min_repeat_ms: float) -> float:
    """Mean seconds per call over `number` calls, raising `number` until `min_repeat_ms` passes."""
    return timed_runs(fn, number, min_repeat_ms)[0]


def timed_runs(fn: Callable[[], None], number: int, min_repeat_ms: float) -> tuple[float, int]:
    """(mean seconds per call of the try that lasted `min_repeat_ms`, calls made in all tries):
    `number` raised until one try lasts that long. Every call counts toward throughput: the
    shorter tries ran inside the measured time too."""
    calls = 0
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        calls += number
        if elapsed * 1e3 >= min_repeat_ms or min_repeat_ms <= 0:
            return elapsed / number, calls
        number = max(number * 2, int(number * min_repeat_ms / max(elapsed * 1e3, 1e-3)) + 1)


def measure(
    measurement: Callable[[], tuple[float, int]],
    warm_up: Callable[[], None],
    repeat: int,
    warmup: int = 1,
    duration: float = 0.0,
) -> Timings:
    """Run `warm_up` `warmup` times, then take measurements (each `(mean seconds, runs)`):
    `repeat` of them, or, with `duration` > 0, as many as fit in `duration` seconds and at
    least `repeat` (benchmark_app's -t: the run is bounded by time, not by count)."""
    for _ in range(warmup):
        warm_up()
    results: list[float] = []
    runs = 0
    start = time.perf_counter()
    while True:
        mean, count = measurement()
        results.append(mean)
        runs += count
        elapsed = time.perf_counter() - start
        if len(results) >= repeat and elapsed >= duration:
            break
    return Timings(tuple(results), runs, elapsed, warmup)
