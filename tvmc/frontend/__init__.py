"""Frontend: model files in, a Graph with static shapes out.

In: tvmc.graph, tvmc.ops (shape rules; references to fold constants while converting).
Out: `load_onnx`, `parse_input_shapes`, `parse_input_dtypes`.
"""

from __future__ import annotations

from collections.abc import Mapping

from tvmc.frontend.onnx_loader import convert_model, read_onnx
from tvmc.frontend.shapes import parse_input_dtypes, parse_input_shapes
from tvmc.graph import Graph


def load_onnx(
    path: str,
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    dtype_dict: Mapping[str, str] | None = None,
) -> Graph:
    """Read and convert an ONNX file (external data included)."""
    return convert_model(read_onnx(path), shape_dict, dtype_dict)


__all__ = ["convert_model", "load_onnx", "parse_input_dtypes", "parse_input_shapes", "read_onnx"]
