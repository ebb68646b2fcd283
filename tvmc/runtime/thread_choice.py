"""Choosing, run by run, how many of a program's threads an inference uses.

Why: on a machine shared with other work, a pool worker preempted in the middle of a chunk it
claimed holds the join of its loop until the scheduler runs it again, a slice of several
milliseconds; beside one busy core that happens in most inferences, and 2 threads take longer
than 1 (docs/performance.md, the noisy-neighbour benchmark). A rule inside the pool that judged
single loops was measured and dropped: a loop's time says too little. Whole inferences do, so
the executor times every run and keeps the recent times of each count it tried. The counts form
a ladder, the count set and its halves down to one (16, 8, 4, 2, 1; on 2 cores 2 and 1); the
chooser runs on one rung and now and then probes a neighbouring rung, rarely while that keeps
losing clearly, at once when the times of the rung in use move (a neighbour came or went).

Policy constants below are ratios and run counts, not timings: nothing here depends on the
machine. Off by default ($TVMC_ADAPTIVE_THREADS=1 turns it on): in a process that runs other
runtimes between blocks of runs (benchmarks/models.py), their threads spinning for milliseconds
after each block looked like a lasting neighbour, and it took one thread where two were faster.
"""

from __future__ import annotations

from collections import deque

WINDOW = 5  # recent runs per thread count whose median stands for that count
PROBE_UP_RUNS = 2  # runs per probe of more threads (the first may find the workers asleep)
FIRST_INTERVAL = 4  # runs before the first probe, and after a switch or a change of the machine
CLOSE_INTERVAL = 32  # most runs between probes while the rungs probed are about as fast
MAX_INTERVAL = 256  # most runs between probes while they lose clearly
CLEAR_LOSS = 1.25  # a rung slower by this factor loses clearly
SWITCH_BELOW = 0.95  # switch when a probed rung's median is under this share of the current's
SWITCH_SAMPLES = 3  # ... over at least this many of its runs (keeping it needs only one)
DRIFT = 1.3  # the current rung's median moved by this factor since the last decision: probe now


def ladder(full: int) -> list[int]:
    """The thread counts tried: `full`, then halves down to 1 (distinct, descending)."""
    counts = [full]
    while counts[-1] > 1:
        counts.append(counts[-1] // 2)
    return counts


class ThreadChoice:
    """Which thread count the next run uses, learnt from the times of the runs before.

    `next_threads()` before a run, `observe(threads, seconds)` after it. With `full` 1 there is
    nothing to choose and every run uses one thread.
    """

    def __init__(self, full: int) -> None:
        self.full = full
        self.counts = ladder(full)
        self.current = full
        self.runs = dict.fromkeys(self.counts, 0)  # runs observed per thread count
        self._recent = {n: deque(maxlen=WINDOW) for n in self.counts}
        self._interval = FIRST_INTERVAL
        self._since_probe = 0
        self._probe: int | None = None  # the count being probed
        self._probe_left = 0
        self._next_fewer = True  # the next probe goes down the ladder (else up), where both exist
        self._baseline: float | None = None  # the current count's median at the last decision

    def next_threads(self) -> int:
        return self._probe if self._probe_left else self.current

    def observe(self, threads: int, seconds: float) -> None:
        if threads not in self._recent or len(self.counts) == 1:
            return
        self.runs[threads] += 1
        self._recent[threads].append(seconds)
        if threads != self.current:  # a probe run
            self._probe_left = max(self._probe_left - 1, 0)
            if not self._probe_left:
                self._decide(threads)
            return
        self._since_probe += 1
        if self._since_probe % WINDOW == 0 and self._moved():
            # the machine changed: what the other counts did before is stale
            for n in self.counts:
                if n != self.current:
                    self._recent[n].clear()
            self._interval = FIRST_INTERVAL
            self._since_probe = self._interval
        if self._since_probe >= self._interval:
            self._start_probe()
            self._since_probe = 0

    def _start_probe(self) -> None:
        at = self.counts.index(self.current)
        fewer = self.counts[at + 1] if at + 1 < len(self.counts) else None
        more = self.counts[at - 1] if at > 0 else None
        if fewer is not None and (more is None or self._next_fewer):
            self._probe, self._probe_left = fewer, 1
        else:
            self._probe, self._probe_left = more, PROBE_UP_RUNS
        self._next_fewer = not self._next_fewer

    def _moved(self) -> bool:
        """Whether the rung in use got faster or slower by DRIFT since the last decision."""
        if self._baseline is None:
            return False
        current = _median(self._recent[self.current])
        return current > self._baseline * DRIFT or current * DRIFT < self._baseline

    def _decide(self, probed: int) -> None:
        if not self._recent[self.current] or not self._recent[probed]:
            return  # runs not of our choosing (observe is public)
        current = _median(self._recent[self.current])
        other = _median(self._recent[probed])
        if other < current * SWITCH_BELOW and len(self._recent[probed]) < SWITCH_SAMPLES:
            self._probe_left = 1  # one fast run is not enough to switch on: look again
            return
        if other < current * SWITCH_BELOW:
            self.current = probed
            self._interval = FIRST_INTERVAL
        else:  # kept: probe half as often, up to a bound that depends on how far behind
            bound = MAX_INTERVAL if other > current * CLEAR_LOSS else CLOSE_INTERVAL
            self._interval = min(self._interval * 2, max(bound, self._interval // 2))
        self._baseline = _median(self._recent[self.current])


def _median(times: deque[float]) -> float:
    """The middle value (the upper one of an even count): cheap, and runs can take 20 us."""
    return sorted(times)[len(times) // 2]
