"""What tuning reports: the plan (every setting in force), live statistics per task, the final
summary, and the callbacks (`TuningProgress`) through which the CLI draws them as they change.

In: tvmc.autotune (tasks, records), tvmc.ops and tvmc.lower (FLOPs of a workload). Out: plain
data with `to_json()`. Never prints.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tvmc.autotune import ERROR_NAMES, Record, Task
from tvmc.autotune.task import task_threads
from tvmc.codegen import CPUTarget, physical_cores, target_kind
from tvmc.config import PEAK_GFLOPS_ENV
from tvmc.graph import TensorType
from tvmc.ops import OPS
from tvmc.runtime.peak import peak_gflops as measured_peak

if TYPE_CHECKING:
    from tvmc.autotune.measure import MeasureOptions
    from tvmc.autotune.verify import PairedCheck

logger = logging.getLogger("tvmc")


_OPS_BY_TASK_PREFIX = {name.lower(): name for name in OPS}


def task_op(task_name: str) -> str | None:
    """The op of a task name (`conv.llvm` -> `Conv`), or None when unknown."""
    return _OPS_BY_TASK_PREFIX.get(task_name.rsplit(".", 1)[0])


def args_summary(op: str | None, args: Sequence[Any]) -> str:
    """Tensor shapes, then the attributes worth a look: `1x3x32x32, 8x3x3x3; pads=1,1,1,1`
    (defaults, unit strides and dilations, zero pads and shapes the tensors show are left out),
    and `threads=N` where the kernels run on N threads whatever the machine's."""
    shapes, attrs = [], {}
    for arg in args:
        if isinstance(arg, list) and arg and arg[0] == "TENSOR":
            shapes.append("x".join(str(d) for d in arg[1]) or "scalar")
        elif isinstance(arg, list) and arg and arg[0] == "ATTRS":
            attrs = arg[1]
    threads = task_threads(args)
    defaults = OPS[op].attrs if op in OPS else {}
    shown = []
    for key, value in attrs.items():
        trivial = _TRIVIAL.get(key)
        if key == "kernel_shape" or (
            isinstance(value, list) and trivial is not None and all(v == trivial for v in value)
        ):
            continue
        if key in defaults and value == json.loads(json.dumps(_listed(defaults[key]), default=str)):
            continue
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        shown.append(f"{key}={text}")
    if threads:  # an image's kernel of a batch side by side: on one thread
        shown.append(f"threads={threads}")
    return ", ".join(shapes) + ("; " + " ".join(shown) if shown else "")


_TRIVIAL = {"strides": 1, "dilations": 1, "pads": 0, "output_padding": 0}


def workload_flops(task_name: str, args: Sequence[Any]) -> int | None:
    """The FLOPs of one run of a workload, from its args (None when they cannot be told)."""
    op = task_op(task_name)
    if op is None:
        return None
    try:
        types = [TensorType(tuple(a[1]), a[2]) for a in args if a[0] == "TENSOR"]
        attrs = next((a[1] for a in args if a[0] == "ATTRS"), {})
        return OPS[op].count_flops(attrs, types, OPS[op].infer(attrs, types)) or None
    except Exception:  # a foreign or older record: show its time only
        return None


def _listed(value: Any) -> Any:
    return [_listed(v) for v in value] if isinstance(value, tuple | list) else value


def gflops(flops: int | None, cost: float | None) -> float | None:
    """GFLOP/s of `flops` done in `cost` seconds (None when either is unknown)."""
    if not flops or not cost:
        return None
    try:
        return flops / cost / 1e9
    except OverflowError:  # FLOPs of absurd args in a records file: past a float
        return None


def gbps(nbytes: int | None, cost: float | None) -> float | None:
    """GB/s of `nbytes` moved in `cost` seconds (None when either is unknown)."""
    return nbytes / cost / 1e9 if nbytes and cost else None


def peak_gflops(target: str = "llvm", threads: int | None = None) -> tuple[float, str]:
    """The machine's fp32 peak in GFLOP/s, and where the figure comes from (0: unknown).

    CPUs: measured per CPU, times the cores used (`threads`, default the runtime's:
    tvmc.runtime.peak), or $TVMC_PEAK_GFLOPS. A foreign CPU target (another triple or -mcpu) is
    not this machine: unknown unless set.
    """
    if os.environ.get(PEAK_GFLOPS_ENV, "").strip():
        return measured_peak()
    if target_kind(target) == "cuda":
        return 0.0, f"unknown for GPUs: set ${PEAK_GFLOPS_ENV}"
    if not CPUTarget.parse(target).is_native:
        return 0.0, f"unknown for a foreign CPU target: set ${PEAK_GFLOPS_ENV}"
    return measured_peak(threads)


def task_rows(tasks: Sequence[Task], indices: Sequence[int]) -> list[dict[str, Any]]:
    """What `tvmc tune --tasks list` shows of each task."""
    return [
        {
            "index": i,
            "name": t.name,
            "label": t.label,
            "op": t.op,
            "args": t.args,
            "args_summary": args_summary(t.op, t.args),
            "weight": t.weight,
            "flops": t.flops,
            "bytes": t.bytes,
            "configs": len(t.space),
            "nodes": list(t.nodes),
        }
        for i, t in zip(indices, tasks)
    ]


@dataclass
class TaskStats:
    """One task's tuning as it goes: trials, costs (seconds), errors by code, times."""

    task: Task
    index: int  # the task's number in the model's task list
    position: int  # its place in this run (0-based)
    count: int  # tasks in this run
    resumed: int  # distinct configs measured before this run
    peak_gflops: float
    planned: int = 0  # trials this run measures at most
    done: int = 0
    best_cost: float | None = None  # the best mean cost, resumed records included
    last_cost: float | None = None  # the best of the latest results
    default_cost: float | None = None  # the untuned default schedule
    errors: Counter[int] = field(default_factory=Counter)
    started: float | None = None
    finished: float | None = None
    state: str = "waiting"  # running, done, stopped early, done before, skipped, interrupted
    # the paired check after the search: kept, default won, default best (nothing to check),
    # check failed; None: not checked (no search this run, interrupted, or checks off)
    verdict: str | None = None
    check: PairedCheck | None = None  # its rounds, when one ran

    @classmethod
    def begin(
        cls,
        task: Task,
        index: int,
        position: int,
        count: int,
        resumed: int,
        peak: float,
        records: Sequence[Record],
    ) -> TaskStats:
        """Statistics before this run: the best of the task's resumed records."""
        stats = cls(task, index, position, count, resumed, peak)
        costs = [r.mean_cost for r in records if r.error_no == 0]
        stats.best_cost = min(costs) if costs else None
        return stats

    def add(self, ok_costs: Sequence[Sequence[float]], error_nos: Sequence[int]) -> None:
        """Count a batch of results: costs of the error-free ones, every error code."""
        self.done += len(error_nos)
        self.errors.update(e for e in error_nos if e)
        means = [sum(c) / len(c) for c in ok_costs if c]
        if means:
            self.last_cost = min(means)
            self.best_cost = min(self.last_cost, self.best_cost or self.last_cost)

    def error_counts(self) -> dict[str, int]:
        """Failed measurements of this run by the name of their error."""
        return {ERROR_NAMES.get(k, str(k)): n for k, n in sorted(self.errors.items())}

    @property
    def best_gflops(self) -> float | None:
        return gflops(self.task.flops, self.best_cost)

    @property
    def current_gflops(self) -> float | None:
        return gflops(self.task.flops, self.last_cost)

    @property
    def default_gflops(self) -> float | None:
        return gflops(self.task.flops, self.default_cost)

    @property
    def best_gbps(self) -> float | None:
        """The best config's traffic of the task's tensors: the rate of tasks of no FLOPs."""
        return gbps(self.task.bytes, self.best_cost)

    def rate(self, cost: float | None) -> str:
        """`cost` as a rate: GFLOP/s, or GB/s of its tensors for tasks of no FLOPs (pools,
        reductions), or the time itself when neither is known."""
        if cost is None:
            return "-"
        if self.task.flops:
            return f"{self.task.flops / cost / 1e9:.1f} GFLOP/s"
        if self.task.bytes:
            return f"{self.task.bytes / cost / 1e9:.1f} GB/s"
        return f"{cost * 1e6:.1f} us"

    @property
    def speedup(self) -> float | None:
        """The best config against the default schedule."""
        return self.default_cost / self.best_cost if self.default_cost and self.best_cost else None

    @property
    def paired_speedup(self) -> float | None:
        """The searched best config over the default, timed in alternation (the check's)."""
        return self.check.speedup if self.check else None

    def verdict_text(self) -> str:
        """What compile applies, as the summary shows it: `kept 1.12x`, `default 0.98x`."""
        if self.check is not None:
            word = "kept" if self.check.kept else "default"
            return f"{word} {self.check.speedup:.2f}x"
        return {"default best": "default", "check failed": "failed"}.get(self.verdict or "", "-")

    @property
    def peak_share(self) -> float | None:
        best = self.best_gflops
        return best / self.peak_gflops if best and self.peak_gflops else None

    @property
    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.perf_counter()) - self.started

    @property
    def remaining(self) -> float | None:
        """Estimated seconds left (None before the first result)."""
        if not self.done or self.finished is not None:
            return None if not self.finished else 0.0
        return self.elapsed / self.done * max(self.planned - self.done, 0)

    def line(self) -> str:
        """One plain-text progress line."""
        left = self.remaining
        eta = f", ~{left:.0f} s left" if left else ""
        return (
            f"task {self.position + 1}/{self.count} #{self.index} {self.task.label}: "
            f"{self.done}/{self.planned} trials, current {self.rate(self.last_cost)}, "
            f"best {self.rate(self.best_cost)}, {self.elapsed:.1f} s{eta}"
            + (f" ({self.state})" if self.state not in ("running", "waiting") else "")
        )

    def to_json(self) -> dict[str, Any]:
        def rounded(value: float | None, digits: int = 3) -> float | None:
            return round(value, digits) if value is not None else None

        return {
            "index": self.index,
            "name": self.task.name,
            "label": self.task.label,
            "op": self.task.op,
            "args": self.task.args,
            "args_summary": args_summary(self.task.op, self.task.args),
            "weight": self.task.weight,
            "flops": self.task.flops,
            "bytes": self.task.bytes,
            "configs": len(self.task.space),
            "state": self.state,
            "trials": self.done,
            "planned": self.planned,
            "resumed": self.resumed,
            "best_seconds": self.best_cost,
            "default_seconds": self.default_cost,
            "best_gflops": rounded(self.best_gflops),
            "default_gflops": rounded(self.default_gflops),
            "best_gbps": rounded(self.best_gbps),
            "speedup": rounded(self.speedup),
            "verdict": self.verdict,
            "paired_check": None
            if self.check is None
            else {
                "kept": self.check.kept,
                "speedup": rounded(self.check.speedup),
                "wins": self.check.wins,
                "rounds": len(self.check.costs),
                "costs": list(self.check.costs),
                "default_costs": list(self.check.default_costs),
            },
            "peak_share": rounded(self.peak_share),
            "seconds": rounded(self.elapsed, 2),
            "errors": self.error_counts(),
        }


@dataclass
class TuningPlan:
    """Every setting of a tuning run, defaults included: what the CLI shows before it starts."""

    target: str
    tuner: str
    trials: int  # in total
    shares: list[int]  # per task, resumed configs included
    resumed: list[int]  # per task: distinct configs already in the records file
    early_stopping: int | None
    options: MeasureOptions
    records_path: str
    records_in_file: int  # records of this target kind found in the file
    tasks: list[Task]
    indices: list[int]
    peak_gflops: float
    peak_source: str
    cluster: Any = None  # the DaskMeasurer measuring on a cluster: the CLI shows its workers
    prior_path: str | None = None  # records only read (TVMC's --tuning-records beside -o)
    prior_records: int = 0  # of them, those of this target kind
    paired_rounds: int = 0  # rounds of each task's final check (0: none)

    def settings(self) -> list[tuple[str, str]]:
        """(setting, value) rows, in the order shown."""
        o = self.options
        per_task = ", ".join(f"#{i} {n}" for i, n in zip(self.indices, self.shares))
        builds = o.n_parallel or physical_cores()
        exists = os.path.getsize(self.records_path) if os.path.exists(self.records_path) else 0
        return [
            ("target", self.target),
            ("tuner", self.tuner),
            ("trials", f"{self.trials} in total, by weight x FLOPs, capped by each space"),
            ("trials per task", per_task or "-"),
            (
                "early stopping",
                f"after {self.early_stopping} trials without a better config"
                if self.early_stopping
                else "off",
            ),
            ("number", f"{o.number} run(s) per measurement"),
            (
                "repeat",
                f"{o.repeat} measurement(s) per config that agree within {o.stable_spread:.0%} "
                f"(at most {max(o.max_repeat, o.repeat)} taken)",
            ),
            ("min_repeat_ms", f"{o.min_repeat_ms:g} ms"),
            ("timeout", f"{o.timeout:g} s to run, {o.build_timeout:g} s to build"),
            ("parallel builds", f"{builds}" + ("" if o.n_parallel else " (physical cores)")),
            ("flush cache", "yes" if o.flush_cache else "no"),
            (
                "paired check",
                f"{self.paired_rounds} rounds of the best config against the default per task"
                if self.paired_rounds
                else "off: compile takes the lowest cost",
            ),
            ("check correctness", "yes" if o.check_correctness else "no"),
            ("tuning records", self.records_path + ("" if exists else " (new)")),
            (
                "resumed records",
                f"{self.records_in_file} in the file, {sum(self.resumed)} configs of these tasks",
            ),
            *(
                [("prior records", f"{self.prior_path}: {self.prior_records} read, not written")]
                if self.prior_path
                else []
            ),
            (
                "tasks",
                f"{len(self.tasks)}: "
                + ", ".join(f"#{i} {t.label}" for i, t in zip(self.indices, self.tasks)),
            ),
            (
                "peak",
                f"{self.peak_gflops:g} GFLOP/s ({self.peak_source})"
                if self.peak_gflops
                else self.peak_source,
            ),  # fmt: skip
        ]

    def to_json(self) -> dict[str, Any]:
        o = self.options
        return {
            "target": self.target,
            "tuner": self.tuner,
            "trials": self.trials,
            "trials_per_task": dict(zip(map(str, self.indices), self.shares)),
            "early_stopping": self.early_stopping,
            "number": o.number,
            "repeat": o.repeat,
            "max_repeat": o.max_repeat,
            "stable_spread": o.stable_spread,
            "min_repeat_ms": o.min_repeat_ms,
            "timeout": o.timeout,
            "build_timeout": o.build_timeout,
            "parallel": o.n_parallel or physical_cores(),
            "flush_cache": o.flush_cache,
            "check_correctness": o.check_correctness,
            "paired_rounds": self.paired_rounds,
            "tuning_records": self.records_path,
            "resumed_records": self.records_in_file,
            "prior_records": self.prior_path,
            "tasks": len(self.tasks),
            "peak_gflops": self.peak_gflops,
        }


@dataclass
class TuningSummary:
    """The end of a tuning run: the plan, each task's statistics, and how it ended."""

    plan: TuningPlan
    tasks: list[TaskStats]
    seconds: float
    interrupted: bool = False

    @property
    def records_path(self) -> str:
        return self.plan.records_path

    @property
    def new_records(self) -> int:
        return sum(s.done for s in self.tasks)

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": self.plan.to_json(),
            "tasks": [s.to_json() for s in self.tasks],
            "new_records": self.new_records,
            "seconds": round(self.seconds, 2),
            "interrupted": self.interrupted,
        }


class TuningInterrupted(KeyboardInterrupt):
    """Ctrl-C during tuning: every finished record is on disk; `summary` says what was done."""

    def __init__(self, summary: TuningSummary):
        super().__init__(f"tuning interrupted; records so far are in {summary.records_path}")
        self.summary = summary


class TuningProgress:
    """What `tune_tasks` reports as it goes (the CLI draws it); every method may be left as is."""

    def start(self, plan: TuningPlan) -> None:
        """Before the first measurement: every setting in force."""

    def task_start(self, stats: TaskStats) -> None:
        """A task begins (its default schedule is measured first)."""

    def update(self, stats: TaskStats) -> None:
        """New results of the current task are on disk."""

    def task_end(self, stats: TaskStats) -> None:
        """A task is done (all trials, early stop, or its space is exhausted)."""

    def finish(self, summary: TuningSummary) -> None:
        """After the last task, or after Ctrl-C (`summary.interrupted`)."""


class LogProgress(TuningProgress):
    """The default for the Python API: one log line per task (info level)."""

    def task_end(self, stats: TaskStats) -> None:
        logger.info("%s", stats.line())
