"""Driver: the objects users hold (`TVMCModel`, later `TVMCPackage`, `TVMCResult`) and the steps.

In: every layer below. Out: `load`, `TVMCModel`. Never prints (the CLI does).
"""

from tvmc.driver.model import MODEL_FORMATS, TVMCModel, load
from tvmc.frontend import parse_input_dtypes, parse_input_shapes

__all__ = ["MODEL_FORMATS", "TVMCModel", "load", "parse_input_dtypes", "parse_input_shapes"]
