"""Choosing, run by run, between a program's full thread count and one thread.

Why: on a machine shared with other work, a pool worker preempted in the middle of a chunk it
claimed holds the join of its loop until the scheduler runs it again, a slice of several
milliseconds; beside one busy core that happens in most inferences, and 2 threads take longer
than 1 (docs/performance.md, the noisy-neighbour benchmark). A rule inside the pool that judged
single loops was measured and dropped: a loop's time says too little. Whole inferences do, so
the executor times every run, keeps the recent times of each count, and now and then probes the
count it is not using: rarely while that count keeps losing clearly, at once when the times of
the count in use move (a neighbour came or went).

Policy constants below are ratios and run counts, not timings: nothing here depends on the
machine. $TVMC_ADAPTIVE_THREADS=0 keeps the full count on every run.
"""

from __future__ import annotations

from collections import deque

WINDOW = 5  # recent runs per thread count whose median stands for that count
PROBE_RUNS = 2  # runs of the full count per probe (the first may find the workers asleep)
FIRST_INTERVAL = 4  # runs before the first probe, and after a switch or a change of the machine
CLOSE_INTERVAL = 32  # most runs between probes while the other count is about as fast
MAX_INTERVAL = 256  # most runs between probes while the other count loses clearly
CLEAR_LOSS = 1.25  # the other count is slower by this factor: it loses clearly
SWITCH_BELOW = 0.95  # switch when the other count's median is under this share of the current's
DRIFT = 1.3  # the current count's median moved by this factor since the last probe: probe now


class ThreadChoice:
    """Which thread count the next run uses, learnt from the times of the runs before.

    `next_threads()` before a run, `observe(threads, seconds)` after it. With `full` 1 there is
    nothing to choose and every run uses one thread.
    """

    def __init__(self, full: int) -> None:
        self.full = full
        self.current = full
        self.runs = {full: 0, 1: 0}  # runs observed per thread count
        self._recent = {full: deque(maxlen=WINDOW), 1: deque(maxlen=WINDOW)}
        self._interval = FIRST_INTERVAL
        self._since_probe = 0
        self._probe_left = 0
        self._baseline: float | None = None  # the current count's median at the last decision

    @property
    def other(self) -> int:
        return 1 if self.current == self.full else self.full

    def next_threads(self) -> int:
        if self.full <= 1:
            return 1
        return self.other if self._probe_left else self.current

    def observe(self, threads: int, seconds: float) -> None:
        if self.full <= 1 or threads not in self._recent:
            return
        self.runs[threads] += 1
        self._recent[threads].append(seconds)
        if threads != self.current:  # a probe run
            self._probe_left = max(self._probe_left - 1, 0)
            if not self._probe_left:
                self._decide()
            return
        self._since_probe += 1
        if self._since_probe % WINDOW == 0 and self._moved():
            # the machine changed: what the other count did before is stale
            self._recent[self.other].clear()
            self._interval = FIRST_INTERVAL
            self._since_probe = self._interval
        if self._since_probe >= self._interval:
            self._probe_left = PROBE_RUNS if self.other == self.full else 1
            self._since_probe = 0

    def _moved(self) -> bool:
        """Whether the count in use got faster or slower by DRIFT since the last decision."""
        if self._baseline is None:
            return False
        current = _median(self._recent[self.current])
        return current > self._baseline * DRIFT or current * DRIFT < self._baseline

    def _decide(self) -> None:
        if not self._recent[self.current] or not self._recent[self.other]:
            return  # runs not of our choosing (observe is public)
        current = _median(self._recent[self.current])
        other = _median(self._recent[self.other])
        if other < current * SWITCH_BELOW:
            self.current = self.other
            self._interval = FIRST_INTERVAL
        else:  # kept: probe half as often, up to a bound that depends on how far behind
            bound = MAX_INTERVAL if other > current * CLEAR_LOSS else CLOSE_INTERVAL
            self._interval = min(self._interval * 2, max(bound, self._interval // 2))
        self._baseline = _median(self._recent[self.current])


def _median(times: deque[float]) -> float:
    """The middle value (the upper one of an even count): cheap, and runs can take 20 us."""
    return sorted(times)[len(times) // 2]
