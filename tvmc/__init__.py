"""tvmc: a deep-learning compiler with a TVMC-style command line.

import tvmc
model = tvmc.load("model.onnx")                           # TVMCModel
package = tvmc.compile(model, package_path="model.tar")   # TVMCPackage
result = tvmc.run(package, benchmark=True)                # TVMCResult
"""

__version__ = "0.1.0"

import tvmc.config  # noqa: E402,F401  (sets OMP_WAIT_POLICY before anything loads libgomp)
from tvmc.driver import TVMCModel, TVMCPackage, TVMCResult, load, run  # noqa: E402
from tvmc.driver import compile_model as compile  # noqa: E402  (TVMC's name; shadows the builtin)

__all__ = ["TVMCModel", "TVMCPackage", "TVMCResult", "__version__", "compile", "load", "run"]
