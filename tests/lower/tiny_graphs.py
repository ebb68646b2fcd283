"""Tiny graphs built inline for the fusion and memory-planning tests, and two Program runners.

`run_native` compiles a lowered Program for the host and runs it through the executor.
`run_program` runs it call by call with the kernel IR interpreter, every workspace buffer a view
at its planned offset of one byte array filled with NaN bytes, so a wrong memory plan (two live
tensors overlapping) or a read of a never-written tensor changes the result."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tvmc.codegen import load_shared
from tvmc.codegen.program import emit_program
from tvmc.graph import Graph, Node, TensorType
from tvmc.kernel import interpret
from tvmc.lower import LoweredModel, lower_graph
from tvmc.ops import OPS, infer_node
from tvmc.runtime import Executor, ProgramInfo

F32 = "float32"


def node(op: str, inputs: list[str], output: str | list[str], **attrs) -> Node:
    """A node named after its (first) output, attributes completed with the op's defaults."""
    outputs = [output] if isinstance(output, str) else output
    return Node(op, inputs, outputs, OPS[op].normalize_attrs(attrs, op))


def conv1x1(x: str, w: str, out: str) -> Node:
    """A 1x1 convolution, stride 1, no padding."""
    return node("Conv", [x, w], out, kernel_shape=(1, 1), strides=(1, 1), pads=(0,) * 4,
                dilations=(1, 1))  # fmt: skip


def graph_of(
    inputs: Mapping[str, tuple[int, ...]], nodes: list[Node], outputs: list[str],
    params: Mapping[str, np.ndarray] | None = None,
) -> Graph:  # fmt: skip
    """A float32 graph; node output types come from the ops' shape rules; verified."""
    types = {name: TensorType(shape, F32) for name, shape in inputs.items()}
    params = dict(params or {})
    types.update({name: TensorType.of(value) for name, value in params.items()})
    for n in nodes:
        types.update(zip(n.outputs, infer_node(n, [types[i] for i in n.inputs if i])))
    graph = Graph(list(inputs), outputs, nodes, types, params, "tiny")
    graph.verify(infer_node)
    return graph


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        name: rng.standard_normal(graph.types[name].shape).astype(graph.types[name].dtype)
        for name in graph.inputs
    }


def lower_for_interpreter(graph: Graph, fuse: bool = True) -> LoweredModel:
    """`lower_graph` with every conv's `in_place` off: in place, a 1x1 conv's vectors cross rows
    through the flat offset, which the interpreter's per-axis bounds check rejects."""
    configs = {n.name: {"in_place": False} for n in graph.nodes if n.op == "Conv"}
    return lower_graph(graph, configs=configs, fuse=fuse)


def run_program(lowered: LoweredModel, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of a lowered Program, its calls interpreted in order over one workspace."""
    program = lowered.program
    workspace = np.full(program.workspace_bytes, 0xFF, np.uint8)  # 0xFFFFFFFF is a float NaN
    outputs = [np.full(program.buffers[n].shape, np.nan, program.buffers[n].dtype)
               for n in program.outputs]  # fmt: skip
    store = {
        "input": [np.ascontiguousarray(inputs[lowered.tensor_of[n]]) for n in program.inputs],
        "output": outputs,
        "param": [lowered.param_values[n] for n in program.params],
    }

    def view(name: str, shape: tuple[int, ...]) -> np.ndarray:
        pb = program.buffers[name]
        dtype = np.dtype(pb.dtype)
        if pb.storage == "workspace":
            nbytes = int(np.prod(shape)) * dtype.itemsize
            assert pb.offset + nbytes <= program.workspace_bytes, f"{name} past the workspace"
            raw = workspace[pb.offset : pb.offset + nbytes]
        else:
            raw = store[pb.storage][pb.index].reshape(-1).view(np.uint8)
        return raw.view(dtype).reshape(shape)

    kernels = {k.name: k for k in program.kernels}
    for call in program.calls:
        kernel = kernels[call.kernel]
        interpret(kernel, *(view(a, b.shape) for a, b in zip(call.args, kernel.params)))
    return outputs


def run_native(lowered: LoweredModel, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of a lowered Program compiled for the host and run by the executor."""
    program = lowered.program
    info = ProgramInfo.of(program)
    executor = Executor(load_shared(emit_program(program, jobs=1)), info, lowered.param_values)
    executor.set_inputs([inputs[lowered.tensor_of[n]] for n in program.inputs])
    return executor.run()
