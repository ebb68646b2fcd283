"""`TuneOptions`: every option of a tuning run (`tvmc tune`, `tvmc.tune`), checked once, here.

The CLI builds one from its flags and the Python API from keywords (`tune_options`); both get
the same checks and messages. Also TVMC's `--tasks` grammar: `parse_tasks` (the syntax, checked
with the options) and `select_tasks` (the task numbers, once the model's task count is known).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tvmc.autotune.measure import MeasureOptions
from tvmc.autotune.records import wins_needed  # noqa: F401  (the CLI's help)
from tvmc.autotune.tuners import TUNERS
from tvmc.autotune.verify import MARGIN as PAIRED_MARGIN  # noqa: F401  (the CLI's help)
from tvmc.autotune.verify import MIN_PAIRED_ROUNDS, PAIRED_ROUNDS
from tvmc.driver.compiler import checked_kind
from tvmc.errors import UsageError, did_you_mean, unknown_choice

DEFAULT_TRIALS = 1000  # in total over the tasks, as TVMC's --trials
TUNER_NAMES = tuple(TUNERS)  # xgb, the default, first
MEASURE_DEFAULTS = MeasureOptions()  # the measurement defaults (TVMC's)


@dataclass(frozen=True)
class TuneOptions:
    """Everything `tvmc tune` takes besides the model and the records path (TVMC's defaults)."""

    target: str = "llvm"
    target_llvm_mcpu: str | None = None  # --target-llvm-mcpu
    target_llvm_mattr: str | None = None  # --target-llvm-mattr
    trials: int = DEFAULT_TRIALS  # configs measured in total, shared by weight x FLOPs
    tuner: str | Callable[..., Any] = "xgb"  # a name in TUNERS, or a factory of Tuners
    early_stopping: int | None = None  # stop a task after this many trials without progress
    number: int = MEASURE_DEFAULTS.number  # runs per measurement
    repeat: int = MEASURE_DEFAULTS.repeat  # measurements per config
    min_repeat_ms: float = MEASURE_DEFAULTS.min_repeat_ms  # raise number until a run lasts this
    timeout: float = MEASURE_DEFAULTS.timeout  # seconds one config may run
    parallel: int | None = None  # builds at once (None: the physical cores)
    flush_cache: bool = MEASURE_DEFAULTS.flush_cache
    paired_rounds: int = PAIRED_ROUNDS  # the final check of each task's best (0: none)
    tasks: str | tuple[int, ...] | None = None  # TVMC's --tasks grammar or task numbers: all
    seed: int | None = None  # the tuners' random seed
    scheduler: str | None = None  # a Dask scheduler to measure on (with device_key)
    device_key: str | None = None  # the resource the cluster's device workers advertise
    priority: int = 0  # on a shared cluster, runs of a higher priority go first
    prior_records: str | None = None  # records only read: configs skipped, tuners seeded

    def __post_init__(self) -> None:
        if self.tasks is not None and not isinstance(self.tasks, str):
            object.__setattr__(self, "tasks", tuple(self.tasks))  # hashable, as frozen implies
        checked_kind(self.target)  # the rest of it is read with the model's tasks
        check_tuner(self.tuner)
        check_trials(self.trials)
        at_least = [("early_stopping", self.early_stopping, 1), ("number", self.number, 1),
                    ("repeat", self.repeat, 1), ("parallel", self.parallel, 1),
                    ("paired_rounds", self.paired_rounds, 0)]  # fmt: skip
        for name, value, low in at_least:
            if value is not None and (not isinstance(value, int) or value < low):
                raise UsageError(f"{name} must be an integer of at least {low}, got {value!r}")
        if isinstance(self.paired_rounds, int) and 0 < self.paired_rounds < MIN_PAIRED_ROUNDS:
            raise UsageError(f"paired_rounds must be 0 (no check) or at least {MIN_PAIRED_ROUNDS}"
                             f" (fewer rounds cannot tell a win from chance), got "
                             f"{self.paired_rounds}")  # fmt: skip
        for name, value, positive in (("min_repeat_ms", self.min_repeat_ms, False),
                                      ("timeout", self.timeout, True)):  # fmt: skip
            if (
                not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
                or (positive and value == 0)
            ):
                bound = "greater than 0" if positive else "at least 0"
                raise UsageError(f"{name} must be a finite number {bound}, got {value!r}")
        parse_tasks(self.tasks)
        check_cluster(self.scheduler, self.device_key)

    @property
    def lists_tasks(self) -> bool:
        """Whether `tasks` asks for the task list (`list`, `1,list`) rather than tuning."""
        return parse_tasks(self.tasks)[2]

    def measure_options(self) -> MeasureOptions:
        """How each config is measured."""
        return dataclasses.replace(
            MEASURE_DEFAULTS, number=self.number, repeat=self.repeat,
            min_repeat_ms=self.min_repeat_ms, timeout=self.timeout, n_parallel=self.parallel,
            flush_cache=self.flush_cache,
        )  # fmt: skip


FIELDS = tuple(f.name for f in dataclasses.fields(TuneOptions))


def tune_options(options: TuneOptions | None = None, **keywords: Any) -> TuneOptions:
    """`options` (default: TVMC's) with the keyword arguments of `tvmc.tune` applied on top;
    a keyword left None keeps the option's value, as `tvmc.tune(..., number=None)` always did."""
    unknown = [k for k in keywords if k not in FIELDS]
    if unknown:
        hint = did_you_mean(unknown[0], FIELDS)
        raise TypeError(f"unknown tuning option(s) {', '.join(map(repr, unknown))}; "
                        f"TuneOptions has: {', '.join(FIELDS)}.{hint}")  # fmt: skip
    given = {k: v for k, v in keywords.items() if v is not None}
    return dataclasses.replace(options or TuneOptions(), **given)


def check_tuner(tuner: str | Callable[..., Any]) -> None:
    """A UsageError for a tuner name TUNERS lacks (a callable is a factory of Tuners)."""
    if isinstance(tuner, str) and tuner not in TUNERS:
        raise UsageError(unknown_choice("tuner", tuner, TUNERS))
    if not isinstance(tuner, str) and not callable(tuner):
        raise UsageError(f"tuner must be one of {', '.join(TUNERS)} or a callable, got {tuner!r}")


def check_trials(trials: int) -> None:
    """A UsageError for a negative (or non-integer) total of trials."""
    if not isinstance(trials, int) or trials < 0:
        raise UsageError(f"--trials must be at least 0, got {trials}")


def check_cluster(scheduler: str | None, device_key: str | None) -> None:
    """A UsageError unless the cluster options come together (or not at all)."""
    if device_key is not None and scheduler is None:
        raise UsageError("--device-key needs --scheduler ADDRESS: the Dask scheduler to measure on")
    if scheduler is not None and not device_key:
        raise UsageError(
            "--scheduler needs --device-key KEY: the resource the device workers advertise "
            "(tvmc worker --device-key KEY)"
        )


# ---- --tasks -------------------------------------------------------------------------------------
Ranges = tuple[tuple[int | None, int | None], ...]  # inclusive; None: the first or last task


def parse_tasks(spec: str | Sequence[int] | None) -> tuple[Ranges, bool, bool]:
    """TVMC's `--tasks` (`0,2`, `3-5`, `-5`, `6-`, `all`, `list`; ranges inclusive) as
    (ranges, every task?, list them?); None selects every task."""
    if spec is None:
        return (), True, False
    items = [item.strip() for item in spec.split(",")] if isinstance(spec, str) else [
        str(i) for i in spec
    ]  # fmt: skip
    ranges: list[tuple[int | None, int | None]] = []
    everything = listing = False
    for item in items:
        if item in ("list", "help"):
            listing = True
        elif item == "all":
            everything = True
        elif item.count("-") == 1 and item != "-":
            lhs, rhs = item.split("-")
            first, end = _number(lhs, item) if lhs else None, _number(rhs, item) if rhs else None
            if first is not None and end is not None and first > end:
                raise UsageError(f"--tasks: empty range {item!r}")
            ranges.append((first, end))
        else:
            ranges.append((_number(item, item),) * 2)
    return tuple(ranges), everything or not ranges, listing


def _number(text: str, item: str) -> int:
    if not text.isdigit():
        raise UsageError(
            f"--tasks: {item!r} is not a task number, a range (3-5, -5, 6-), 'all' or 'list'."
            + did_you_mean(item, ("all", "list"))
        )
    return int(text)


def select_tasks(spec: str | Sequence[int] | None, count: int) -> tuple[list[int], bool]:
    """(selected task numbers, whether to list them) of `--tasks` for a model of `count` tasks."""
    ranges, everything, listing = parse_tasks(spec)
    last = f"0-{count - 1}" if count else "none"
    selected = set(range(count)) if everything else set()
    for first, end in ranges:
        for n in (first, end):
            if n is not None and n >= count:
                raise UsageError(
                    f"--tasks: task {n} out of range: the model has {count} "
                    f"task(s) ({last}); see --tasks list"
                )
        selected.update(range(first or 0, count if end is None else end + 1))
    return sorted(selected), listing
