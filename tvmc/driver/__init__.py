"""Driver: the objects users hold (`TVMCModel`, `TVMCPackage`, `TVMCResult`) and the steps.

In: every layer below. Out: `load`, `tune` (or `extract_tasks` -> `tune_tasks`), `compile_model`,
`run` and the objects they return. Never prints (the CLI does).
"""

from tvmc.driver.model import MODEL_FORMATS, TVMCModel, load
from tvmc.driver.package import (
    DEFAULT_PACKAGE,
    DUMP_FORMATS,
    TARGET_KINDS,
    TVMCPackage,
    compile_model,
)
from tvmc.driver.runner import DEVICES, FILL_MODES, TVMCResult, run
from tvmc.driver.tuning import extract_tasks, tune, tune_tasks
from tvmc.driver.tuning_report import TuningInterrupted, TuningProgress
from tvmc.frontend import parse_input_dtypes, parse_input_shapes

__all__ = [
    "DEFAULT_PACKAGE",
    "DEVICES",
    "DUMP_FORMATS",
    "FILL_MODES",
    "MODEL_FORMATS",
    "TARGET_KINDS",
    "TVMCModel",
    "TVMCPackage",
    "TVMCResult",
    "TuningInterrupted",
    "TuningProgress",
    "compile_model",
    "extract_tasks",
    "load",
    "parse_input_dtypes",
    "parse_input_shapes",
    "run",
    "tune",
    "tune_tasks",
]
