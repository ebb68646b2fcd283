"""Tuners: which configs of a task to measure next, given what was measured so far.

A tuner proposes batches of configs (`next_batch`), never one it proposed before or found in the
records it resumed from, and learns from their measurements (`update`). `tune` runs that loop
against a measurer, with early stopping and per-batch callbacks. Configs are handled as choice
tuples (one candidate index per knob); a random config is a random choice per knob, so spaces of
millions are sampled without listing them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence

import numpy as np

from tvmc.autotune.measure import MeasureInput, Measurer, MeasureResult
from tvmc.autotune.records import Record
from tvmc.autotune.task import Task
from tvmc.codegen.target import target_kind
from tvmc.ops.space import ConfigEntity

Callback = Callable[["Tuner", list[MeasureInput], list[MeasureResult]], None]
FAILED = math.inf  # the cost a tuner keeps for a failed measurement


class Tuner:
    """Bookkeeping shared by every tuner: visited configs, the best one, the tuning loop.

    Subclasses implement `_propose(n)` (up to n new configs) and may override `_observe`
    (learn from measured costs) and `_transfer` (learn from other workloads' records).
    """

    batch_size = 32  # configs measured between two updates in `tune`

    def __init__(self, task: Task, seed: int | None = None) -> None:
        self.task = task
        self.space = task.space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.radices = [len(k.candidates) for k in self.space.knobs]
        self.visited: set[int] = set()  # proposed, measured or loaded: never proposed again
        self.history: list[tuple[ConfigEntity, float]] = []  # (config, mean cost or FAILED)
        self.best_cost = FAILED
        self.best_config: ConfigEntity | None = None
        self.trials_done = 0  # measured through `update` (loaded records not counted)
        self.best_trial = 0  # trials_done when the best cost last improved
        self.loaded = 0  # records of this task taken from the history

    # ---- the interface ---------------------------------------------------------------------------
    def has_next(self) -> bool:
        """Whether some config of the space was never proposed."""
        return len(self.visited) < len(self.space)

    def next_batch(self, n: int) -> list[ConfigEntity]:
        """Up to `n` configs to measure next, none proposed or loaded before; the template's
        default config first, so the best found is never slower than the untuned schedule."""
        batch: list[ConfigEntity] = []
        default = self.space.default_index
        if n > 0 and default is not None and default not in self.visited:
            self.visited.add(default)
            batch.append(self.space.get(default))
        for config in self._propose(n - len(batch)) if len(batch) < n else []:
            if len(batch) < n and config.index not in self.visited:
                self.visited.add(config.index)
                batch.append(config)
        if len(batch) < n:  # a subclass ran short: top up at random
            for config in self._random_unvisited(n - len(batch)):
                self.visited.add(config.index)
                batch.append(config)
        return batch

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Take in the measurements of configs this tuner proposed."""
        configs, costs = [], []
        for inp, res in zip(inputs, results):
            self.trials_done += 1
            self.visited.add(inp.config.index)
            cost = measured_cost(res.error_no, res.costs)
            if cost < self.best_cost:
                self.best_trial = self.trials_done
            self._record(inp.config, cost)
            configs.append(inp.config)
            costs.append(cost)
        self._observe(configs, costs)

    def load_history(
        self, records: Iterable[Record], other_task_records: Iterable[Record] = ()
    ) -> None:
        """Resume: this task's records count as visited and seed the model; others transfer."""
        workload = self.task.workload
        kind = target_kind(self.task.target)
        code_hash = self.space.code_hash()
        configs, costs, others = [], [], list(other_task_records)
        for record in records:
            same = record.workload == workload and target_kind(record.target) == kind
            if not same or record.config.get("code_hash") not in (None, code_hash):
                others.append(record)
                continue
            try:
                config = self.space.from_entity(record.config["entity"])
            except (ValueError, TypeError):
                others.append(record)
                continue
            cost = measured_cost(record.error_no, record.costs)
            self.visited.add(config.index)
            self._record(config, cost)
            configs.append(config)
            costs.append(cost)
        self.loaded += len(configs)
        self._observe(configs, costs)
        # this workload's records of another template version or target kind: neither visited
        # nor transferred (their costs belong to other code)
        others = [r for r in others if r.workload != workload]
        if others:
            self._transfer(others)

    def tune(
        self,
        n_trial: int,
        measurer: Measurer,
        early_stopping: int | None = None,
        callbacks: Sequence[Callback] = (),
    ) -> None:
        """Measure up to `n_trial` new configs, batch by batch; stop after `early_stopping` trials
        without a better cost, or when the space is exhausted."""
        start = self.trials_done
        while self.trials_done - start < n_trial and self.has_next():
            n = min(self.batch_size, n_trial - (self.trials_done - start))
            if early_stopping is not None:
                since_best = self.trials_done - max(self.best_trial, start)
                if since_best >= early_stopping:
                    break
                n = min(n, early_stopping - since_best)
            configs = self.next_batch(n)
            if not configs:
                break
            inputs = [MeasureInput(self.task, c) for c in configs]
            results = measurer.measure(inputs)
            self.update(inputs, results)
            for callback in callbacks:
                callback(self, inputs, results)

    # ---- for subclasses --------------------------------------------------------------------------
    def _propose(self, n: int) -> list[ConfigEntity]:
        """Up to `n` configs, preferably unvisited (visited ones are dropped by next_batch)."""
        raise NotImplementedError

    def _observe(self, configs: list[ConfigEntity], costs: list[float]) -> None:
        """Learn from measured (or loaded) costs; FAILED marks a failed measurement."""

    def _transfer(self, records: list[Record]) -> None:
        """Learn from records of other workloads (only the model-based tuner does)."""

    def _record(self, config: ConfigEntity, cost: float) -> None:
        self.history.append((config, cost))
        if cost < self.best_cost:
            self.best_cost, self.best_config = cost, config

    def config_of(self, choices: Sequence[int]) -> ConfigEntity:
        """The config with these candidate indices (one per knob)."""
        index, radix = 0, 1
        for c, r in zip(choices, self.radices):
            index += int(c) * radix
            radix *= r
        return ConfigEntity(self.space, index, tuple(int(c) for c in choices))

    def random_choices(self, n: int) -> np.ndarray:
        """`n` uniformly random configs as an int array [n, knobs] (may repeat or be visited)."""
        if not self.radices:
            return np.zeros((n, 0), np.int64)
        return np.stack([self.rng.integers(r, size=n) for r in self.radices], axis=1)

    def _random_unvisited(self, n: int, exclude: Collection[int] = ()) -> list[ConfigEntity]:
        """Up to `n` distinct configs drawn uniformly among the unvisited (and not excluded)."""
        size = len(self.space)
        taken = len(self.visited) + len(exclude)
        seen = set(exclude)
        if size - taken <= 2 * n or taken >= size // 2:
            # dense: the space is at most twice what was taken, so listing the rest is cheap
            rest = [i for i in range(size) if i not in self.visited and i not in seen]
            return [self.space.get(rest[i]) for i in self.rng.permutation(len(rest))[:n]]
        out: list[ConfigEntity] = []
        for _ in range(64):  # sparse: each draw is new with probability > 1/2
            for choices in self.random_choices(2 * (n - len(out))):
                config = self.config_of(choices)
                if config.index not in self.visited and config.index not in seen:
                    seen.add(config.index)
                    out.append(config)
                    if len(out) == n:
                        return out
        return out


def measured_cost(error_no: int, costs: Sequence[float]) -> float:
    """The mean cost of a measurement, FAILED when it failed."""
    return sum(costs) / len(costs) if error_no == 0 and costs else FAILED


class RandomTuner(Tuner):
    """Uniformly random configs, without replacement."""

    def _propose(self, n: int) -> list[ConfigEntity]:
        return self._random_unvisited(n)


class GridSearchTuner(Tuner):
    """Configs in index order (first knob varying fastest)."""

    def __init__(self, task: Task, seed: int | None = None) -> None:
        super().__init__(task, seed)
        self._next = 0

    def _propose(self, n: int) -> list[ConfigEntity]:
        out: list[ConfigEntity] = []
        while len(out) < n and self._next < len(self.space):
            if self._next not in self.visited:
                out.append(self.space.get(self._next))
            self._next += 1
        return out


class GATuner(Tuner):
    """A genetic algorithm over knob choices: fitness-proportional selection of parents among
    the last generation and the elites, uniform crossover, per-knob mutation."""

    def __init__(
        self,
        task: Task,
        seed: int | None = None,
        pop_size: int = 100,
        elite_num: int = 3,
        mutation_prob: float = 0.1,
    ) -> None:
        super().__init__(task, seed)
        self.pop_size = pop_size
        self.elite_num = elite_num
        self.mutation_prob = mutation_prob
        self._queue: list[ConfigEntity] = []

    def _propose(self, n: int) -> list[ConfigEntity]:
        self._queue = [c for c in self._queue if c.index not in self.visited]
        if len(self._queue) < n:
            self._queue += self._generation(exclude={c.index for c in self._queue})
        out, self._queue = self._queue[:n], self._queue[n:]
        return out

    def _generation(self, exclude: set[int]) -> list[ConfigEntity]:
        """`pop_size` new configs bred from the last generation and the elites."""
        scored = [(c, cost) for c, cost in self.history[-self.pop_size :] if cost < FAILED]
        elites = sorted((h for h in self.history if h[1] < FAILED), key=lambda h: h[1])
        parents = {c.index: (c, cost) for c, cost in scored + elites[: self.elite_num]}
        if len(parents) < 2:
            return self._random_unvisited(self.pop_size, exclude)
        genes = np.array([c.choices for c, _ in parents.values()], np.int64)
        fitness = np.array([self.best_cost / cost for _, cost in parents.values()])
        prob = fitness**2 / np.sum(fitness**2)  # squared: favour the fast ones more than linearly
        children: list[ConfigEntity] = []
        seen = set(exclude)
        for _ in range(8 * self.pop_size):
            if len(children) == self.pop_size:
                break
            a, b = genes[self.rng.choice(len(genes), size=2, p=prob)]
            child = np.where(self.rng.random(len(a)) < 0.5, a, b)
            mutate = self.rng.random(len(child)) < self.mutation_prob
            child = np.where(mutate, self.random_choices(1)[0], child)
            config = self.config_of(child)
            if config.index not in self.visited and config.index not in seen:
                seen.add(config.index)
                children.append(config)
        short = self.pop_size - len(children)  # inbred population: fresh blood
        return children + (self._random_unvisited(short, seen) if short else [])
