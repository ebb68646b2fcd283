"""Run ops through their kernel-IR lowering (compute or template), node by node, natively.

`check_lowered(...)` mirrors `tests.onnx_helpers.check_node`: one ONNX node is converted by
tvmc's frontend, then every node of the resulting graph runs through its op's lowering compiled
by the LLVM code generator (or the kernel IR interpreter), and the outputs are compared with
onnxruntime. It tests computes and templates one op at a time; whole-model compilation (fusion,
memory planning, one entry point) is tested elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from tests.onnx_helpers import check_node
from tvmc.codegen import emit_cpu, load_shared
from tvmc.frontend import convert_model
from tvmc.graph import Graph, Node, TensorType
from tvmc.kernel import Buffer, interpret
from tvmc.ops import OPS
from tvmc.ops.lowering import LowerContext, LoweringTarget, buffer_shape, ref_of_buffer
from tvmc.ops.schedule.gpu_launch import check_gpu_config
from tvmc.ops.schedule.injective import schedule_injective
from tvmc.passes import IMPORT_PIPELINE, run_passes


def lower_node(
    ctx: LowerContext, node: Node, in_types: list[TensorType], out_types: list[TensorType],
    constants: Mapping[int, np.ndarray],
) -> tuple[list, list[Buffer], list[Buffer]]:  # fmt: skip
    """(kernels, input buffers, output buffers) for one node."""
    opdef = OPS[node.op]
    in_bufs = [Buffer(f"in{i}", buffer_shape(t.shape), t.dtype) for i, t in enumerate(in_types)]
    out_bufs = [Buffer(f"out{i}", buffer_shape(t.shape), t.dtype) for i, t in enumerate(out_types)]
    refs = [
        ref_of_buffer(f"in{i}", t, b, constants.get(i))
        for i, (t, b) in enumerate(zip(in_types, in_bufs))
    ]
    if opdef.is_template:
        kernels = opdef.build(ctx, node.attrs, refs, out_bufs, None)
    else:
        accessors = opdef.compute(ctx.target.kind)(node.attrs, refs, out_types)
        cost = opdef.element_cost(ctx.target.kind, node.attrs, in_types)
        kernels = [
            schedule_injective(ctx, node.op, [(buf, typ.ndim, acc)], cost)
            for buf, typ, acc in zip(out_bufs, out_types, accessors)
            if typ.size  # an empty output needs no kernel
        ]
    return kernels, in_bufs, out_bufs


def run_node(
    node: Node, inputs: list[np.ndarray], out_types: list[TensorType],
    constants: Mapping[int, np.ndarray] = {}, use_interpreter: bool = False,
    config: Mapping[str, Any] | None = None, target: LoweringTarget | None = None,
) -> list[np.ndarray]:  # fmt: skip
    """Outputs of one node computed by its lowered kernels (GPU targets: interpreted)."""
    ctx = LowerContext(target or LoweringTarget(num_threads=2), config or {})
    in_types = [TensorType.of(x) for x in inputs]
    kernels, in_bufs, out_bufs = lower_node(ctx, node, in_types, out_types, constants)
    if ctx.target.kind == "cuda":
        check_gpu_config(kernels)  # GPU loops only, launchable
        use_interpreter = True  # the interpreter runs GPU thread loops with GPU semantics
    arrays: dict[Buffer, np.ndarray] = {}
    for buf, x in zip(in_bufs, inputs):
        arrays[buf] = np.ascontiguousarray(x).reshape(buf.shape)
    for buf in out_bufs:
        arrays[buf] = np.full(buf.shape, _poison(buf.dtype), buf.dtype)
    for buf, value in ctx.params:
        arrays[buf] = value
    for buf in ctx.temps:
        arrays[buf] = np.full(buf.shape, _poison(buf.dtype), buf.dtype)
    if use_interpreter:
        for k in kernels:
            interpret(k, *(arrays[b] for b in k.params))
    else:
        module = load_shared(emit_cpu(kernels))
        for k in kernels:
            module.run(k.name, *(arrays[b] for b in k.params))
    return [arrays[b].reshape(t.shape) if t.size else np.empty(t.shape, t.dtype)
            for b, t in zip(out_bufs, out_types)]  # fmt: skip


def _poison(dtype: str) -> Any:
    """Fill for outputs and scratch: NaN (or a large int) so an unwritten element shows."""
    kind = np.dtype(dtype).kind
    return np.nan if kind == "f" else (True if kind == "b" else 77)


def run_graph_lowered(
    graph: Graph, inputs: Mapping[str, np.ndarray], use_interpreter: bool = False,
    target: LoweringTarget | None = None, config: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Every node of `graph` through its lowering, one after the other."""
    values: dict[str, np.ndarray] = {**graph.params, **inputs}
    for node in graph.nodes:
        args = [n for n in node.inputs if n]
        constants = {i: graph.params[n] for i, n in enumerate(args) if n in graph.params}
        outs = run_node(node, [values[n] for n in args], [graph.types[n] for n in node.outputs],
                        constants, use_interpreter, config, target)  # fmt: skip
        values.update(zip(node.outputs, outs))
    return {name: values[name] for name in graph.outputs}


def check_lowered(
    op_type: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    num_outputs: int = 1,
    opset: int = 17,
    input_order: Sequence[str] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    use_interpreter: bool = False,
    target: LoweringTarget | None = None,
    config: Mapping[str, Any] | None = None,
    expect: str | None = "",
) -> None:
    """One ONNX node: tvmc's lowered kernels (native, or interpreted) against onnxruntime.

    `target=LoweringTarget(kind="cuda")` lowers with the GPU schedules and interprets them.
    `expect`: the op that must reach lowering (default: `op_type` when tvmc has an op of that
    name; None: no check, for nodes the import passes may fold or rewrite).
    """
    if expect == "":
        expect = op_type if op_type in OPS else None

    def lowered(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        graph = run_passes(convert_model(model), IMPORT_PIPELINE)
        reached = {n.op for n in graph.nodes}
        if expect is not None:  # the node under test really reached its lowering
            assert expect in reached, f"{expect} did not reach lowering: {sorted(reached)}"
        outputs = run_graph_lowered(graph, feeds, use_interpreter, target, config)
        return [outputs[o.name] for o in model.graph.output]

    check_node(op_type, inputs, attrs, constants, num_outputs, opset, input_order, rtol, atol,
               runner=lowered)  # fmt: skip
