"""Driver: the objects users hold (`TVMCModel`, `TVMCPackage`, `TVMCResult`) and the steps.

In: every layer below. Out: `load`, `compile_model`, `run` and the objects they return. Never
prints (the CLI does).
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
    "compile_model",
    "load",
    "parse_input_dtypes",
    "parse_input_shapes",
    "run",
]
