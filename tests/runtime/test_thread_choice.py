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


# whole trials of one thread against two, in blocks of three runs (current, candidate,
# candidate, current); a block on two threads after runs on one starts with an untimed run
TRIAL_DOWN = [2, 2, 2] + [1] * 6 + [2] * 4
TRIAL_UP = [1, 1, 1] + [2] * 7 + [1, 1, 1]
# a trial down whose candidate lost the first pair of blocks: it cannot switch, so it ends as
# soon as that is known, here at two of its three runs slower than the block before's median
TRIAL_DOWN_LOST = TRIAL_DOWN[:5]


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
    # a trial down, switched; four runs on, a trial up: a block on one thread, the run that
    # wakes the workers, then a block whose fastest run loses clearly, which ends it
    assert used[4:29] == TRIAL_DOWN + [1, 1, 1, 1] + [1, 1, 1, 2, 2, 2, 2] + [1]
    assert used[100:].count(2) / len(used[100:]) < 0.04  # the full count still probed, rarely


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


def test_a_fixed_run_after_a_chosen_one_runs_on_the_count_set(tmp_path, monkeypatch):
    # models.py --fixed-threads times one executor both ways: its fixed runs ran on whatever
    # count the chooser's last run had used (a one-thread trial run made them 1.8x slower)
    package, data = _conv_package(tmp_path)
    set_num_threads(2)
    try:
        executor = tvmc.TVMCPackage(package).executor()
        monkeypatch.setattr(ThreadChoice, "next_threads", lambda self: 1)
        executor.set_inputs([data["x"]])
        executor.call()
        assert executor.module._threads.value == 1
        executor.adaptive_threads = False
        serial_before = pool_stats().serial_loops
        executor.call()
        assert pool_stats().serial_loops == serial_before
        assert executor.module._threads.value == 2
    finally:
        set_num_threads(None)


def test_adaptive_threads_are_on_unless_the_environment_turns_them_off(tmp_path, monkeypatch):
    package, _ = _conv_package(tmp_path)
    monkeypatch.delenv("TVMC_ADAPTIVE_THREADS", raising=False)
    assert tvmc.TVMCPackage(package).executor().adaptive_threads is True
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


def test_one_lucky_run_does_not_switch():
    rng = np.random.default_rng(1)

    def times(threads: int, i: int) -> float:
        if threads == 1 and i == 7:
            return 0.5  # the trial's first timed run came while the machine was briefly quiet
        return {2: 1.0, 1: 1.9}[threads] * rng.uniform(0.95, 1.05)

    used = simulate(ThreadChoice(2), times, 40)
    # the lucky run did not move its block's median: the block lost at its third run
    assert used[4:10] == TRIAL_DOWN[:6]
    assert used[10:18] == [2] * 8  # kept two threads; the next trial, after 8 runs,
    assert used[10:].count(1) == 1  # ends at its first run, a clear loss


def test_a_trial_ends_when_the_candidate_loses_its_first_pair_of_blocks():
    # one thread 5% slower: no clear loss at its first run, but its block lost to the one before
    used = simulate(ThreadChoice(2), noisy({2: 1.0, 1: 1.05}), 12)
    assert used[4:12] == TRIAL_DOWN_LOST + [2, 2, 2]


def test_a_clear_loss_ends_the_trial_after_its_first_timed_run():
    used = simulate(ThreadChoice(2), noisy({2: 1.0, 1: 1.9}), 12)
    assert used[4:9] == [2, 2, 2, 1, 2]


def test_short_disturbances_do_not_move_it_to_one_thread():
    # another runtime's threads spin for a few runs at the start of each block of 30 runs
    def times(threads: int, i: int) -> float:
        disturbed = i % 30 < 3
        return {2: 3.0 if disturbed else 1.0, 1: 1.9}[threads]

    used = simulate(ThreadChoice(2), times, 3000)
    assert used[100:].count(1) / len(used[100:]) < 0.02


def test_a_machine_slowing_steadily_during_a_trial_favours_neither_count():
    # both counts equally fast, every run 3% slower than the one before: in the order
    # current, candidate, candidate, current each count gains in one pair and loses in the other
    # (here the candidate loses the first, which ends each trial)
    choice = ThreadChoice(2)
    used = simulate(choice, lambda threads, i: 1.03**i, 80)
    assert used[4:9] == TRIAL_DOWN_LOST
    assert longest_run_of(1, used) == 2 and choice.current == 2  # trials only, never a switch


def test_waking_the_workers_is_not_charged_to_more_threads():
    # two threads 10% faster back to back, but a run on two threads right after one on one
    # thread wakes the pool's sleeping workers and costs half again
    choice, used, last = ThreadChoice(2), [], 2
    for _ in range(2000):
        threads = choice.next_threads()
        seconds = 1.0 if threads == 1 else (1.5 if last == 1 else 0.9)
        choice.observe(threads, seconds)
        used.append(threads)
        last = threads
    assert longest_run_of(1, used) == 2 and choice.current == 2  # trials only, never a switch
    assert used[200:].count(2) / len(used[200:]) > 0.9  # trials every 64 runs: about as fast


def longest_run_of(threads: int, used: list[int]) -> int:
    return max((len(list(g)) for n, g in itertools.groupby(used) if n == threads), default=0)


def test_either_way_a_count_7_percent_faster_is_taken():
    # beside one busy core light_resnet50 ran 10% faster on one thread than on two; fewer
    # threads had to win by 10% then, and it stayed on two
    used = simulate(ThreadChoice(2), noisy({2: 1.0, 1: 0.93}, seed=2), 400)
    assert used[-100:].count(1) > 90
    choice = ThreadChoice(4)
    choice.current = 2  # on the middle rung; 4 threads 7% faster than 2, 1 thread slow
    used = simulate(choice, noisy({4: 0.93, 2: 1.0, 1: 2.0}, seed=3), 400)
    assert used[-100:].count(4) > 90


def run_waking(two: float, wake: float, runs: int) -> list[int]:
    """The counts used over `runs` runs from one thread, one thread's runs taking 1 and two
    threads' `two`, except that after runs on one thread the runs on two take longer while the
    woken core settles: (1 + wake), (1 + wake / 2), ... times `two` (the first is untimed)."""
    choice, used, settled = ThreadChoice(2), [], 0
    choice.current = 1
    for _ in range(runs):
        threads = choice.next_threads()
        settled = settled + 1 if threads == 2 else 0
        seconds = 1.0 if threads == 1 else two * (1 + wake * 0.5 ** (settled - 1))
        choice.observe(threads, seconds)
        used.append(threads)
    return used


def test_a_woken_core_settling_weighs_on_trials_up_as_on_trials_down():
    # two threads 20% faster back to back, but after runs on one thread the first runs on two
    # are slower while the woken core settles (+80%, +40%, +20%, ...: the first is untimed).
    # With the candidate's blocks first and last, both blocks of a trial up paid for it and
    # the chooser stayed on one thread; now one block of each trial does, up or down.
    used = run_waking(two=0.8, wake=0.8, runs=400)
    assert used[:4] == [1, 1, 1, 1] and used[4:17] == TRIAL_UP  # switched at the first trial
    assert used[100:].count(2) / len(used[100:]) > 0.9


def test_a_woken_core_settling_does_not_take_fewer_threads():
    # two threads 3% faster back to back; after runs on one thread the first runs on two are
    # slower while the woken core settles: a trial down's last block, which its medians leave
    # out (with it, one thread won 98% of these runs)
    rng = np.random.default_rng(0)
    choice, used, settled = ThreadChoice(2), [], 0
    for _ in range(2000):
        threads = choice.next_threads()
        settled = settled + 1 if threads == 2 else 0
        slow = 1 + 0.8 * 0.5 ** (settled - 1)
        seconds = (1.0 if threads == 1 else 0.97 * slow) * rng.uniform(0.95, 1.05)
        choice.observe(threads, seconds)
        used.append(threads)
    assert choice.current == 2 and used.count(1) / len(used) < 0.1  # trials only


def test_a_change_right_after_a_trial_is_noticed():
    """Long after start-up (trials every 64+ runs), a neighbour arrives in the first run after
    a trial: the windows are compared with the rung as the trial saw it, so the change starts
    a trial within two windows; compared with the first window after the trial (the changed
    machine already) it waited for the next scheduled trial, 64 runs or more."""
    choice, used, changed_at = ThreadChoice(2), [], None
    for i in range(600):
        threads = choice.next_threads()
        used.append(threads)
        if changed_at is None and i > 200 and threads == 2 and used[-2] == 1:
            changed_at = i  # the first run after a trial (lost at its first run on 1 thread)
        busy = changed_at is not None
        choice.observe(threads, {2: 2.0 if busy else 1.0, 1: 1.2 if busy else 1.9}[threads])
    assert changed_at is not None
    after = used[changed_at:]
    assert after.index(1) <= 2 * thread_choice.WINDOW + 3  # a trial down, at once
    assert after[40:].count(1) / len(after[40:]) > 0.9  # and it switched (trials up aside)


def slow_periods(runs: int, seed: int) -> list[bool]:
    """Per run, whether the machine is in one of its slow periods (10-40 runs, every 20-100)."""
    rng, slow = np.random.default_rng(seed), []
    while len(slow) < runs:
        slow += [False] * int(rng.integers(10, 60)) + [True] * int(rng.integers(10, 40))
    return slow[:runs]


def test_a_machine_slow_now_and_then_does_not_start_a_trial_each_time():
    # two threads 1.45x slower in each period, still well ahead of one thread: a trial in every
    # period put 6% of the runs on one thread; trials it started in vain make the next wait
    def times_of(seed: int):
        slow, rng = slow_periods(3000, seed), np.random.default_rng(seed)

        def times(threads: int, i: int) -> float:
            two, one = (1.45, rng.choice([1.9, 3.8])) if slow[i] else (1.0, 1.9)
            return (two if threads == 2 else one) * rng.uniform(0.93, 1.07)

        return times

    for seed in range(3):
        used = simulate(ThreadChoice(2), times_of(seed), 3000)
        assert used[200:].count(1) / len(used[200:]) < 0.02


def test_a_neighbour_that_stays_is_followed_after_periods_that_started_trials_in_vain():
    slow = slow_periods(1500, seed=4)
    choice = ThreadChoice(2)
    simulate(choice, lambda threads, i: {2: 1.45 if slow[i] else 1.0, 1: 1.9}[threads], 1500)
    assert choice._drift_windows == thread_choice.MOST_DRIFT_WINDOWS  # the periods raised it
    # then a neighbour takes a core for good: two threads lose
    after = simulate(choice, lambda threads, i: {2: 2.0, 1: 1.3}[threads], 500)
    limit = (thread_choice.MOST_DRIFT_WINDOWS + 2) * thread_choice.WINDOW
    assert 1 in after[:limit] and after[limit + 20 :].count(1) / len(after[limit + 20 :]) > 0.95


def test_a_slow_wake_up_does_not_keep_one_thread_where_two_are_faster():
    # beside every core busy the woken worker waits for a core: the first runs on two threads
    # after runs on one take up to 2.5x (the first is untimed), two threads are 20% faster once
    # settled. Judged at its first timed run, each trial up lost clearly and it stayed on one.
    used = run_waking(two=0.8, wake=1.5, runs=400)
    assert used[4:17] == TRIAL_UP  # switched at the first trial
    assert used[100:].count(2) / len(used[100:]) > 0.9


def run_replacing(runs: int, one: tuple[float, float], transient: float) -> list[int]:
    """Runs of a model beside every core busy, as measured: two threads 23 ms; one thread
    `one[0]` ms for `transient` seconds after runs on two threads (the busy processes not yet
    re-placed by the kernel), then `one[1]`. The clock is the runs' own times."""
    clock, since_two = 0.0, None

    def seconds_of(threads: int, i: int) -> float:
        nonlocal clock, since_two
        if threads == 2:
            seconds, since_two = 0.023, clock + 0.023
        else:
            moving = since_two is not None and clock - since_two < transient
            seconds = (one[0] if moving else one[1]) / 1e3
        clock += seconds
        return seconds

    return simulate(ThreadChoice(2), seconds_of, runs)


def test_one_thread_fast_until_the_kernel_re_places_the_neighbours_does_not_win():
    # light_inception_v1 on one thread ran fast for 60-80 ms after two-thread runs, then slow:
    # trial blocks of three runs of 19 ms judged the transient and took one thread, 1.3x slower
    assert run_replacing(3000, (19, 30), transient=0.0)[200:].count(2) > 0.9 * 2800
    assert run_replacing(3000, (19, 30), transient=0.08)[200:].count(2) > 0.9 * 2800


def test_trials_of_short_runs_take_the_same_share_of_the_runs():
    # runs of 2 ms: blocks and the settling after a drop last SETTLE_SECONDS (125 runs, not 3),
    # and the runs between trials grow alike; one thread 5% slower, so no trial ends early
    def share_on_one(seconds: float, runs: int) -> float:
        used = simulate(ThreadChoice(2), noisy({2: seconds, 1: seconds * 1.05}), runs)
        late = used[runs // 5 :]
        return late.count(1) / len(late)

    long_runs = share_on_one(1.0, 30000)
    assert 0 < share_on_one(0.002, 30000) < 1.5 * long_runs
    blocks = simulate(ThreadChoice(2), noisy({2: 0.002, 1: 0.0021}), 1000)
    assert longest_run_of(1, blocks) >= thread_choice.SETTLE_SECONDS / 0.0021  # long blocks


def test_a_long_block_ends_at_the_run_that_loses_it():
    # runs of 20 ms: 12 untimed runs on one thread after the drop, then a block of 12 whose
    # median must beat the block before's; one thread 10% slower (no clear loss), so the block
    # has lost at its sixth run (six of twelve at or over that median), not its twelfth
    used = simulate(ThreadChoice(2), noisy({2: 0.020, 1: 0.022}), 60)
    assert used[4:38] == [2] * 12 + [1] * 18 + [2] * 4


def test_a_long_block_slow_at_first_but_won_runs_to_its_end():
    # the same block's first five runs slow, the other seven fast: its median wins, so the
    # trial goes on, and one thread, 10% faster once settled, is taken
    ones = itertools.count()

    def times(threads: int, i: int) -> float:
        if threads == 2:
            return 0.020
        n = next(ones)  # 12 untimed, then the block
        return 0.024 if 12 <= n < 17 else 0.018

    choice = ThreadChoice(2)
    used = simulate(choice, times, 65)
    assert used[4:] == [2] * 12 + [1] * (12 + 12 + 12) + [2] * (1 + 12)  # the whole trial
    assert choice.current == 1


def test_a_trial_up_of_long_blocks_ends_when_its_first_block_loses_clearly():
    # runs of 3.3 ms beside every core busy: two threads vary by half (every third run as fast
    # as one thread's, the others twice as slow), so the fastest of their first three runs does
    # not lose clearly, but the median of their first 75-run block does: the trial ends there,
    # not after a second block on two threads and one more on one
    twos = itertools.count()

    def times(threads: int, i: int) -> float:
        return 0.0033 if threads == 1 else 0.0033 * (0.9 if next(twos) % 3 == 0 else 2.0)

    choice = ThreadChoice(2)
    choice.current = 1
    used = simulate(choice, times, 4 + 75 + 76 + 10)
    assert used[4:] == [1] * 75 + [2] * (1 + 75) + [1] * 10


def test_a_hiccup_in_a_long_block_does_not_cost_whole_trials_on_a_quiet_machine():
    # runs of 2 ms, one in 50 three times as long; one thread 1.6x slower: each trial ends at
    # its first run on one thread (against the slowest of the whole block before, a hiccup,
    # each trial ran 0.5 s on one thread and a third of the runs were on it)
    rng = np.random.default_rng(5)

    def times(threads: int, i: int) -> float:
        hiccup = 3.0 if rng.random() < 0.02 else 1.0
        return 0.002 * (1.6 if threads == 1 else 1.0) * hiccup * rng.uniform(0.97, 1.03)

    used = simulate(ThreadChoice(2), times, 5000)  # 10 s
    assert used.count(1) / len(used) < 0.01


def test_a_long_trial_plans_its_blocks_not_each_run():
    # a model of 20 us: a trial's blocks are 12,500 runs long; a plan of one entry per run,
    # taken off the front of a list, cost more per run than the run itself
    choice = ThreadChoice(2)
    simulate(choice, noisy({2: 20e-6, 1: 21e-6}), 20)
    assert choice._plan and len(choice._plan) <= 6  # a trial under way, in blocks
    used = simulate(choice, noisy({2: 20e-6, 1: 21e-6}), 100_000)
    assert longest_run_of(1, used) >= 12_500
    assert set(simulate(ThreadChoice(2), lambda threads, i: 0.0, 50)) <= {1, 2}  # no division
