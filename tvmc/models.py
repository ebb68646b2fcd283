"""The ONNX "light" models that ship inside the onnx wheel, made into meaningful test subjects.

Their weights are ConstantOfShape constants (every expected output is the same number), so
`randomized_light_model` swaps each for a seeded random initializer with a sensible scale (He for
Conv/Gemm weights, positive BatchNorm variances) and exposes the logits (the input of the final
Softmax) as the output. Used by tests, the demo and the benchmarks.
"""

from __future__ import annotations

import math
import os

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_MODELS = tuple(
    sorted(f[: -len(".onnx")] for f in os.listdir(LIGHT_DIR) if f.endswith(".onnx"))
) if os.path.isdir(LIGHT_DIR) else ()  # fmt: skip


def light_model_path(name: str) -> str:
    """Path of a light model file by name (e.g. 'light_resnet50')."""
    return os.path.join(LIGHT_DIR, f"{name}.onnx")


def _role_value(role: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if role in ("Conv.1", "Gemm.1"):
        fan_in = math.prod(shape[1:]) if role == "Conv.1" else shape[-1]
        return rng.standard_normal(shape) * math.sqrt(2.0 / max(fan_in, 1))
    if role in ("BatchNormalization.1", "Mul.1"):  # scales below 1 keep residual sums bounded
        return rng.uniform(0.25, 0.75, shape)
    if role == "BatchNormalization.4":  # variance: positive
        return rng.uniform(0.5, 1.5, shape)
    return rng.standard_normal(shape) * 0.1  # biases, means, shifts


def randomized_light_model(name: str, seed: int = 0) -> onnx.ModelProto:
    """The light model with seeded random weights in place of ConstantOfShape, output = logits."""
    model = onnx.load(light_model_path(name))
    graph = model.graph
    rng = np.random.default_rng(seed)
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for index, tensor in enumerate(node.input):
            consumers.setdefault(tensor, []).append((node, index))
    shapes = {init.name: numpy_helper.to_array(init) for init in graph.initializer}

    def role(tensor: str) -> str:
        node, index = consumers[tensor][0]
        if node.op_type == "Unsqueeze":  # scale/shift constants reshaped before Mul/Add
            return role(node.output[0])
        return f"{node.op_type}.{index}"

    kept = []
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            kept.append(node)
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        value = _role_value(role(node.output[0]), shape, rng).astype(np.float32)
        graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
    del graph.node[:]
    graph.node.extend(kept)
    last = graph.node[-1]
    if last.op_type == "Softmax":  # compare logits: a softmax hides errors in small probabilities
        logits = last.input[0]
        graph.node.remove(last)
        del graph.output[:]
        graph.output.append(onnx.helper.make_empty_tensor_value_info(logits))
    used = {t for n in graph.node for t in n.input}
    for init in list(graph.initializer):
        if init.name not in used:
            graph.initializer.remove(init)
    inputs = [i for i in graph.input if i.name in used or i.name not in shapes]
    del graph.input[:]
    graph.input.extend(inputs)
    return model


def light_model_inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded random float32 inputs (standard normal) for every runtime input of `model`."""
    rng = np.random.default_rng(seed)
    initializers = {init.name for init in model.graph.initializer}
    inputs = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        inputs[value.name] = rng.standard_normal(shape).astype(np.float32)
    return inputs
