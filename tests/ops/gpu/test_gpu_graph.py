"""A small CNN lowered whole for CUDA (fusion, memory plan, epilogues: conv + bias + ReLU +
residual add, pools, a dense layer, softmax), its Program run kernel by kernel by the kernel IR
interpreter over one workspace as the GPU runtime lays it out, against onnxruntime.

Tolerance rtol 1e-4, atol 1e-5: float32 sums re-associated across threads and split-K slices.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tvmc.frontend import convert_model
from tvmc.kernel import interpret
from tvmc.lower import LoweredModel, lower_graph
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.schedule.gpu_launch import check_gpu_config
from tvmc.passes import IMPORT_PIPELINE, OPTIMIZE_PIPELINE, run_passes


def small_cnn(rng: np.random.Generator) -> onnx.ModelProto:
    """conv-relu, conv + residual add + relu, maxpool, global pool, gemm, softmax."""

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Add", ["c2", "r1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["d"], transB=1),
        helper.make_node("Softmax", ["d"], ["y"], axis=1),
    ]
    inits = [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 8, 8, 3, 3), weight("b2", 8),
             weight("w3", 10, 8), weight("b3", 10)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_interpreted(lowered: LoweredModel, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The Program's calls in order, every buffer a view of its storage (workspace by offset)."""
    program = lowered.program
    workspace = np.zeros(program.workspace_bytes + 64, np.uint8)
    outputs = [
        np.empty(program.buffers[n].shape, program.buffers[n].dtype) for n in program.outputs
    ]
    store = {
        "input": [np.ascontiguousarray(x) for x in inputs],
        "output": outputs,
        "param": [lowered.param_values[n] for n in program.params],
    }

    def view(name: str, shape: tuple[int, ...]) -> np.ndarray:
        pb = program.buffers[name]
        dtype = np.dtype(pb.dtype)
        if pb.storage == "workspace":
            raw = workspace[pb.offset : pb.offset + int(np.prod(shape)) * dtype.itemsize]
        else:
            raw = store[pb.storage][pb.index].reshape(-1).view(np.uint8)
        return raw.view(dtype).reshape(shape)

    kernels = {k.name: k for k in program.kernels}
    for call in program.calls:
        kernel = kernels[call.kernel]
        interpret(kernel, *(view(a, b.shape) for a, b in zip(call.args, kernel.params)))
    return outputs


@pytest.mark.parametrize("fuse", [True, False])
def test_small_cnn_on_the_gpu_schedules(fuse, rng):
    model = small_cnn(rng)
    graph = run_passes(run_passes(convert_model(model), IMPORT_PIPELINE), OPTIMIZE_PIPELINE)
    lowered = lower_graph(graph, LoweringTarget(kind="cuda"), fuse=fuse)
    check_gpu_config(lowered.program.kernels)
    if fuse:  # the residual add and both ReLUs ride on the convs' stores
        labels = [c.node for c in lowered.program.calls]
        assert any("+Add" in label for label in labels), labels
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    (got,) = run_interpreted(lowered, [x])
    (want,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
