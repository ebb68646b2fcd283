"""Benchmark (not a test): the conv families of mobile and segmentation CNNs at real sizes.

    .venv/bin/python benchmarks/conv_families.py [--filter transpose] [--repeat 60]

Each case is a small ONNX model built here at the sizes of a 224x224 network: MobileNet v2's
depthwise 3x3 + ReLU6 and pointwise layers, EfficientNet's squeeze-excite block
(GlobalAveragePool, Conv 1x1, SiLU, Conv 1x1, Sigmoid, Mul), RegNet's grouped 3x3 convs (group
widths 8/16/24) and U-Net's ConvTranspose 2x2 and 4x4 stride 2. Per case: the median latency of
tvmc (default schedules), onnxruntime and OpenVINO, timed in alternating blocks in one process
(benchmarks/models.py's `blocked_median_ms`), and tvmc's ratio to the faster baseline.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable

import numpy as np
import onnx
from baselines import onnxruntime_session, openvino_session
from models import blocked_median_ms, compiled_executor
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tvmc.codegen import num_threads
from tvmc.driver.compiler import CompileOptions

Builder = Callable[[helper.GraphProto], None]


class Net:
    """A single-input graph built node by node with random weights."""

    def __init__(self, shape: tuple[int, ...], seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.shape, self.nodes, self.inits, self.last = shape, [], [], "x"

    def weight(self, shape: tuple[int, ...], scale: float) -> str:
        name = f"w{len(self.inits)}"
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        self.last = out
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride=1, group=1, pad=None) -> str:
        w = self.weight((cout, cin // group, k, k), 1 / math.sqrt(cin // group * k * k))
        pad = k // 2 if pad is None else pad
        b = self.weight((cout,), 0.1)
        return self.node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride] * 2,
                         pads=[pad] * 4, group=group)  # fmt: skip

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "case", [helper.make_tensor_value_info("x", TensorProto.FLOAT, self.shape)],
            [helper.make_empty_tensor_value_info(self.last)], self.inits,
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model


def relu6(net: Net, x: str) -> str:
    lo, hi = net.weight((), 0.0), f"w{len(net.inits)}"
    net.inits.append(numpy_helper.from_array(np.array(6.0, np.float32), hi))
    return net.node("Clip", [x, lo, hi])


def depthwise(c: int, size: int, stride: int) -> onnx.ModelProto:
    net = Net((1, c, size, size))
    relu6(net, net.conv("x", c, c, 3, stride, group=c))
    return net.model()


def pointwise(cin: int, cout: int, size: int) -> onnx.ModelProto:
    net = Net((1, cin, size, size))
    net.conv("x", cin, cout, 1)
    return net.model()


def squeeze_excite(c: int, squeezed: int, size: int) -> onnx.ModelProto:
    net = Net((1, c, size, size))
    pooled = net.node("GlobalAveragePool", ["x"])
    s = net.conv(pooled, c, squeezed, 1)
    s = net.node("Mul", [s, net.node("Sigmoid", [s])])
    scale = net.node("Sigmoid", [net.conv(s, squeezed, c, 1)])
    net.node("Mul", ["x", scale])
    return net.model()


def grouped(c: int, width: int, size: int, stride: int = 1) -> onnx.ModelProto:
    net = Net((1, c, size, size))
    net.node("Relu", [net.conv("x", c, c, 3, stride, group=c // width)])
    return net.model()


def transpose(cin: int, cout: int, size: int, k: int, pad: int) -> onnx.ModelProto:
    net = Net((1, cin, size, size))
    w = net.weight((cin, cout, k, k), 1 / math.sqrt(cin))
    b = net.weight((cout,), 0.1)
    net.node("ConvTranspose", ["x", w, b], kernel_shape=[k, k], strides=[2, 2], pads=[pad] * 4)
    return net.model()


CASES: dict[str, Callable[[], onnx.ModelProto]] = {
    "mbv2 dw 32 @112": lambda: depthwise(32, 112, 1),
    "mbv2 dw s2 96 @112": lambda: depthwise(96, 112, 2),
    "mbv2 dw 144 @56": lambda: depthwise(144, 56, 1),
    "mbv2 dw 192 @28": lambda: depthwise(192, 28, 1),
    "mbv2 dw 384 @14": lambda: depthwise(384, 14, 1),
    "mbv2 dw s2 576 @14": lambda: depthwise(576, 14, 2),
    "mbv2 dw 960 @7": lambda: depthwise(960, 7, 1),
    "mbv2 pw 32->16 @112": lambda: pointwise(32, 16, 112),
    "mbv2 pw 144->24 @56": lambda: pointwise(144, 24, 56),
    "mbv2 pw 960->160 @7": lambda: pointwise(960, 160, 7),
    "se 96/4 @56": lambda: squeeze_excite(96, 4, 56),
    "se 480/20 @14": lambda: squeeze_excite(480, 20, 14),
    "se 1152/48 @7": lambda: squeeze_excite(1152, 48, 7),
    "grouped gw8 48 @56": lambda: grouped(48, 8, 56),
    "grouped gw16 64 @56": lambda: grouped(64, 16, 56),
    "grouped gw16 160 @28": lambda: grouped(160, 16, 28),
    "grouped gw24 144 @28": lambda: grouped(144, 24, 28),
    "grouped gw16 384 @14": lambda: grouped(384, 16, 14),
    "transpose 2x2 512->256 @28": lambda: transpose(512, 256, 28, 2, 0),
    "transpose 2x2 128->64 @112": lambda: transpose(128, 64, 112, 2, 0),
    "transpose 4x4 256->128 @28": lambda: transpose(256, 128, 28, 4, 1),
    "transpose 4x4 64->32 @112": lambda: transpose(64, 32, 112, 4, 1),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", default="", help="only cases whose name contains this")
    parser.add_argument("--repeat", type=int, default=60)
    args = parser.parse_args()
    threads = num_threads()
    print(f"threads: {threads}; load average {os.getloadavg()[0]:.2f}; medians of "
          f"{args.repeat} runs; ratio: tvmc / the faster of onnxruntime and OpenVINO")  # fmt: skip
    print(f"{'case':28} {'tvmc ms':>8} {'ort ms':>8} {'ov ms':>8} {'ratio':>6} {'max err':>8}")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in CASES.items():
            if args.filter not in name:
                continue
            path = os.path.join(tmp, "case.onnx")
            onnx.save(make(), path)
            model = tvmc.load(path)
            shape = model.graph.types[model.graph.inputs[0]].shape
            x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
            executor, _ = compiled_executor(model.graph, CompileOptions(), [x])
            ours = executor.run()[0]
            baselines = [onnxruntime_session(path, {"x": x}, threads)]
            openvino = openvino_session(path, {"x": x}, threads)
            baselines += [openvino] if openvino is not None else []
            want = baselines[0]()[0]
            error = float(np.abs(ours.reshape(want.shape) - want).max() / np.abs(want).max())
            times = blocked_median_ms(executor.call, *baselines, repeat=args.repeat)
            ov = times[2] if len(times) > 2 else math.nan
            ratio = times[0] / min(times[1:])
            ratios.append(ratio)
            print(f"{name:28} {times[0]:8.3f} {times[1]:8.3f} {ov:8.3f} {ratio:6.2f} "
                  f"{error:8.1e}", flush=True)  # fmt: skip
            baselines = openvino = None
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"geometric-mean ratio: {geo:.2f}")


if __name__ == "__main__":
    main()
