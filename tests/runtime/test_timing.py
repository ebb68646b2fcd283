"""The benchmark loop (warm-up, count- and time-bounded) and the statistics of its results."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from tvmc.runtime import timing
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


def fake_clock(monkeypatch: pytest.MonkeyPatch, tick: float):
    """A step that takes `tick` seconds of a fake clock, and the calls it counts."""
    clock, calls = [0.0], []

    def step() -> None:
        clock[0] += tick
        calls.append(1)

    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    return step, calls


def test_duration_bounds_the_run_by_time_and_keeps_repeat_as_a_floor(
    monkeypatch: pytest.MonkeyPatch,
):
    step, calls = fake_clock(monkeypatch, 1 / 256)  # ~3.9 ms, exact in binary
    timings = measure(lambda: timed_runs(step, 1, 0.0), step, repeat=2, warmup=0, duration=0.1)
    assert len(timings.results) == 26 == timings.runs  # the first count with 26/256 s >= 0.1 s
    assert timings.seconds == 26 / 256
    floor = measure(lambda: timed_runs(step, 1, 0.0), step, repeat=12, warmup=0, duration=0.01)
    assert len(floor.results) == 12  # the floor wins over a short duration


def test_a_real_duration_is_at_least_that_long():
    step = counting([], "x", 0.002)
    start = time.perf_counter()
    timings = measure(lambda: timed_runs(step, 1, 0.0), step, repeat=1, warmup=0, duration=0.05)
    assert 0.05 <= timings.seconds <= time.perf_counter() - start
    assert len(timings.results) >= 2


def test_runs_count_every_call_of_a_raised_number(monkeypatch: pytest.MonkeyPatch):
    """Each call takes 1/1024 s (exact in binary), so a 10 ms measurement takes a try of 1
    call, then one of 11."""
    tick = 1 / 1024
    step, calls = fake_clock(monkeypatch, tick)
    timings = measure(lambda: timed_runs(step, 1, 10.0), step, repeat=3, warmup=0)
    assert timings.results == (tick,) * 3
    assert timings.runs == len(calls) == 3 * (1 + 11)  # the short tries ran in the time too
    assert timings.seconds == 36 * tick and timings.throughput == 1024


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
