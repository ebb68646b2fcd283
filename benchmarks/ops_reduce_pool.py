"""Benchmark (not a test): reduction, pooling, softmax and normalization templates vs onnxruntime.

    .venv/bin/python benchmarks/ops_reduce_pool.py [--threads 2] [--repeat 200] [--only Softmax]
        [--config reduce_unroll=2 ...]

Each case is one ONNX node on a ResNet-50 / BERT-base typical shape: tvmc's frontend converts it,
the op's template lowers it, the kernels are compiled natively and called through ctypes with
prepared pointers; onnxruntime runs the same one-node model with the same thread count. Calls
alternate between the two; prints the median and best time of each and the ratios tvmc /
onnxruntime (below 1: tvmc is faster). The best times are the steadier on a loaded machine.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from tvmc.codegen import emit_cpu, load_shared, set_num_threads
from tvmc.frontend import convert_model
from tvmc.graph import TensorType
from tvmc.kernel import Buffer
from tvmc.ops import OPS
from tvmc.ops.lowering import LowerContext, LoweringTarget, buffer_shape, ref_of_buffer

RNG = np.random.default_rng(0)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# (label, op, input, attrs, constants, opset)
CASES: list[tuple[str, str, np.ndarray, dict[str, Any], dict[str, np.ndarray], int]] = [
    ("resnet stem MaxPool 3x3 s2", "MaxPool", randn(1, 64, 112, 112),
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, {}, 13),
    ("squeezenet MaxPool 3x3 s2 55", "MaxPool", randn(1, 128, 55, 55),
     {"kernel_shape": [3, 3], "strides": [2, 2]}, {}, 13),
    ("squeezenet MaxPool 3x3 s2 27", "MaxPool", randn(1, 256, 27, 27),
     {"kernel_shape": [3, 3], "strides": [2, 2]}, {}, 13),
    ("zoo squeezenet MaxPool ceil", "MaxPool", randn(1, 64, 31, 31),
     {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, {}, 13),
    ("densenet AveragePool 2x2 s2", "AveragePool", randn(1, 256, 56, 56),
     {"kernel_shape": [2, 2], "strides": [2, 2]}, {}, 13),
    ("MaxPool 3x3 s1 p1", "MaxPool", randn(1, 192, 28, 28),
     {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, {}, 13),
    ("AveragePool 3x3 s1 p1", "AveragePool", randn(1, 256, 28, 28),
     {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0}, {}, 13),
    ("resnet GlobalAveragePool", "GlobalAveragePool", randn(1, 2048, 7, 7), {}, {}, 13),
    ("GlobalMaxPool 56x56", "GlobalMaxPool", randn(1, 256, 56, 56), {}, {}, 13),
    ("ReduceMean HW (SE block)", "ReduceMean", randn(1, 256, 56, 56),
     {"axes": [2, 3]}, {}, 13),
    ("ReduceSum channels", "ReduceSum", randn(1, 64, 56, 56), {}, {"axes": np.array([1])}, 13),
    ("bert ReduceMean hidden", "ReduceMean", randn(1, 128, 768), {"axes": [-1]}, {}, 13),
    ("ArgMax logits", "ArgMax", randn(128, 1000), {"axis": -1}, {}, 13),
    ("bert Softmax scores", "Softmax", randn(1, 12, 128, 128), {"axis": -1}, {}, 13),
    ("Softmax 1000 classes", "Softmax", randn(1, 1000), {"axis": -1}, {}, 13),
    ("LogSoftmax channels", "LogSoftmax", randn(8, 64, 32), {"axis": 1}, {}, 13),
    ("bert LayerNormalization", "LayerNormalization", randn(1, 128, 768), {"axis": -1},
     {"scale": randn(768), "bias": randn(768)}, 17),
    ("InstanceNormalization", "InstanceNormalization", randn(1, 64, 56, 56), {},
     {"scale": randn(64), "bias": randn(64)}, 13),
    ("LRN size 5", "LRN", randn(1, 64, 56, 56), {"size": 5}, {}, 13),
]  # fmt: skip


def one_node(op: str, x: np.ndarray, attrs: dict, constants: dict, opset: int) -> onnx.ModelProto:
    """A model `y = op(x, *constants)` with `attrs`."""
    node = helper.make_node(op, ["x", *constants], ["y"], **attrs)
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def timed(fns: list[Callable[[], Any]], repeat: int) -> list[tuple[float, float]]:
    """(median, best) wall time of each of `fns`, called in alternation so load hits all alike."""
    for fn in fns:
        for _ in range(5):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return [(statistics.median(t), min(t)) for t in times]


def tvmc_runner(
    model: onnx.ModelProto, x: np.ndarray, threads: int, config: dict[str, Any]
) -> Callable[[], None]:
    """The node's kernels compiled, as a no-argument call on prepared buffers."""
    graph = convert_model(model)
    (node,) = graph.nodes
    ctx = LowerContext(LoweringTarget(num_threads=threads), config)
    args = [n for n in node.inputs if n]
    arrays = {"x": x, **graph.params}
    in_types = [TensorType.of(np.asarray(arrays[n])) for n in args]
    in_bufs = [Buffer(f"in{i}", buffer_shape(t.shape), t.dtype) for i, t in enumerate(in_types)]
    out_types = [graph.types[n] for n in node.outputs]
    out_bufs = [Buffer(f"out{i}", buffer_shape(t.shape), t.dtype) for i, t in enumerate(out_types)]
    refs = [
        ref_of_buffer(f"in{i}", t, b, graph.params.get(n))
        for i, (t, b, n) in enumerate(zip(in_types, in_bufs, args))
    ]
    kernels = OPS[node.op].build(ctx, node.attrs, refs, out_bufs, None)
    data = {b: np.ascontiguousarray(arrays[n]).reshape(b.shape) for b, n in zip(in_bufs, args)}
    data.update({b: np.zeros(b.shape, b.dtype) for b in out_bufs})
    data.update({b: v for b, v in ctx.params})
    data.update({b: np.zeros(b.shape, b.dtype) for b in ctx.temps})
    module = load_shared(emit_cpu(kernels))
    set_num_threads(threads)
    calls = [(module[k.name], [ctypes.c_void_p(data[b].ctypes.data) for b in k.params])
             for k in kernels]  # fmt: skip

    def run(keepalive: object = data) -> None:  # the arrays must outlive their pointers
        for fn, ptrs in calls:
            fn(*ptrs)

    return run


def ort_runner(model: onnx.ModelProto, x: np.ndarray, threads: int) -> Callable[[], Any]:
    """onnxruntime on the same model (all graph optimizations, `threads` intra-op threads)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    feeds = {"x": x}
    return lambda: session.run(None, feeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--only", default="", help="run the cases whose label contains this")
    parser.add_argument(
        "--config",
        nargs="*",
        default=[],
        metavar="KNOB=INT",
        help="template knobs, e.g. reduce_unroll=2 parallel_min_elements=65536",
    )
    args = parser.parse_args()
    config = {k: int(v) for k, v in (item.split("=", 1) for item in args.config)}
    print(f"{'case':28} {'shape':>13} {'tvmc us':>8} {'ort us':>8} {'ratio':>5}   best: "
          f"{'tvmc':>7} {'ort':>7} {'ratio':>5}")  # fmt: skip
    for label, op, x, attrs, constants, opset in CASES:
        if args.only not in label:
            continue
        model = one_node(op, x, attrs, constants, opset)
        runners = [tvmc_runner(model, x, args.threads, config), ort_runner(model, x, args.threads)]
        (ours, our_best), (theirs, their_best) = timed(runners, args.repeat)
        shape = "x".join(map(str, x.shape))
        print(
            f"{label:28} {shape:>13} {ours * 1e6:8.1f} {theirs * 1e6:8.1f} {ours / theirs:5.2f}"
            f"   {our_best * 1e6:13.1f} {their_best * 1e6:7.1f} {our_best / their_best:5.2f}"
        )


if __name__ == "__main__":
    main()
