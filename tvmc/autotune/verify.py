"""The final paired check of a task: its searched best config against the default schedule,
timed in alternation by the same measurer, so both sides of a round see the same machine.

On a shared or virtual machine a kernel can run in two speed modes that last longer than one
config's measurement (docs/performance.md), so a search can crown a config that was only
measured in the fast mode. The check times both configs in `rounds` rounds, ABBA order (the
config first in even rounds, the default first in odd ones) so a drift cancels, and keeps the
config only when the median of its per-round cost ratios is below `margin` and it won so many
rounds that chance is ruled out (a sign test: 7 of 8). The verdict becomes a record
(`records.Verdict`) that compile honours.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tvmc.autotune.measure import MeasureInput, Measurer, default_entity
from tvmc.autotune.records import Record, Verdict, paired_ratios, won_clearly
from tvmc.autotune.task import Task
from tvmc.ops.space import ConfigEntity

PAIRED_ROUNDS = 8  # rounds of the check: both configs timed once per round
MIN_PAIRED_ROUNDS = 5  # fewer rounds cannot keep a config (`records.wins_needed`)
MARGIN = 0.97  # keep the config when its median cost ratio to the default is below this


@dataclass(frozen=True)
class PairedCheck:
    """The costs of both sides, one per round where both ran, and whether the config won."""

    config: ConfigEntity
    costs: tuple[float, ...]
    default_costs: tuple[float, ...]
    kept: bool
    seconds: float  # spent on the check

    @property
    def ratio(self) -> float:
        """The median per-round cost ratio config / default (below 1: the config is faster)."""
        return paired_ratios(self.costs, self.default_costs)[0]

    @property
    def speedup(self) -> float:
        """The config's paired speedup over the default: 1 / ratio."""
        return 1 / self.ratio

    @property
    def wins(self) -> int:
        """Rounds the config was faster in."""
        return paired_ratios(self.costs, self.default_costs)[1]

    def record(self, task: Task) -> Record:
        """The verdict as a record of the config (its costs: one per round)."""
        verdict = Verdict(self.kept, self.default_costs)
        return Record(task.target, task.name, task.args, self.config.to_json(), list(self.costs),
                      0, self.seconds, time.time(), verdict=verdict)  # fmt: skip


def default_config(task: Task) -> ConfigEntity:
    """The default schedule as a config: the space's default, or no knobs at all."""
    index = task.space.default_index
    return task.space.get(index) if index is not None else default_entity()


def decide(costs: tuple[float, ...], default_costs: tuple[float, ...], margin: float) -> bool:
    """Keep the config: median cost ratio below `margin`, and faster in so many rounds that
    chance is ruled out (`records.won_clearly`: 7 of 8, 6 of 6; never with under 5 rounds)."""
    ratio, _ = paired_ratios(costs, default_costs)
    return ratio < margin and won_clearly(costs, default_costs)


def paired_check(
    task: Task,
    config: ConfigEntity,
    measurer: Measurer,
    rounds: int = PAIRED_ROUNDS,
    margin: float = MARGIN,
) -> PairedCheck | None:
    """Time `config` and the default alternately, `rounds` rounds in one batch (one process for
    a LocalMeasurer); None when no round ran both without error."""
    start = time.perf_counter()
    default = default_config(task)
    order = [(config, default) if r % 2 == 0 else (default, config) for r in range(rounds)]
    results = measurer.measure([MeasureInput(task, c) for pair in order for c in pair])
    costs, default_costs = [], []
    for r in range(rounds):
        first, second = results[2 * r], results[2 * r + 1]
        mine, theirs = (first, second) if r % 2 == 0 else (second, first)
        if mine.error_no or theirs.error_no or not mine.costs or not theirs.costs:
            continue
        cost, default_cost = (sum(x.costs) / len(x.costs) for x in (mine, theirs))
        if cost > 0 and default_cost > 0:
            costs.append(cost)
            default_costs.append(default_cost)
    if not costs:
        return None
    kept = decide(tuple(costs), tuple(default_costs), margin)
    return PairedCheck(config, tuple(costs), tuple(default_costs), kept,
                       time.perf_counter() - start)  # fmt: skip
