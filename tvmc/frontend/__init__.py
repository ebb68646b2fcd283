"""Frontend: model files in, a Graph with static shapes out.

In: tvmc.graph, tvmc.ops (shape rules; references to fold constants while converting).
Out: `load_onnx`, `parse_input_shapes`, `parse_input_dtypes`. Imported on first use
(`tvmc.lazy`): parsing `--input-shapes` does not load onnx.
"""

from typing import TYPE_CHECKING

from tvmc.lazy import lazy_exports

_EXPORTS = {
    "convert_model": "tvmc.frontend.onnx_loader",
    "load_onnx": "tvmc.frontend.onnx_loader",
    "parse_input_dtypes": "tvmc.frontend.shapes",
    "parse_input_shapes": "tvmc.frontend.shapes",
    "read_onnx": "tvmc.frontend.onnx_loader",
}
__all__ = [
    "convert_model",
    "load_onnx",
    "parse_input_dtypes",
    "parse_input_shapes",
    "read_onnx",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tvmc.frontend.onnx_loader import convert_model, load_onnx, read_onnx
    from tvmc.frontend.shapes import parse_input_dtypes, parse_input_shapes
