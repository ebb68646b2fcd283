"""Run one ONNX node through its template with a fused epilogue and tuning knobs, vs onnxruntime.

`check_lowered` (tests/lowering_helpers.py) covers plain lowering; this adds what it cannot
reach: an epilogue `relu(v + 0.5) + residual[idx]` (integers: `v + residual[idx]`) that reads
another buffer at the output indices it is given, so a wrong index tuple shows, and a `config`
(e.g. `parallel_min_elements=1` forces the parallel loops on small shapes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tests.onnx_helpers import assert_close, run_onnxruntime, single_node_model
from tvmc.codegen import emit_cpu, load_shared
from tvmc.frontend import convert_model
from tvmc.graph import TensorType
from tvmc.kernel import Buffer, Expr, For, Kernel, const, interpret, maximum
from tvmc.kernel.transform import walk
from tvmc.ops import OPS
from tvmc.ops.lowering import LowerContext, LoweringTarget, buffer_shape, ref_of_buffer
from tvmc.passes import IMPORT_PIPELINE, run_passes

FORCE_PARALLEL = {"parallel_min_elements": 1}


def check_template(
    op: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    opset: int = 18,
    epilogue: bool = True,
    config: Mapping[str, Any] | None = None,
    use_interpreter: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    input_order: Sequence[str] | None = None,
) -> list[Kernel]:
    """One node's template (optionally with the residual epilogue) against onnxruntime;
    `input_order` as `single_node_model`'s.

    Returns the kernels, for tests that check how they are scheduled.
    """
    inputs = {k: np.asarray(v) for k, v in inputs.items()}
    model = single_node_model(op, inputs, attrs, constants, opset=opset, input_order=input_order)
    want = np.asarray(run_onnxruntime(model, inputs)[0])
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (node,) = graph.nodes
    assert node.op == op, f"{op} became {node.op} before lowering"
    values = {**inputs, **graph.params}
    names = [n for n in node.inputs if n]
    types = [TensorType.of(np.asarray(values[n])) for n in names]
    bufs = [Buffer(f"in{i}", buffer_shape(t.shape), t.dtype) for i, t in enumerate(types)]
    refs = [
        ref_of_buffer(f"in{i}", t, b, graph.params.get(n))
        for i, (t, b, n) in enumerate(zip(types, bufs, names))
    ]
    out_type = graph.types[node.outputs[0]]
    out = Buffer("out", buffer_shape(out_type.shape), out_type.dtype)
    data = {b: np.ascontiguousarray(values[n]).reshape(b.shape) for b, n in zip(bufs, names)}
    fused = None
    if epilogue:
        residual_buf = Buffer("residual", out.shape, out.dtype)
        residual = np.random.default_rng(1).standard_normal(out.shape) * 3
        data[residual_buf] = residual.astype(out.dtype)
        floating = out.dtype.startswith("float")

        def fused(idx: tuple[Expr, ...], v: Expr) -> Expr:
            assert len(idx) == out_type.ndim, "epilogue indices must have the output's rank"
            extra = residual_buf[idx if idx else (const(0),)]
            return maximum(v + 0.5, 0.0) + extra if floating else v + extra

        base = np.maximum(want + 0.5, 0).astype(out.dtype) if floating else want
        want = base + data[residual_buf].reshape(out_type.shape)
    ctx = LowerContext(LoweringTarget(num_threads=2), dict(config or {}))
    kernels = OPS[node.op].build(ctx, node.attrs, refs, [out], fused)
    data[out] = np.full(out.shape, np.nan if out.dtype.startswith("float") else 77, out.dtype)
    data.update(ctx.params)
    data.update({b: np.full(b.shape, 0, b.dtype) for b in ctx.temps})
    if use_interpreter:
        for k in kernels:
            interpret(k, *(data[b] for b in k.params))
    else:
        module = load_shared(emit_cpu(kernels))
        for k in kernels:
            module.run(k.name, *(data[b] for b in k.params))
    assert_close(data[out].reshape(out_type.shape), want.astype(out.dtype), rtol, atol)
    return kernels


def loop_kinds(kernels: list[Kernel]) -> set[str]:
    """The kinds of every loop in `kernels` (serial, parallel, vectorized, unrolled)."""
    return {n.kind for k in kernels for n in walk(k.body) if isinstance(n, For)}
