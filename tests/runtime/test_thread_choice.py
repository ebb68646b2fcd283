"""The executor's run-by-run choice between the full thread count and one thread."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tvmc
from tests.runtime.test_executor_threads import _conv_package
from tvmc.codegen import set_num_threads
from tvmc.codegen.pool import stats as pool_stats
from tvmc.runtime import thread_choice
from tvmc.runtime.thread_choice import ThreadChoice


def simulate(choice: ThreadChoice, seconds_of, runs: int) -> list[int]:
    """Runs `runs` times with `seconds_of(threads, i)` as each run's time; the counts used."""
    used = []
    for i in range(runs):
        threads = choice.next_threads()
        used.append(threads)
        choice.observe(threads, seconds_of(threads, i))
    return used


def noisy(times: dict[int, float], seed: int = 0):
    rng = np.random.default_rng(seed)
    return lambda threads, i: times[threads] * rng.uniform(0.95, 1.05)


def test_one_thread_set_means_nothing_to_choose():
    assert set(simulate(ThreadChoice(1), noisy({1: 1.0}), 50)) == {1}


def test_keeps_the_full_count_when_it_is_faster_and_probes_ever_less():
    used = simulate(ThreadChoice(2), noisy({2: 1.0, 1: 1.9}), 2000)
    assert used[:4] == [2, 2, 2, 2]
    assert 1 in used[:10]  # probed early
    assert used.count(1) / len(used) < 0.02
    late = used[1000:]
    assert 0 < late.count(1) <= 2 * len(late) // thread_choice.MAX_INTERVAL + 2


def test_takes_one_thread_when_that_is_faster():
    used = simulate(ThreadChoice(2), noisy({2: 1.5, 1: 1.0}), 500)
    assert used[4:40].count(1) >= 24  # switched at the first probe
    assert used[100:].count(2) / len(used[100:]) < 0.03  # the full count still probed, rarely


def test_follows_a_neighbour_that_comes_and_goes():
    def times(threads: int, i: int) -> float:
        busy = 300 <= i < 600  # a neighbour takes a core: two threads lose
        return {2: 2.0 if busy else 1.0, 1: 1.3 if busy else 1.8}[threads]

    used = simulate(ThreadChoice(2), times, 900)
    assert used[250:300].count(2) >= 48
    assert used[310:600].count(1) / 290 > 0.9  # switched within a few runs of the change
    assert used[610:900].count(2) / 290 > 0.9  # and back when the neighbour left


def test_close_counts_are_probed_at_most_every_close_interval_after_warm_up():
    used = simulate(ThreadChoice(2), noisy({2: 1.0, 1: 1.02}), 3000)
    switches = sum(a != b for a, b in zip(used, used[1:]))
    assert switches < 3000 // 8  # not flapping run by run


@pytest.mark.parametrize("adaptive", [True, False])
def test_executor_runs_each_inference_on_the_count_chosen(tmp_path, monkeypatch, adaptive):
    package, data = _conv_package(tmp_path)
    set_num_threads(2)
    try:
        executor = tvmc.TVMCPackage(package).executor()
        executor.adaptive_threads = adaptive
        plan = itertools.cycle([1, 2, 1, 1, 2, 2])
        monkeypatch.setattr(ThreadChoice, "next_threads", lambda self: next(plan))
        executor.set_inputs([data["x"]])
        serial_before = pool_stats().serial_loops
        outputs = [executor.run()[0] for _ in range(24)]
        serial = pool_stats().serial_loops - serial_before
        for out in outputs:
            np.testing.assert_allclose(out, data["expected"], rtol=1e-3, atol=1e-3)
        if adaptive:
            assert executor.thread_runs == {1: 12, 2: 12}
            assert serial >= 12  # the one-thread runs ran their loops on the caller alone
        else:
            assert executor.thread_runs == {}
            assert serial == 0
        executor.profile(repeat=1)  # per-kernel calls run on the count set
        assert executor.module._threads.value == 2
    finally:
        set_num_threads(None)


def test_adaptive_threads_are_turned_on_from_the_environment(tmp_path, monkeypatch):
    package, _ = _conv_package(tmp_path)
    monkeypatch.delenv("TVMC_ADAPTIVE_THREADS", raising=False)
    assert tvmc.TVMCPackage(package).executor().adaptive_threads is False
    monkeypatch.setenv("TVMC_ADAPTIVE_THREADS", "off")
    assert tvmc.TVMCPackage(package).executor().adaptive_threads is False
    monkeypatch.setenv("TVMC_ADAPTIVE_THREADS", "on")
    assert tvmc.TVMCPackage(package).executor().adaptive_threads is True


def test_the_ladder_is_the_count_set_and_its_halves():
    assert thread_choice.ladder(16) == [16, 8, 4, 2, 1]
    assert thread_choice.ladder(3) == [3, 1]
    assert thread_choice.ladder(2) == [2, 1]
    assert thread_choice.ladder(1) == [1]


def test_settles_on_a_middle_rung_when_that_is_fastest():
    # 16 threads on a machine where some cores are busy: 4 threads run best
    times = {16: 3.0, 8: 1.6, 4: 1.0, 2: 1.4, 1: 2.6}
    used = simulate(ThreadChoice(16), noisy(times), 3000)
    assert used[500:].count(4) / len(used[500:]) > 0.95
    assert {8, 2} <= set(used[500:])  # both neighbours still probed


def test_one_lucky_probe_does_not_switch():
    rng = np.random.default_rng(1)

    def times(threads: int, i: int) -> float:
        if threads == 1 and i == 4:
            return 0.5  # the first probe ran while the machine was briefly quiet
        return {2: 1.0, 1: 1.9}[threads] * rng.uniform(0.95, 1.05)

    used = simulate(ThreadChoice(2), times, 40)
    assert used[4:7] == [1, 1, 2]  # looked again, and stayed on two threads
    assert used[7:].count(1) <= 2
