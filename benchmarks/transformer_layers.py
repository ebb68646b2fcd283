"""One transformer encoder layer at BERT-base size (hidden 768, 12 heads, 128 tokens, batch 1),
written with onnx.helper in the forms exporters emit, timed in tvmc beside onnxruntime and
OpenVINO (`make bench`'s alternating blocks, 2 threads, medians).

The forms: `ops` (LayerNormalization and Gelu, opset 17+/20 exporters), `erf` (LayerNorm as
ReduceMean/Sub/Pow/Sqrt/Div and GELU as Div/Erf/Add/Mul: TorchScript exporters before opset 17),
`tanh` (decomposed LayerNorm, GPT-2's tanh GELU with Pow(x, 3)) and `llama` (T5/Llama RMSNorm as
Pow/ReduceMean/Sqrt/Reciprocal/Mul, a SwiGLU MLP with SiLU as x * Sigmoid(x), no biases).
Random weights, seed 0; `--layers N` stacks N layers. Also prints the largest error against
onnxruntime relative to the output's scale. `--zoo bert gpt2 ...` times those models of
tests/models/zoo (their stored inputs) the same way instead; `--save DIR` only writes the
layers' ONNX files and inputs (for benchmarks/compare_packages.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
from baselines import onnxruntime_session, openvino_session
from models import blocked_median_ms, compiled_executor, geomean
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tvmc.codegen import num_threads
from tvmc.driver.compiler import CompileOptions

FORMS = ("ops", "erf", "tanh", "llama")
ZOO = Path(__file__).resolve().parent.parent / "tests" / "models" / "zoo"


class LayerBuilder:
    """Nodes and initializers of one model, named as they are added."""

    def __init__(self, form: str, hidden: int, seed: int = 0) -> None:
        self.form, self.hidden = form, hidden
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, value: np.ndarray | float, dtype=np.float32) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def weight(self, *shape: int, scale: float = 1.0) -> str:
        return self.const(self.rng.standard_normal(shape) * scale)

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, k: int, n: int, bias: bool = True) -> str:
        y = self.op("MatMul", x, self.weight(k, n, scale=1 / math.sqrt(k)))
        return self.op("Add", y, self.weight(n, scale=0.1)) if bias else y

    def norm(self, x: str) -> str:
        gamma = self.const(1 + 0.1 * self.rng.standard_normal(self.hidden))
        axes = self.const([-1], np.int64) if self.form != "ops" else ""
        if self.form == "llama":
            ms = self.op("ReduceMean", self.op("Pow", x, self.const(2.0)), axes)
            inv = self.op("Reciprocal", self.op("Sqrt", self.op("Add", ms, self.const(1e-6))))
            return self.op("Mul", gamma, self.op("Mul", x, inv))
        beta = self.weight(self.hidden, scale=0.1)
        if self.form == "ops":
            return self.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=1e-12)
        d = self.op("Sub", x, self.op("ReduceMean", x, axes))
        var = self.op("ReduceMean", self.op("Pow", d, self.const(2.0)), axes)
        std = self.op("Sqrt", self.op("Add", var, self.const(1e-12)))
        return self.op("Add", self.op("Mul", self.op("Div", d, std), gamma), beta)

    def mlp(self, x: str, ffn: int) -> str:
        h = self.hidden
        if self.form == "llama":
            gate = self.linear(x, h, ffn, bias=False)
            silu = self.op("Mul", gate, self.op("Sigmoid", gate))
            return self.linear(self.op("Mul", silu, self.linear(x, h, ffn, False)), ffn, h, False)
        a = self.linear(x, h, ffn)
        if self.form == "ops":
            g = self.op("Gelu", a, approximate="none")
        elif self.form == "erf":
            e = self.op("Erf", self.op("Div", a, self.const(math.sqrt(2))))
            g = self.op("Mul", self.op("Mul", a, self.op("Add", e, self.const(1.0))),
                        self.const(0.5))  # fmt: skip
        else:
            cube = self.op("Mul", self.op("Pow", a, self.const(3.0)), self.const(0.044715))
            z = self.op("Mul", self.op("Add", a, cube), self.const(math.sqrt(2 / math.pi)))
            g = self.op("Mul", self.op("Mul", a, self.const(0.5)),
                        self.op("Add", self.op("Tanh", z), self.const(1.0)))  # fmt: skip
        return self.linear(g, ffn, h)


def encoder_layers(form: str, layers: int = 1, hidden: int = 768, heads: int = 12,
                   seq: int = 128, ffn: int = 3072) -> onnx.ModelProto:  # fmt: skip
    """Post-norm encoder layers (BERT's order; pre-norm costs the same) over inputs x, mask."""
    b = LayerBuilder(form, hidden)
    dh = hidden // heads
    split = b.const([1, seq, heads, dh], np.int64)
    merge = b.const([1, seq, hidden], np.int64)
    x = "x"
    for _ in range(layers):
        bias = form != "llama"
        q, k, v = (b.op("Reshape", b.linear(x, hidden, hidden, bias), split) for _ in range(3))
        q = b.op("Transpose", q, perm=[0, 2, 1, 3])
        k = b.op("Transpose", k, perm=[0, 2, 3, 1])
        v = b.op("Transpose", v, perm=[0, 2, 1, 3])
        scores = b.op("Add", b.op("Mul", b.op("MatMul", q, k), b.const(1 / math.sqrt(dh))), "mask")
        context = b.op("MatMul", b.op("Softmax", scores, axis=-1), v)
        context = b.op("Reshape", b.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
        attended = b.norm(b.op("Add", b.linear(context, hidden, hidden, bias), x))
        x = b.norm(b.op("Add", b.mlp(attended, ffn), attended))
    b.nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        b.nodes, f"encoder_{form}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, seq])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], b.inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model


def layer_inputs(seq: int = 128, hidden: int = 768) -> dict[str, np.ndarray]:
    """Hidden states, and an additive padding mask hiding the last 28 tokens."""
    x = np.random.default_rng(1).standard_normal((1, seq, hidden)).astype(np.float32)
    mask = np.zeros((1, 1, 1, seq), np.float32)
    mask[..., seq - 28 :] = -10000.0
    return {"x": x, "mask": mask}


def zoo_model(name: str) -> tuple[str, dict[str, np.ndarray]]:
    """The path of a zoo model and its stored inputs by name."""
    manifest = json.loads((ZOO / "manifest.json").read_text())
    (entry,) = [m for m in manifest["models"] if m["name"] == name]
    arrays = np.load(ZOO / f"{name}.npz")
    return str(ZOO / f"{name}.onnx"), {x["name"]: arrays[f"input_{i}"]
                                        for i, x in enumerate(entry["inputs"])}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("forms", nargs="*", help=f"some of {', '.join(FORMS)} (default: all)")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--zoo", nargs="+", metavar="MODEL", help="time these zoo models instead")
    parser.add_argument("--save", metavar="DIR", help="only write DIR/<form>.onnx and inputs.npz")
    args = parser.parse_args()
    if unknown := set(args.forms) - set(FORMS):
        parser.error(
            f"unknown form(s) {', '.join(sorted(unknown))}; choose from {', '.join(FORMS)}"
        )
    if args.save:
        os.makedirs(args.save, exist_ok=True)
        for form in args.forms or FORMS:
            onnx.save(encoder_layers(form, args.layers), os.path.join(args.save, f"{form}.onnx"))
        np.savez(os.path.join(args.save, "inputs.npz"), **layer_inputs())
        return
    threads = num_threads()
    print(f"threads {threads}; load average {os.getloadavg()[0]:.2f}; medians of {args.repeat}; "
          "ratio: tvmc / the faster of onnxruntime and OpenVINO")  # fmt: skip
    print(f"{'model':16} {'tvmc ms':>8} {'ort ms':>8} {'ov ms':>8} {'ratio':>6} {'GFLOP/s':>8} "
          f"{'kernels':>7} {'max err':>8}")  # fmt: skip
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.zoo or args.forms or FORMS:
            if args.zoo:
                path, inputs = zoo_model(name)
            else:
                path, inputs = os.path.join(tmp, f"{name}.onnx"), layer_inputs()
                onnx.save(encoder_layers(name, args.layers), path)
            graph = tvmc.load(path).graph
            executor, result = compiled_executor(graph, CompileOptions(),
                                                 [inputs[n] for n in graph.inputs])  # fmt: skip
            runs = [executor.call, onnxruntime_session(path, inputs, threads)]
            openvino = openvino_session(path, inputs, threads)
            runs += [openvino] if openvino is not None else []
            want = runs[1]()[0]
            error = float(np.abs(executor.run()[0].reshape(want.shape) - want).max())
            times = blocked_median_ms(*runs, repeat=args.repeat)
            ratio = times[0] / min(times[1:])
            ratios.append(ratio)
            program = result.lowered.program
            gflops = sum(c.flops for c in program.calls) / times[0] / 1e6
            ov_ms = times[2] if openvino is not None else math.nan
            print(f"{name:16} {times[0]:8.3f} {times[1]:8.3f} {ov_ms:8.3f} {ratio:6.2f} "
                  f"{gflops:8.1f} {len(program.calls):7d} "
                  f"{error / np.abs(want).max():8.1e}", flush=True)  # fmt: skip
            runs = openvino = None  # free their thread pools before the next model
    print(f"geometric-mean ratio: {geomean(ratios):.2f}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
