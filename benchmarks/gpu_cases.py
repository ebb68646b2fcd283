"""The op table of `make gpu-check`: one small single-node ONNX model per op family."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from tests.onnx_helpers import single_node_model  # builds models only: no pytest import

SMOKE_OPS = ("relu", "conv3x3", "softmax")  # what `make test` runs without a GPU


@dataclass(frozen=True)
class OpCase:
    """A named single-node model and its inputs."""

    name: str
    op: str
    shapes: dict[str, tuple[int, ...]]  # runtime inputs
    constants: dict[str, tuple[int, ...]] | None = None
    attrs: dict[str, Any] | None = None
    positive: bool = False  # inputs > 0 (Log, Sqrt, Pow)
    config: dict[str, Any] | None = None  # knob values other than the defaults (a tuned kernel)

    def build(self) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
        rng = np.random.default_rng(0)

        def value(shape: tuple[int, ...]) -> np.ndarray:
            x = rng.standard_normal(shape).astype(np.float32)
            return np.abs(x) + 0.5 if self.positive else x

        inputs = {k: value(s) for k, s in self.shapes.items()}
        constants = {k: value(s) * 0.2 for k, s in (self.constants or {}).items()}
        return single_node_model(self.op, inputs, self.attrs, constants), inputs


def _conv(name: str, c: int, k: int, size: int, kernel: int, group: int = 1, stride: int = 1,
          config: dict[str, Any] | None = None) -> OpCase:  # fmt: skip
    pad = kernel // 2
    attrs = {"kernel_shape": [kernel, kernel], "pads": [pad] * 4, "strides": [stride] * 2,
             "group": group}  # fmt: skip
    return OpCase(name, "Conv", {"x": (1, c, size, size)},
                  {"w": (k, c // group, kernel, kernel), "b": (k,)}, attrs,
                  config=config)  # fmt: skip


TILES = {"tile_m": [32, 4], "tile_n": [64, 4], "tile_k": 8, "split_k": 1}


X = {"x": (2, 16, 14, 14)}
OP_CASES: tuple[OpCase, ...] = (
    OpCase("relu", "Relu", X),
    OpCase("sigmoid", "Sigmoid", X),
    OpCase("tanh", "Tanh", X),
    OpCase("exp", "Exp", X),
    OpCase("log", "Log", X, positive=True),
    OpCase("sqrt", "Sqrt", X, positive=True),
    OpCase("erf", "Erf", X),
    OpCase("add-broadcast", "Add", X, {"b": (16, 1, 1)}),
    OpCase("mul", "Mul", {"x": (2, 16, 14, 14), "y": (2, 16, 14, 14)}),
    OpCase("leaky-relu", "LeakyRelu", X, attrs={"alpha": 0.1}),
    _conv("conv3x3", 16, 32, 14, 3),
    _conv("conv1x1-stride2", 64, 128, 28, 1, stride=2),
    _conv("conv7x7-stride2", 3, 64, 56, 7, stride=2),
    _conv("conv-depthwise", 32, 32, 28, 3, group=32),
    _conv("conv-grouped", 32, 64, 14, 3, group=4),
    # non-default kernels: float4 pixel runs, double buffering, the tiled direct form
    _conv("conv1x1-pixel-runs", 64, 64, 28, 1),
    _conv("conv3x3-double-buffer", 16, 32, 14, 3, config={**TILES, "double_buffer": True}),
    _conv("conv3x3-tiled", 16, 32, 14, 3, config={**TILES, "schedule": "tiled"}),
    _conv(
        "conv3x3-tiled-double-buffer",
        16,
        32,
        14,
        3,
        config={**TILES, "schedule": "tiled", "double_buffer": True},
    ),  # fmt: skip
    _conv(
        "conv3x3-7x7-tiled-split",
        256,
        64,
        7,
        3,
        config={**TILES, "schedule": "tiled", "split_k": 4},
    ),  # fmt: skip
    _conv(
        "conv-depthwise-tiled",
        32,
        32,
        28,
        3,
        group=32,
        config={"schedule": "tiled", "tile_n": [64, 2]},
    ),  # fmt: skip
    OpCase("gemm", "Gemm", {"a": (4, 256)}, {"w": (128, 256), "c": (128,)}, {"transB": 1}),
    OpCase("matmul", "MatMul", {"a": (16, 64)}, {"w": (64, 48)}),
    OpCase("batch-matmul", "MatMul", {"a": (3, 16, 32), "b": (3, 32, 24)}),
    OpCase(
        "matmul-double-buffer",
        "MatMul",
        {"a": (48, 64)},
        {"w": (64, 96)},
        config={"tile_m": [16, 2], "tile_n": [32, 4], "tile_k": 16, "double_buffer": True},
    ),
    OpCase("softmax", "Softmax", {"x": (8, 1000)}, attrs={"axis": -1}),
    OpCase(
        "layer-norm",
        "LayerNormalization",
        {"x": (4, 32, 64)},
        {"g": (64,), "b": (64,)},
        {"axis": -1},
    ),  # fmt: skip
    OpCase("reduce-mean", "ReduceMean", X, attrs={"axes": [2, 3], "keepdims": 1}),
    OpCase("reduce-max", "ReduceMax", X, attrs={"axes": [1], "keepdims": 0}),
    OpCase(
        "maxpool",
        "MaxPool",
        X,
        attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    ),  # fmt: skip
    OpCase("avgpool", "AveragePool", X, attrs={"kernel_shape": [2, 2], "strides": [2, 2]}),
    OpCase("global-avgpool", "GlobalAveragePool", X),
    OpCase(
        "batchnorm",
        "BatchNormalization",
        X,
        {"s": (16,), "b": (16,), "m": (16,), "v": (16,)},
        positive=True,
    ),  # fmt: skip
    OpCase("transpose", "Transpose", X, attrs={"perm": [0, 2, 3, 1]}),
    OpCase("concat", "Concat", {"x": (2, 8, 7, 7), "y": (2, 4, 7, 7)}, attrs={"axis": 1}),
    OpCase("lrn", "LRN", X, attrs={"size": 5}),
)


def max_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (1.0 for a shape mismatch or a NaN)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return 1.0
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-6)
    error = float(np.abs(got - want).max(initial=0.0)) / scale
    return error if np.isfinite(error) else 1.0
