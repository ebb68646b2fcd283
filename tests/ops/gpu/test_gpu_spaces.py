"""The CUDA-only knob spaces of the pools (`block`) and of the reductions, softmax, norms and
global pools (`reduce_threads`): their sizes and recorded defaults, that the default config builds
the untuned kernels, that no op gains a space on the CPU, and that every config of a few spaces
lowers, assembles with ptxas (skipped without it) and computes the op in the GPU-semantics
interpreter against onnxruntime (tolerances as tests/ops/gpu/test_gpu_lowering.py: sums and
products re-associated across threads, rtol 1e-4 / atol 1e-5)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.lowering_helpers import check_lowered
from tests.onnx_helpers import single_node_model
from tests.ops.gpu.test_gpu_ptx import assemble, kernels_of
from tvmc.frontend import convert_model
from tvmc.graph import Node, TensorType
from tvmc.kernel import kernel_str
from tvmc.ops import OPS
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.reduction.reduce import REDUCTIONS
from tvmc.ops.schedule.gpu_launch import GPUConfigError
from tvmc.ops.space import ConfigSpace
from tvmc.passes import IMPORT_PIPELINE, run_passes

CUDA = LoweringTarget(kind="cuda")
CPU = LoweringTarget()
SUMS = {"rtol": 1e-4, "atol": 1e-5}
POOL = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}  # ONNX's
POOL_T = {**POOL, "dilations": [1, 1]}  # tvmc's (every attribute given)


def T(*shape: int) -> TensorType:
    return TensorType(tuple(shape), "float32")


def space_of(op: str, types: list[TensorType], attrs: dict, target=CUDA) -> ConfigSpace | None:
    return OPS[op].space(OPS[op].normalize_attrs(attrs, "test"), types, target)


def values(space: ConfigSpace) -> list[Any]:
    (knob,) = space.knobs
    return list(knob.candidates)


def default_value(space: ConfigSpace) -> Any:
    assert space.default_index is not None
    return space.get(space.default_index).values[space.knobs[0].name]


# (op, input types, tvmc attrs, the knob's candidates, the default value)
SIZES = {
    "maxpool big": ("MaxPool", [T(1, 64, 112, 112)], POOL_T, [64, 128, 256, 512], 256),
    "avgpool 100 outputs": ("AveragePool", [T(1, 4, 10, 10)], POOL_T, [64, 100], 100),
    "maxpool 50 outputs": ("MaxPool", [T(1, 2, 10, 10)], POOL_T, [50], 50),
    "lrn": ("LRN", [T(1, 8, 20, 20)], {"size": 3}, [64, 128, 256, 512], 256),
    "softmax long rows": (
        "Softmax",
        [T(4, 1000)],
        {"axes": [1]},
        [1, 32, 64, 128, 256, 512, 1024],
        256,
    ),  # fmt: skip
    "softmax 4096": ("Softmax", [T(2, 4096)], {"axes": [1]}, [1, 32, 64, 128, 256, 512, 1024], 256),
    "reduce short rows": ("ReduceSum", [T(64, 20)], {"axes": [1]}, [1, 32], 1),
    "reduce columns": ("ReduceSum", [T(2, 64, 4096)], {"axes": [1]}, [1, 32, 64], 1),
    "reduce nothing": ("ReduceMax", [T(8, 1)], {"axes": [1]}, [1], 1),
    "global pool 7x7": ("GlobalAveragePool", [T(1, 2048, 7, 7)], {}, [1, 32, 64], 64),
    "layer norm": (
        "LayerNormalization",
        [T(8, 384), T(384), T(384)],
        {"axis": -1},
        [1, 32, 64, 128, 256, 512],
        256,
    ),  # fmt: skip
    "argmax": ("ArgMax", [T(3, 100)], {"axis": 1}, [1, 32, 64, 128], 128),
}


@pytest.mark.parametrize("case", SIZES)
def test_space_sizes_and_defaults(case):
    op, types, attrs, candidates, default = SIZES[case]
    space = space_of(op, types, attrs)
    assert values(space) == candidates
    assert default_value(space) == default


# one workload per op whose template reads `reduce_threads` or `block` on the GPU
EVERY_OP = {
    **{op: ([T(3, 4, 50)], {"axes": [2]}) for op in REDUCTIONS},
    "Softmax": ([T(3, 70)], {"axes": [1]}),
    "LogSoftmax": ([T(3, 70)], {"axes": [1]}),
    "Hardmax": ([T(3, 70)], {"axes": [1]}),
    "ArgMax": ([T(3, 4, 50)], {"axis": 2}),
    "ArgMin": ([T(3, 4, 50)], {"axis": 1}),
    "LayerNormalization": ([T(2, 3, 40), T(40), T(40)], {"axis": -1}),
    "InstanceNormalization": ([T(2, 3, 6, 7), T(3), T(3)], {}),
    "RMSNormalization": ([T(2, 3, 40), T(40)], {"axis": -1}),
    "GroupNormalization": ([T(2, 6, 5, 7), T(6), T(6)], {"num_groups": 3}),
    "LpNormalization": ([T(2, 3, 40)], {"axis": 2}),
    "MeanVarianceNormalization": ([T(2, 3, 6, 7)], {"axes": [0, 2, 3]}),
    "GlobalAveragePool": ([T(1, 8, 7, 7)], {}),
    "GlobalMaxPool": ([T(1, 8, 3, 3)], {}),
    "MaxPool": ([T(1, 4, 20, 20)], POOL_T),
    "AveragePool": ([T(1, 4, 10, 10)], POOL_T),
    "LRN": ([T(1, 8, 5, 5)], {"size": 3}),
    "LpPool": ([T(1, 4, 10, 10)], POOL_T),
    "NegativeLogLikelihoodLoss": (
        [T(8, 10, 30), TensorType((8, 30), "int64")],
        {"reduction": "sum"},
    ),
}


def test_every_reduction_template_has_a_gpu_space():
    tunable = {op for op, d in OPS.items() if d.tunable("cuda") and not d.tunable("cpu")}
    assert tunable == set(EVERY_OP)


@pytest.mark.parametrize("op", EVERY_OP)
def test_cuda_only_and_the_default_config_builds_the_untuned_kernels(op):
    types, attrs = EVERY_OP[op]
    assert space_of(op, types, attrs, CPU) is None  # no task on the CPU
    space = space_of(op, types, attrs)
    assert len(space) >= 1 and space.default_index is not None
    default = space.get(space.default_index).values
    untuned = [kernel_str(k) for k in kernels_of(op, types, attrs)]
    assert [kernel_str(k) for k in kernels_of(op, types, attrs, default)] == untuned


def test_cpu_spaces_are_unchanged():
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1]}
    cpu = space_of("Conv", [T(1, 16, 14, 14), T(32, 16, 3, 3)], conv, CPU)
    assert cpu is not None and {k.name for k in cpu.knobs} != {"tile_m", "tile_n"}
    assert space_of("MatMul", [T(64, 64), T(64, 64)], {}, CPU) is not None
    assert not any(OPS[op].tunable(kind) for op in ("Relu", "Concat") for kind in ("cpu", "cuda"))


def test_invalid_values_are_config_errors():
    with pytest.raises(GPUConfigError, match="reduce_threads"):
        kernels_of("Softmax", [T(4, 100)], {"axes": [1]}, {"reduce_threads": 2048})
    with pytest.raises(GPUConfigError, match="reduce_threads"):
        kernels_of("ReduceSum", [T(4, 100)], {"axes": [1]}, {"reduce_threads": 0})
    with pytest.raises(GPUConfigError, match="block"):
        kernels_of("MaxPool", [T(1, 4, 10, 10)], POOL_T, {"block": 4096})


def test_one_thread_per_row_is_a_config():
    (serial,) = kernels_of("Softmax", [T(4, 100)], {"axes": [1]}, {"reduce_threads": 1})
    (block,) = kernels_of("Softmax", [T(4, 100)], {"axes": [1]}, {"reduce_threads": 64})
    assert "barrier()" not in kernel_str(serial) and "barrier()" in kernel_str(block)


# ---- every config of a few spaces: PTX and numbers -------------------------------------------
def randn(rng, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# (ONNX op, runtime inputs, ONNX attrs, constants, opset)
NUMERIC = {
    "softmax": ("Softmax", {"x": (3, 150)}, {"axis": -1}, {}, 13),
    "reduce_sum": ("ReduceSum", {"x": (2, 3, 70)}, {"axes": [2], "keepdims": 0}, {}, 11),
    "reduce_columns": ("ReduceMean", {"x": (2, 40, 8)}, {"axes": [1], "keepdims": 1}, {}, 11),
    "argmin": ("ArgMin", {"x": (4, 90)}, {"axis": 1, "keepdims": 0}, {}, 13),
    "layer_norm": (
        "LayerNormalization",
        {"x": (2, 3, 60)},
        {"axis": -1},
        {"s": (60,), "b": (60,)},
        17,
    ),  # fmt: skip
    "global_max": ("GlobalMaxPool", {"x": (1, 3, 9, 9)}, {}, {}, 13),
    "maxpool": ("MaxPool", {"x": (1, 3, 20, 20)}, POOL, {}, 13),
    "avgpool": ("AveragePool", {"x": (1, 4, 10, 10)}, {**POOL, "count_include_pad": 1}, {}, 13),
    "lrn": ("LRN", {"x": (1, 8, 6, 6)}, {"size": 3}, {}, 13),
}


def converted_node(model) -> tuple[Node, list[TensorType]]:
    """The one node of a single-node ONNX model in tvmc's graph, with its input types."""
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (node,) = graph.nodes
    return node, [graph.types[n] for n in node.inputs if n]


@pytest.mark.parametrize("case", NUMERIC)
def test_every_config_assembles_and_computes(case, rng, tmp_path):
    op, shapes, attrs, constant_shapes, opset = NUMERIC[case]
    inputs = {k: randn(rng, *s) for k, s in shapes.items()}
    constants = {k: randn(rng, *s) for k, s in constant_shapes.items()}
    node, types = converted_node(single_node_model(op, inputs, attrs, constants, opset=opset))
    space = OPS[node.op].space(node.attrs, types, CUDA)
    assert len(space) >= 2  # a choice to make
    for index in range(len(space)):
        config = space.get(index).values
        check_lowered(op, inputs, attrs, constants, opset=opset, target=CUDA, config=config,
                      **SUMS)  # fmt: skip
        assemble(kernels_of(node.op, types, dict(node.attrs), config), tmp_path)
