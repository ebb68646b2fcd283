"""The tuners by the name `tvmc tune --tuner` takes, xgb (the default) first.

Each entry makes a `Tuner` for a task: `TUNERS[name](task, seed=0, **options)`. The xgb entry
imports `tvmc.autotune.xgb` (and with it xgboost, a second of start-up and absent on some GPU
machines) when it makes its first tuner, so importing tvmc never loads xgboost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tvmc.autotune.task import Task
from tvmc.autotune.tuner import GATuner, GridSearchTuner, RandomTuner, Tuner
from tvmc.errors import UsageError

TunerFactory = Callable[..., Tuner]


def xgb_tuner(task: Task, seed: int | None = None, **options: Any) -> Tuner:
    """An `XGBTuner`; without xgboost, a UsageError naming the tuners that work without it."""
    try:
        from tvmc.autotune.xgb import XGBTuner
    except ImportError as missing:  # no xgboost (e.g. a GPU box): the other tuners still work
        raise UsageError(
            f"the xgb tuner needs xgboost ({missing}): pip install xgboost-cpu, "
            "or choose --tuner ga, random or gridsearch"
        ) from None
    return XGBTuner(task, seed, **options)


TUNERS: dict[str, TunerFactory] = {
    "xgb": xgb_tuner,
    "ga": GATuner,
    "random": RandomTuner,
    "gridsearch": GridSearchTuner,
}
