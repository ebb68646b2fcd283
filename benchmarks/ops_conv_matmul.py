"""Benchmark (not a test): tvmc's Conv/MatMul/Gemm templates against onnxruntime, one op each.

    .venv/bin/python benchmarks/ops_conv_matmul.py [--filter resnet] [--repeat 50] [--threads 2]
        [--stat median|min] [--config '{"schedule": "pixels"}']

Each case lowers one node through its template (weights constant, packed at compile time),
compiles it natively and times the kernels (median, or min, of --repeat calls after warm-up,
with the given thread count), then times onnxruntime running the same single-node model with
intra_op_num_threads equal (one block of runs each, not alternating: onnxruntime's threads
spin after a run and would take a core from tvmc's workers).
Prints GFLOP/s of both and tvmc's speed as a ratio of onnxruntime's.

libgomp's workers sleep between parallel regions (tvmc sets OMP_WAIT_POLICY=PASSIVE); waking
a sleeping worker costs about a millisecond in a VM whose idle vCPU halts, which hides the
second thread on every kernel under ~5 ms. onnxruntime's workers spin between runs, so unless
GOMP_SPINCOUNT is already set this benchmark gives libgomp's workers the same bounded spin
(GOMP_SPINCOUNT=1000000, about a millisecond) before they sleep; --passive keeps pure sleeping.
"""

from __future__ import annotations

import os
import sys

if "--passive" not in sys.argv:  # before libgomp loads (see the docstring)
    os.environ.setdefault("GOMP_SPINCOUNT", "1000000")

import argparse
import ctypes
import functools
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from tvmc.codegen import emit_cpu, load_shared, set_num_threads
from tvmc.graph import Node, TensorType
from tvmc.kernel import Buffer
from tvmc.ops import OPS, infer_node
from tvmc.ops.lowering import LowerContext, LoweringTarget, buffer_shape, ref_of_buffer


@dataclass
class Case:
    """One op on fixed shapes: runtime input `x`, constant weights, normalized attrs."""

    name: str
    op: str
    x: tuple[int, ...]
    weights: list[tuple[int, ...]]
    attrs: dict[str, Any] = field(default_factory=dict)


def conv(name: str, x, w, stride=1, pad=0, group=1, dilation=1, bias=False) -> Case:
    """A 2-D Conv case with square stride/pad/dilation."""
    k = w[2:]
    attrs = {"kernel_shape": list(k), "strides": [stride] * 2, "pads": [pad] * 4,
             "dilations": [dilation] * 2, "group": group}  # fmt: skip
    return Case(name, "Conv", x, [w, (w[0],)] if bias else [w], attrs)


CASES = [
    conv("resnet stem 7x7 s2", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
    conv("resnet 3x3 64 @56", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    conv("resnet 3x3 128 @28", (1, 128, 28, 28), (128, 128, 3, 3), 1, 1),
    conv("resnet 3x3 256 @14", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    conv("resnet 3x3 512 @7", (1, 512, 7, 7), (512, 512, 3, 3), 1, 1),
    conv("resnet 3x3 s2 128 @56", (1, 128, 56, 56), (128, 128, 3, 3), 2, 1),
    conv("resnet 1x1 64->256 @56", (1, 64, 56, 56), (256, 64, 1, 1)),
    conv("resnet 1x1 256->64 @56", (1, 256, 56, 56), (64, 256, 1, 1)),
    conv("resnet 1x1 512->128 @28", (1, 512, 28, 28), (128, 512, 1, 1)),
    conv("resnet 1x1 1024->256 @14", (1, 1024, 14, 14), (256, 1024, 1, 1)),
    conv("resnet 1x1 2048->512 @7", (1, 2048, 7, 7), (512, 2048, 1, 1)),
    conv("resnet 1x1 s2 256->512 @56", (1, 256, 56, 56), (512, 256, 1, 1), 2),
    conv("resnet 1x1 s2 1024->2048 @14", (1, 1024, 14, 14), (2048, 1024, 1, 1), 2),
    conv("vgg 3x3 64 @224", (1, 64, 224, 224), (64, 64, 3, 3), 1, 1),
    conv("vgg 3x3 256 @56", (1, 256, 56, 56), (256, 256, 3, 3), 1, 1),
    conv("vgg 3x3 512 @28", (1, 512, 28, 28), (512, 512, 3, 3), 1, 1),
    conv("depthwise 3x3 32 @112", (1, 32, 112, 112), (32, 1, 3, 3), 1, 1, group=32),
    conv("depthwise 3x3 s2 64 @112", (1, 64, 112, 112), (64, 1, 3, 3), 2, 1, group=64),
    conv("depthwise 3x3 512 @14", (1, 512, 14, 14), (512, 1, 3, 3), 1, 1, group=512),
    Case("dense 2048->1000", "Gemm", (1, 2048), [(1000, 2048), (1000,)],
         {"transA": False, "transB": True, "alpha": 1.0, "beta": 1.0}),
    Case("dense 4096->4096", "Gemm", (1, 4096), [(4096, 4096), (4096,)],
         {"transA": False, "transB": True, "alpha": 1.0, "beta": 1.0}),
    Case("matmul 128x768x768", "MatMul", (128, 768), [(768, 768)]),
    Case("matmul 512x512x512", "MatMul", (512, 512), [(512, 512)]),
    Case("matmul 384x768x3072", "MatMul", (384, 768), [(768, 3072)]),
    Case("matmul 256x4096x1024", "MatMul", (256, 4096), [(4096, 1024)]),
]  # fmt: skip


def _flops(case: Case, out_shape: tuple[int, ...]) -> float:
    if case.op == "Conv":
        w = case.weights[0]
        return 2.0 * math.prod(out_shape) * math.prod(w[1:])
    k = case.x[-1]
    return 2.0 * math.prod(out_shape) * k


def _onnx_model(case: Case, weights: list[np.ndarray]) -> onnx.ModelProto:
    names = [f"w{i}" for i in range(len(weights))]
    attrs = {k: v for k, v in case.attrs.items() if not (k == "group" and v == 1)}
    node = helper.make_node(case.op, ["x", *names], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "bench", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, case.x)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(w, n) for w, n in zip(weights, names)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _tvmc_runner(
    case: Case, x: np.ndarray, weights: list[np.ndarray], config: dict
) -> tuple[Callable[[], None], np.ndarray, float]:
    """(run, output array, compile seconds) for the case's template."""
    types = [TensorType.of(x), *(TensorType.of(w) for w in weights)]
    node = Node(case.op, ["x", *(f"w{i}" for i in range(len(weights)))], ["y"], case.attrs)
    out_type = infer_node(node, types)[0]
    ctx = LowerContext(LoweringTarget(num_threads=2), config)
    arrays = [x, *weights]
    bufs = [Buffer(f"in{i}", buffer_shape(t.shape), t.dtype) for i, t in enumerate(types)]
    refs = [
        ref_of_buffer(f"in{i}", t, b, None if i == 0 else arrays[i])
        for i, (t, b) in enumerate(zip(types, bufs))
    ]
    out = Buffer("out", buffer_shape(out_type.shape), out_type.dtype)
    t0 = time.perf_counter()
    kernels = OPS[case.op].build(ctx, node.attrs, refs, [out], None)
    module = load_shared(emit_cpu(kernels))
    seconds = time.perf_counter() - t0
    data = {b: a.reshape(b.shape) for b, a in zip(bufs, arrays)}
    data[out] = np.zeros(out.shape, out.dtype)
    data.update(ctx.params)
    data.update({b: np.zeros(b.shape, b.dtype) for b in ctx.temps})
    calls = [
        (module[k.name], [ctypes.c_void_p(data[b].ctypes.data) for b in k.params]) for k in kernels
    ]

    def run() -> None:
        for fn, ptrs in calls:
            fn(*ptrs)

    run._keep = (module, data)  # type: ignore[attr-defined]
    return run, data[out].reshape(out_type.shape), seconds


def _time(fn: Callable[[], None], repeat: int, stat: str) -> float:
    """Seconds per call of `fn` (median or min of `repeat` calls after warm-up)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) if stat == "median" else min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", default="", help="only cases whose name contains this")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", default="{}", help="template knobs as JSON")
    parser.add_argument("--stat", choices=["median", "min"], default="median")
    parser.add_argument("--passive", action="store_true", help="no libgomp spinning (see top)")
    args = parser.parse_args()
    set_num_threads(args.threads)
    config = json.loads(args.config)
    rng = np.random.default_rng(0)
    print(f"{'case':32} {'tvmc GF/s':>10} {'ort GF/s':>9} {'ratio':>6} {'err':>8} {'build s':>7}")
    for case in CASES:
        if args.filter not in case.name:
            continue
        x = rng.standard_normal(case.x, dtype=np.float32)
        weights = [rng.standard_normal(s, dtype=np.float32) * 0.1 for s in case.weights]
        run, out, build = _tvmc_runner(case, x, weights, config)
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        session = ort.InferenceSession(
            _onnx_model(case, weights).SerializeToString(), options,
            providers=["CPUExecutionProvider"],
        )  # fmt: skip
        feed = {"x": x}
        want = session.run(None, feed)[0]
        run()
        err = float(np.abs(out - want).max() / max(np.abs(want).max(), 1e-30))
        # one block each, tvmc first: onnxruntime's pool threads spin for a while after a run
        # and would take the second core from tvmc's workers if the two alternated
        t_tvmc = _time(run, args.repeat, args.stat)
        t_ort = _time(functools.partial(session.run, None, feed), args.repeat, args.stat)
        del session
        flops = _flops(case, out.shape)
        g_tvmc, g_ort = flops / t_tvmc / 1e9, flops / t_ort / 1e9
        print(
            f"{case.name:32} {g_tvmc:10.1f} {g_ort:9.1f} {g_tvmc / g_ort:6.2f} {err:8.1e} "
            f"{build:7.2f}"
        )


if __name__ == "__main__":
    main()
