"""Driver: the objects users hold (`TVMCModel`, `TVMCPackage`, `TVMCResult`) and the steps.

In: every layer below. Out: `load`, `tune` (or `extract_tasks` -> `tune_tasks`), `compile_model`,
`run` and the objects they return; `TuneOptions`. Never prints (the CLI does).

Inside, imports go one way: the step modules (`model` loads, `package` compiles, `runner` runs,
`tuning` tunes; with `compiler`, `records`, `tune_options`, `tuning_report`) work on graphs and
files; `objects` wraps them in the objects and their methods; `remote` runs a package on a Dask
device worker; `api` takes objects or paths.
"""

from tvmc.driver.api import compile_model, extract_tasks, load, run, tune
from tvmc.driver.model import MODEL_FORMATS
from tvmc.driver.objects import TVMCModel, TVMCPackage, TVMCResult
from tvmc.driver.package import DEFAULT_PACKAGE, DUMP_FORMATS, TARGET_KINDS
from tvmc.driver.runner import DEVICES, FILL_MODES
from tvmc.driver.tune_options import TuneOptions
from tvmc.driver.tuning import tune_tasks
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
    "TuneOptions",
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
