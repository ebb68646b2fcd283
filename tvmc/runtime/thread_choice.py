"""Choosing, run by run, how many of a program's threads an inference uses.

Why: on a machine shared with other work, a pool worker preempted in the middle of a chunk it
claimed holds the join of its loop until the scheduler runs it again, a slice of several
milliseconds; beside one busy core that happens in most inferences, and 2 threads take longer
than 1 (docs/performance.md, the noisy-neighbour benchmark). A rule inside the pool that judged
single loops was measured and dropped: a loop's time says too little. Whole inferences do, so
the executor times every run. The counts form a ladder, the count set and its halves down to one
(16, 8, 4, 2, 1; on 2 cores 2 and 1); the chooser runs on one rung and now and then holds a
trial against a neighbouring rung, rarely while that keeps losing clearly, soon when the times
of the rung in use stay moved from what the last trial saw of it (a neighbour came or went).
A change that started a trial in vain (the rung in use kept) must last twice as long to start
the next, up to MOST_DRIFT_WINDOWS: some machines slow down for a second now and then (the
project's shared VM), and a trial every such period cost 5-14% of a model's median; a
neighbour that stays is still followed, within a few dozen runs. On the full count, runs
getting faster start no trial: fewer threads cannot gain from that.

A trial compares fresh runs only, in alternating blocks (current, candidate, candidate,
current), so that neither old times from another state of the machine nor a machine getting
steadily faster or slower during the trial decides it; blocks of a few runs, since beside a
neighbour single runs of the same count vary by half. A block on more threads than the run
before it starts with an untimed run: the pool's workers fell asleep during the run on fewer
threads, and waking them is a cost that runs back to back on one count do not pay. The first
runs after that are still slower while the woken core settles; in this order exactly one block
on more threads follows runs on fewer, whichever way the trial goes, so that cost weighs on one
pair of blocks in a trial up as in a trial down (the candidate first and last put both blocks
of a trial up behind runs on one thread, and beside busy cores it stayed on one), and neither
the medians that must differ by 5% nor the pair of blocks that must be won count that block:
with it in the medians, fewer threads had to win by 10%, and beside one busy core
light_resnet50 stayed on two threads 10% slower than one; with it in the pairs (and a clear loss
judged at a trial up's first timed run), beside every core busy, where the woken worker waits
for a core, light_shufflenet stayed on one thread 10% slower than two. A disturbance of a few
runs (another runtime's threads spinning for milliseconds after its own work) does not move the
median watched in two windows in a row. A switch needs the candidate to win the other pair of
blocks, so a trial down ends as soon as it lost the first: at the run that puts half its block
at or over the median of the block before (a long block need not run to its end); a clear loss
ends a trial at the candidate's first run (the fastest of its first BLOCK_RUNS where runs after
a drop settle), a trial up at the end of its first BLOCK_RUNS timed runs (by the fastest) or,
where blocks are long, of its first block (by the median).
Where runs are short, blocks last SETTLE_SECONDS and the runs on fewer threads in the first
SETTLE_SECONDS after a drop are not timed: the kernel takes that long to re-place a busy
machine's threads, and runs before then judged the transient (beside every core busy,
light_inception_v1 on one thread ran fast for 3-4 runs after two, then slow).

Policy constants below are ratios, run counts and one time of the kernel's (SETTLE_SECONDS), no
speed: nothing here depends on the machine. $TVMC_ADAPTIVE_THREADS=0 turns it off (every run on
the count set).
"""

from __future__ import annotations

from collections import deque

WINDOW = 5  # recent runs of the rung in use whose median is watched for a change of the machine
DRIFT = 1.3  # that median moved by this factor from the last trial's last block of the rung ...
DRIFT_WINDOWS = 2  # ... in this many windows in a row: the machine changed, hold a trial now
MOST_DRIFT_WINDOWS = 8  # the most that DRIFT_WINDOWS doubles to after trials it started in vain
BLOCK_RUNS = 3  # timed runs per block of a trial (more where runs are short: SETTLE_SECONDS)
# After an inference's thread count drops, the kernel re-places the machine's busy threads over
# tens of milliseconds (beside every core busy, one thread after two ran 19 ms for 60-80 ms,
# then 30-39 until ~160 ms, then 19 or 35 in streaks of 5-8 runs): a trial's runs on fewer
# threads within this long of the drop are not timed, and its blocks last at least this long,
# so that neither the transient nor one streak decides. A time of the kernel's, not a speed of
# the machine; a trial of long blocks is as costly as more runs between trials, so the
# intervals grow by the candidate's runs in the last trial.
SETTLE_SECONDS = 0.25
FIRST_INTERVAL = 4  # runs before the first trial, and after a switch or a change of the machine
CLOSE_INTERVAL = 64  # most runs between trials while the rungs tried are about as fast
MAX_INTERVAL = 256  # most runs between trials while they lose clearly
CLEAR_LOSS = 1.25  # a rung slower by this factor loses clearly (its first run ends the trial)
# Switch when the candidate's median is under this share of the current's, and each of its
# blocks was faster than the current's block beside it. The medians leave out the block on more
# threads that follows runs on fewer: after those the idle core is woken and settles over
# several runs (seen on 20-us models), which would favour fewer threads.
SWITCH_BELOW = 0.95


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
        self._window: deque[float] = deque(maxlen=WINDOW)  # the rung in use, outside trials
        self._baseline: float | None = None  # the rung in use's first window after a trial
        self._moved_windows = 0
        self._drift_windows = DRIFT_WINDOWS  # moved windows in a row that start a trial now
        self._drift_trial = False  # the trial under way was started by a change of the machine
        self._interval = FIRST_INTERVAL
        self._block = BLOCK_RUNS  # timed runs per block of the trial under way
        self._judged_at = 1  # the candidate's run that judges a clear loss, going down
        self._fastest = float("inf")  # of the candidate's first runs in a trial down
        self._bar = float("inf")  # the median of the trial's block before the candidate's
        self._slow_runs = 0  # of the candidate's first block going down, at or over the bar
        self._candidate_runs = 0  # the trial's runs on the candidate, timed or not
        self._scale = 1.0  # the last trial's runs on the candidate over those of 3-run blocks
        self._since_trial = 0
        # the trial's runs to come, as [count, timed, runs]: blocks of 20-us runs are thousands
        # of runs long, and one entry per run, taken off a list's front, cost more than the run
        self._plan: deque[list] = deque()
        self._candidate = full
        self._timed: dict[int, list[float]] = {}  # the trial's timed runs per count
        self._next_fewer = True  # the next trial goes down the ladder (else up), where both exist

    def next_threads(self) -> int:
        return self._plan[0][0] if self._plan else self.current

    def observe(self, threads: int, seconds: float) -> None:
        if threads not in self.runs or len(self.counts) == 1:
            return
        self.runs[threads] += 1
        if self._plan:
            if threads == self._plan[0][0]:  # else a run not of our choosing (observe is public)
                self._trial_run(threads, seconds)
        elif threads == self.current:
            self._steady_run(seconds)

    def _steady_run(self, seconds: float) -> None:
        self._window.append(seconds)
        self._since_trial += 1
        if self._since_trial % WINDOW == 0 and len(self._window) == WINDOW:
            self._moved_windows = self._moved_windows + 1 if self._moved() else 0
            if self._moved_windows >= self._drift_windows:  # what the other rungs did is stale
                self._interval = FIRST_INTERVAL
                self._drift_trial = True
        if self._since_trial >= self._interval * self._scale:
            self._start_trial()

    def _moved(self) -> bool:
        median = _median(self._window)
        if self._baseline is None:
            self._baseline = median
            return False
        faster = median * DRIFT < self._baseline
        if faster and self.current == self.full:
            self._baseline = median  # faster on every thread: nothing to try, a new reference
            return False
        return faster or median > self._baseline * DRIFT

    def _start_trial(self) -> None:
        at = self.counts.index(self.current)
        fewer = self.counts[at + 1] if at + 1 < len(self.counts) else None
        more = self.counts[at - 1] if at > 0 else None
        candidate = fewer if fewer is not None and (more is None or self._next_fewer) else more
        assert candidate is not None  # a ladder has two rungs or more here
        self._next_fewer = not self._next_fewer
        self._candidate = candidate
        # a run of the rung in use as it runs now: the window, else the last trial's last block
        run = _median(self._window) if self._window else self._baseline or SETTLE_SECONDS
        settle = int(SETTLE_SECONDS / max(run, 1e-6))  # untimed runs after a drop
        self._judged_at = min(BLOCK_RUNS, settle + 1)
        self._block = max(BLOCK_RUNS, settle)
        self._plan, before = deque(), self.current
        for n in (self.current, candidate, candidate, self.current):
            untimed = 0 if n == before else 1 if n > before else settle
            if untimed:  # on more threads, the first run wakes the workers: never timed
                self._plan.append([n, False, untimed])
            self._plan.append([n, True, self._block])
            before = n
        self._timed = {candidate: [], self.current: []}
        self._candidate_runs = 0  # timed or not
        self._fastest = float("inf")  # of the candidate's first runs, going down
        self._slow_runs = 0
        self._since_trial = 0
        self._moved_windows = 0

    def _trial_run(self, threads: int, seconds: float) -> None:
        step = self._plan[0]
        timed = step[1]
        step[2] -= 1
        if not step[2]:
            self._plan.popleft()
        self._candidate_runs += threads == self._candidate
        if timed:
            self._timed[threads].append(seconds)
        candidate = self._timed[self._candidate]
        up = self._candidate > self.current
        # A clear loss against the runs just before ends the trial, judged by the candidate's
        # fastest run against the median of the block before. Going down, of its first run
        # (timed or not: a trial that loses clearly, as fewer threads do on a quiet machine,
        # costs one run), or of its first BLOCK_RUNS where runs after a drop settle (beside busy
        # cores single runs vary by half, and those right after a drop can land in the slow
        # half). Going up (the first runs slow while the woken core settles), of its first
        # BLOCK_RUNS timed runs.
        if threads == self._candidate:
            if self._candidate_runs == 1:  # the block before is whole now, and stays as it is
                self._bar = _median(self._timed[self.current])
            if up:
                judged = timed and len(candidate) == BLOCK_RUNS
                fastest = min(candidate[:BLOCK_RUNS], default=0.0) if judged else 0.0
                if timed and len(candidate) == self._block > BLOCK_RUNS:
                    # a long first block: the woken core's settling is a small part of it, so
                    # its median losing clearly ends the trial too (beside every core busy two
                    # threads vary by half and the fastest of three runs rarely loses clearly)
                    judged, fastest = True, _median(candidate)
            else:
                if self._candidate_runs <= self._judged_at:
                    self._fastest = min(self._fastest, seconds)
                judged, fastest = self._candidate_runs == self._judged_at, self._fastest
            if judged and fastest > self._bar * CLEAR_LOSS:
                self._plan.clear()  # not worth more
                self._end_trial(switch=False, clear_loss=True)
                return
            if not up and timed and len(candidate) <= self._block:
                # The first pair of blocks is lost (it cannot switch) once the candidate's
                # block holds as many runs at or over the bar as make its median so, whatever
                # its other runs: end the trial there, not at the block's end.
                self._slow_runs += seconds >= self._bar
                if self._slow_runs >= self._block - self._block // 2:
                    self._plan.clear()
        if not self._plan:
            current = self._timed[self.current]
            pairs = [
                (candidate[: self._block], current[: self._block]),
                (candidate[self._block :], current[self._block :]),
            ]  # blocks side by side (one pair where the first ended the trial)
            del pairs[0 if up else 1]  # the pair whose block on more threads followed fewer
            each = all(_median(c) < _median(k) for c, k in pairs if c and k)
            settled = self._settled_runs()
            ratio = _median(settled[self._candidate]) / _median(settled[self.current])
            self._end_trial(switch=ratio < SWITCH_BELOW and each, clear_loss=ratio > CLEAR_LOSS)

    def _settled_runs(self) -> dict[int, list[float]]:
        """The trial's timed runs per count, less the block on more threads that followed runs
        on fewer (the second of the current count's going down, the first of the candidate's
        going up), where the count's other block ran."""
        more = max(self.current, self._candidate)
        times = self._timed[more]
        settled = times[self._block :] if more == self._candidate else times[: self._block]
        return {**self._timed, more: settled or times}

    def _end_trial(self, switch: bool, clear_loss: bool) -> None:
        # A trial's cost is its runs on the candidate. Where it ran longer ones than with blocks
        # of BLOCK_RUNS and no settling (runs shorter than SETTLE_SECONDS), the runs between
        # trials grow in proportion, so that trials take the same share of the runs.
        timed = len(self._timed[self._candidate])
        short = max(1, round(timed * BLOCK_RUNS / self._block)) + (self._candidate > self.current)
        self._scale = max(1.0, self._candidate_runs / short)
        if switch:
            self.current = self._candidate
            self._interval = FIRST_INTERVAL
            self._drift_windows = DRIFT_WINDOWS
        else:  # kept: try half as often, up to a bound that depends on how far behind
            bound = MAX_INTERVAL if clear_loss else CLOSE_INTERVAL
            self._interval = min(self._interval * 2, max(bound, self._interval // 2))
            if self._drift_trial:  # the machine's change was not one that favours another rung
                self._drift_windows = min(self._drift_windows * 2, MOST_DRIFT_WINDOWS)
        self._drift_trial = False
        # the rung now in use as the trial last saw it: a machine that changes right after the
        # trial moves the next windows away from it (a baseline taken from the first window
        # after the trial would already be the changed machine, and hide the change)
        last_block = self._timed[self.current][-self._block :]
        self._baseline = _median(last_block) if last_block else None
        self._window.clear()
        self._since_trial = 0


def _median(times) -> float:
    """The middle value (the upper one of an even count): cheap, and runs can take 20 us."""
    ordered = sorted(times)
    return ordered[len(ordered) // 2]
