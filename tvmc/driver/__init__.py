"""Driver: the objects users hold (`TVMCModel`, `TVMCPackage`, `TVMCResult`) and the steps.

In: every layer below. Out: `load`, `tune` (or `extract_tasks` -> `tune_tasks`), `compile_model`,
`run` and the objects they return; `TuneOptions`. Never prints (the CLI does).

Inside, imports go one way: the step modules (`model` loads, `package` compiles, `runner` runs,
`tuning` tunes; with `compiler`, `records`, `tune_options`, `tuning_report`) work on graphs and
files; `objects` wraps them in the objects and their methods; `remote` runs a package on a Dask
device worker; `api` takes objects or paths. The names below are imported on first use
(`tvmc.lazy`), so running a package loads neither the ONNX frontend nor the tuner.
"""

from typing import TYPE_CHECKING

from tvmc.lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_PACKAGE": "tvmc.driver.package",
    "DEVICES": "tvmc.driver.runner",
    "CompileProgress": "tvmc.driver.pipeline",
    "DUMP_FORMATS": "tvmc.driver.package",
    "FILL_MODES": "tvmc.driver.runner",
    "MODEL_FORMATS": "tvmc.driver.model",
    "TARGET_KINDS": "tvmc.driver.compiler",
    "TVMCModel": "tvmc.driver.objects",
    "TVMCPackage": "tvmc.driver.objects",
    "TVMCResult": "tvmc.driver.objects",
    "TuneOptions": "tvmc.driver.tune_options",
    "TuningInterrupted": "tvmc.driver.tuning_report",
    "TuningProgress": "tvmc.driver.tuning_report",
    "compile_model": "tvmc.driver.api",
    "extract_tasks": "tvmc.driver.api",
    "load": "tvmc.driver.api",
    "parse_input_dtypes": "tvmc.frontend.shapes",
    "parse_input_shapes": "tvmc.frontend.shapes",
    "run": "tvmc.driver.api",
    "tune": "tvmc.driver.api",
    "tune_tasks": "tvmc.driver.tuning",
}
__all__ = [
    "DEFAULT_PACKAGE",
    "DEVICES",
    "DUMP_FORMATS",
    "FILL_MODES",
    "MODEL_FORMATS",
    "TARGET_KINDS",
    "CompileProgress",
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
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tvmc.driver.api import compile_model, extract_tasks, load, run, tune
    from tvmc.driver.compiler import TARGET_KINDS
    from tvmc.driver.model import MODEL_FORMATS
    from tvmc.driver.objects import TVMCModel, TVMCPackage, TVMCResult
    from tvmc.driver.package import DEFAULT_PACKAGE, DUMP_FORMATS
    from tvmc.driver.runner import DEVICES, FILL_MODES
    from tvmc.driver.tune_options import TuneOptions
    from tvmc.driver.tuning import tune_tasks
    from tvmc.driver.tuning_report import TuningInterrupted, TuningProgress
    from tvmc.frontend.shapes import parse_input_dtypes, parse_input_shapes
