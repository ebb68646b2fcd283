"""tvmc: a deep-learning compiler with a TVMC-style command line.

import tvmc
model = tvmc.load("model.onnx")                                        # TVMCModel
log = tvmc.tune(model, tuning_records="log.json", trials=200)          # the records path
# or: tvmc.tune(model, tuning_records="log.json", options=tvmc.TuneOptions(trials=200))
package = tvmc.compile(model, tuning_records=log, package_path="model.tar")   # TVMCPackage
result = tvmc.run(package, benchmark=True)                             # TVMCResult

Between tune's stages: tvmc.extract_tasks(model) -> filter -> tvmc.tune_tasks(tasks, "log.json").
The names are imported on first use (`tvmc.lazy`): `import tvmc` alone loads no compiler.
"""

from typing import TYPE_CHECKING

import tvmc.config  # noqa: F401  (sets OMP_WAIT_POLICY before anything loads libgomp)
from tvmc.lazy import lazy_exports
from tvmc.version import __version__

__all__ = [
    "TVMCModel",
    "TVMCPackage",
    "TVMCResult",
    "TuneOptions",
    "__version__",
    "compile",
    "extract_tasks",
    "load",
    "run",
    "tune",
    "tune_tasks",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {name: "tvmc.driver" for name in __all__ if name not in ("__version__", "compile")}
    | {"compile": "tvmc.driver:compile_model"},  # TVMC's name; shadows the builtin
)

if TYPE_CHECKING:
    from tvmc.driver import (
        TuneOptions,
        TVMCModel,
        TVMCPackage,
        TVMCResult,
        extract_tasks,
        load,
        run,
        tune,
        tune_tasks,
    )
    from tvmc.driver import compile_model as compile
