"""tvmc: a deep-learning compiler with a TVMC-style command line.

import tvmc
model = tvmc.load("model.onnx")        # TVMCModel
"""

__version__ = "0.1.0"

from tvmc.driver import TVMCModel, load  # noqa: E402

__all__ = ["TVMCModel", "__version__", "load"]
