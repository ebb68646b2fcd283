"""The benchmark loop (warm-up, count- and time-bounded) and the statistics of its results."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tvmc.runtime.timing import Timings, measure, timed_runs


def counting(calls: list[str], tag: str, seconds: float = 0.0):
    def fn() -> None:
        calls.append(tag)
        if seconds:
            time.sleep(seconds)

    return fn


@pytest.mark.parametrize("warmup", [0, 1, 5])
def test_warmup_runs_come_first_and_are_not_timed(warmup: int):
    calls: list[str] = []
    timings = measure(lambda: (counting(calls, "timed")(), (1e-3, 1))[1], counting(calls, "warm"),
                      repeat=3, warmup=warmup)  # fmt: skip
    assert calls == ["warm"] * warmup + ["timed"] * 3
    assert timings.results == (1e-3,) * 3 and timings.warmup == warmup and timings.runs == 3


def test_duration_bounds_the_run_by_time_and_keeps_repeat_as_a_floor():
    step = counting([], "x", 0.005)
    start = time.perf_counter()
    timings = measure(lambda: timed_runs(step, 1, 0.0), step, repeat=2, warmup=0, duration=0.1)
    elapsed = time.perf_counter() - start
    assert 0.1 <= timings.seconds <= elapsed
    assert 5 <= len(timings.results) <= 25  # ~5 ms each over 0.1 s, not the 2 of --repeat
    assert timings.runs == len(timings.results)
    many = measure(lambda: timed_runs(step, 1, 0.0), step, repeat=12, warmup=0, duration=0.01)
    assert len(many.results) == 12  # the floor wins over a short duration


def test_runs_count_every_call_of_a_raised_number():
    step = counting([], "x", 0.001)
    timings = measure(lambda: timed_runs(step, 1, 10.0), step, repeat=3, warmup=0)
    assert timings.runs >= 3 * 8  # number doubled until a measurement lasts 10 ms
    assert timings.throughput == pytest.approx(timings.runs / timings.seconds)
    assert 100 < timings.throughput < 1000  # a 1 ms call: under 1000 per second


def test_statistics_match_numpy():
    values = np.arange(1, 101) / 1e3  # 1..100 ms
    timings = Timings(tuple(values), runs=100, seconds=float(values.sum()), warmup=1,
                      load_seconds=0.25, first_seconds=0.002)  # fmt: skip
    assert timings.mean == pytest.approx(50.5) and timings.median == pytest.approx(50.5)
    assert (timings.min, timings.max) == pytest.approx((1.0, 100.0))
    for q in (50, 90, 95, 99):
        assert timings.percentile(q) == pytest.approx(np.percentile(values * 1e3, q))
    assert timings.percentile(90) == pytest.approx(90.1)
    document = timings.to_json()
    assert document["p99_ms"] == pytest.approx(99.01)
    assert document["throughput_per_s"] == pytest.approx(100 / values.sum())
    assert document["load_ms"] == pytest.approx(250.0)
    assert document["first_inference_ms"] == pytest.approx(2.0)
    assert list(document)[:5] == ["mean_ms", "median_ms", "max_ms", "min_ms", "std_ms"]


def test_throughput_without_a_run_count_is_one_over_the_mean():
    assert Timings((0.004, 0.006)).throughput == pytest.approx(200.0)
