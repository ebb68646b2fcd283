"""Whole graphs through fusion, lowering, memory planning, one entry function and the executor."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tvmc.codegen import CPUTarget, load_jit, load_shared
from tvmc.driver.compiler import CompileOptions, build
from tvmc.frontend import convert_model
from tvmc.graph import Graph, Node
from tvmc.lower.fuse import MAX_INLINED_DEPTH
from tvmc.lower.lower import lower_kernels
from tvmc.ops import run_reference
from tvmc.ops.conv.cpu import geometry_of, plan
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes
from tvmc.runtime import Executor, ProgramInfo


def model_of(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def compile_and_run(model: onnx.ModelProto, inputs: dict, jit: bool = False, **options):
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    result = build(graph, CompileOptions(**options))
    program = result.lowered.program
    info = ProgramInfo.of(program)
    module = (load_jit if jit else load_shared)(result.artifact)
    executor = Executor(module, info, result.lowered.param_values)
    executor.set_inputs([inputs[n] for n in graph.inputs])
    outputs = executor.run()
    expected = run_reference(graph, inputs)
    return result, dict(zip(graph.outputs, outputs)), expected


def test_elementwise_chain_fuses_into_one_kernel(rng):
    nodes = [
        helper.make_node("Add", ["x", "b"], ["t1"]),
        helper.make_node("Relu", ["t1"], ["t2"]),
        helper.make_node("Sigmoid", ["t2"], ["y"]),
    ]
    b = rng.standard_normal((8,)).astype(np.float32)
    model = model_of(nodes, [("x", [4, 8])], ["y"], [("b", b)])
    x = rng.standard_normal((4, 8)).astype(np.float32)
    result, got, want = compile_and_run(model, {"x": x})
    assert len(result.lowered.program.kernels) == 1
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("opt_level", [0, 3])
def test_reshape_views_outputs_and_memory_reuse(rng, jit, opt_level):
    shape = [1, 2, 3, 40]
    nodes = [
        helper.make_node("Exp", ["x"], ["e"]),
        helper.make_node("Reshape", ["e", "s"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
        helper.make_node("Neg", ["t"], ["n"]),
        helper.make_node("Mul", ["n", "n"], ["y"]),
        helper.make_node("Identity", ["x"], ["x_again"]),
        helper.make_node("Flatten", ["y"], ["z"], axis=0),
    ]
    s = np.array([6, 40], np.int64)
    model = model_of(nodes, [("x", shape)], ["y", "x_again", "r", "z"], [("s", s)])
    x = rng.standard_normal(shape).astype(np.float32)
    result, got, want = compile_and_run(model, {"x": x}, jit=jit, opt_level=opt_level)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6, err_msg=name)
    program = result.lowered.program
    assert program.workspace_bytes <= program.naive_bytes


def test_epilogue_reading_a_tensor_computed_after_the_anchor(rng):
    """ResNet's residual: the main conv comes first, the shortcut conv it adds comes later."""
    w1 = (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["main"]),
        helper.make_node("Conv", ["x", "w2"], ["shortcut"]),
        helper.make_node("Sum", ["main", "shortcut"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    model = model_of(nodes, [("x", [1, 8, 5, 5])], ["y"], [("w1", w1), ("w2", w2)])
    x = rng.standard_normal((1, 8, 5, 5)).astype(np.float32)
    result, got, want = compile_and_run(model, {"x": x})
    assert [c.node.split("+")[1:] for c in result.lowered.program.calls][-1] == ["Sum", "Relu"]
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)


def conv_add_relu(
    rng: np.random.Generator, x_shape: list[int], w: np.ndarray, other: tuple[int, ...],
    **conv_attrs: object,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray], Graph, Node, bool]:  # fmt: skip
    """Conv(x, w) + b, then Relu, b of shape `other` (a model input when 4-D, else a constant):
    the model, its feeds, the imported graph, the conv, and whether the fused epilogue may be
    applied at flat plane positions (`Epilogue.flat_planes`)."""
    b = rng.standard_normal(other).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], **conv_attrs),
        helper.make_node("Add", ["c", "b"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    inputs = [("x", x_shape)] + ([("b", list(other))] if len(other) == 4 else [])
    constants = [("w", w)] + ([] if len(other) == 4 else [("b", b)])
    model = model_of(nodes, inputs, ["y"], constants)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32), "b": b}
    feeds = {name: feeds[name] for name, _ in inputs}
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    state = lower_kernels(graph)
    ((anchor, chain),) = state.plan.epilogues.items()
    conv = next(n for n in graph.nodes if n.name == anchor)
    return model, feeds, graph, conv, state.epilogue(conv, chain).flat_planes


@pytest.mark.parametrize(
    "other,flat",
    [
        ((1, 16, 11, 13), True),  # a residual with the output's planes, read from memory
        ((16, 1, 1), True),  # a scale per channel: constant over the planes
        ((11, 13), True),  # one plane for every channel
        ((1, 1, 1, 13), False),  # a row for every row: differs along the flattened planes
        ((1, 1, 11, 1), False),
    ],
)  # fmt: skip
def test_pointwise_conv_tiles_run_across_rows_where_the_epilogue_allows(rng, other, flat):
    """A 1x1 conv's tiles read its 11 x 13 planes as one row of 143 (on AVX-512 and AVX2 its
    tiles fill more lanes so; they cross rows) where every tensor its epilogue reads is
    constant over the planes or has them whole; else row by row."""
    w = (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(np.float32)
    model, feeds, graph, conv, flat_planes = conv_add_relu(rng, [1, 8, 11, 13], w, other)
    assert flat_planes == flat
    types = [graph.types[name] for name in conv.inputs]
    avx2 = ["llvm -mcpu=znver3"] if CPUTarget.host().vector_bits >= 256 else []
    for target in ["llvm -mcpu=skylake-avx512", *avx2]:
        lowering = LoweringTarget.of_cpu(CPUTarget.parse(target), 2)
        assert geometry_of("Conv", conv.attrs, types, lowering).out_shape == (143,)
        if target.endswith("avx512") and CPUTarget.host().vector_bits < 512:
            continue  # AVX-512 code does not run here
        result, got, want = compile_and_run(model, feeds, target=target)
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5, err_msg=target)


def test_strided_pointwise_conv_tiles_read_the_compact_planes_as_one_row(rng):
    """A 1x1 stride-2 conv's input transform keeps every other row and column: 11 x 13 compact
    planes, which its tiles read as one row of 143 (`ConvGeometry.flattened`), the residual
    add and Relu fused at the same flat positions."""
    w = (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]),
        helper.make_node("Add", ["c", "r"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    model = model_of(nodes, [("x", [1, 8, 22, 26]), ("r", [1, 16, 11, 13])], ["y"], [("w", w)])
    feeds = {"x": rng.standard_normal((1, 8, 22, 26)).astype(np.float32),
             "r": rng.standard_normal((1, 16, 11, 13)).astype(np.float32)}  # fmt: skip
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    conv = next(n for n in graph.nodes if n.op == "Conv")
    types = [graph.types[name] for name in conv.inputs]
    avx2 = ["llvm -mcpu=znver3"] if CPUTarget.host().vector_bits >= 256 else []
    for target in ["llvm -mcpu=skylake-avx512", *avx2]:
        lowering = LoweringTarget.of_cpu(CPUTarget.parse(target), 2)
        geo = geometry_of("Conv", conv.attrs, types, lowering)
        assert geo.out_shape == (143,) and geo.transformed_from is not None
        assert geo.transformed_from.strides == (2, 2)
        if target.endswith("avx512") and CPUTarget.host().vector_bits < 512:
            continue  # AVX-512 code does not run here
        result, got, want = compile_and_run(model, feeds, target=target)
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5, err_msg=target)


@pytest.mark.skipif(CPUTarget.host().vector_bits < 256, reason="AVX2 code does not run here")
@pytest.mark.parametrize(
    "other,flat",
    [
        ((1, 96, 7, 7), True),  # a residual with the output's planes
        ((96, 1, 1), True),  # a scale per channel
        ((1, 1, 1, 7), False),  # a row for every row: its tiles stay within rows
    ],
)  # fmt: skip
def test_channel_tiles_run_through_rows_where_the_epilogue_allows(rng, other, flat):
    """A 3x3/2 conv onto 7x7 planes as AVX2 code: 4-pixel channel tiles run on through the
    rows (49 of 52 pixels useful against 7 of 8) where its epilogue can be applied at flat
    plane positions, else row by row; either way the fused result is the model's."""
    w = (rng.standard_normal((96, 64, 3, 3)) * 0.1).astype(np.float32)
    model, feeds, graph, conv, epilogue_flat = conv_add_relu(
        rng, [1, 64, 14, 14], w, other, strides=[2, 2], pads=[1, 1, 1, 1]
    )
    assert epilogue_flat == flat
    avx2 = CPUTarget.parse("llvm -mcpu=znver3")
    lowering = LoweringTarget.of_cpu(avx2, 2)
    geo = geometry_of("Conv", conv.attrs, [graph.types[name] for name in conv.inputs], lowering)
    chosen = plan({}, geo, 8, avx2.vector_registers, flat_rows=epilogue_flat)
    assert (chosen.schedule, chosen.tiling.mr, chosen.tiling.flat) == ("channels", 4, flat)
    result, got, want = compile_and_run(model, feeds, target="llvm -mcpu=znver3")
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_parallel_codegen_merges_into_one_object(rng, jit):
    """Enough kernels to compile in two processes; the merged object loads both ways."""
    ops = ["Exp", "Neg", "Sigmoid", "Tanh", "Abs", "Sqrt", "Relu", "Floor", "Ceil", "Exp"]
    nodes = [helper.make_node(op, [f"t{i}"], [f"t{i + 1}"]) for i, op in enumerate(ops)]
    model = model_of(nodes, [("t0", [3, 1000])], [f"t{len(ops)}"])
    x = rng.standard_normal((3, 1000)).astype(np.float32)
    result, got, want = compile_and_run(model, {"t0": x}, jit=jit, opt_level=0, codegen_jobs=2)
    program = result.lowered.program
    assert len(program.kernels) == len(set(ops)) and len(program.calls) == len(ops)  # shared
    assert result.artifact._module is None  # built from merged parts
    name = f"t{len(ops)}"
    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("jobs", [3, 5])
def test_objects_of_many_processes_merge_right_for_mcjit(rng, jobs):
    """Every part numbers its constant-pool labels from 0 (.LCPI0_0); MCJIT bound each such
    relocation to one part's label, so from 3 processes on the merged mod.o read another
    kernel's constants (Exp gave -2.2e-12 for 1.134) while mod.so was right."""
    ops = ["Exp", "Neg", "Sigmoid", "Tanh", "Abs", "Sqrt", "Relu", "Floor", "Ceil", "Erf"]
    nodes = [helper.make_node(op, [f"t{i}"], [f"t{i + 1}"]) for i, op in enumerate(ops)]
    model = model_of(nodes, [("t0", [3, 1000])], [f"t{len(ops)}"])
    x = rng.standard_normal((3, 1000)).astype(np.float32)
    result, got, want = compile_and_run(model, {"t0": x}, jit=True, opt_level=0,
                                        codegen_jobs=jobs)  # fmt: skip
    assert result.artifact._module is None  # merged from the processes' parts
    name = f"t{len(ops)}"
    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_a_100_deep_relu_add_chain_compiles_and_matches_numpy(rng):
    # Relu is select(x < 0, 0, x): x read twice, so a fused kernel's value is a DAG of 2**64
    # tree nodes; every pass visits it as the DAG (tests/kernel/test_visitor.py counts visits).
    nodes = [
        helper.make_node("Relu", [f"t{k}"], [f"t{k + 1}"])
        if k % 2 == 0
        else helper.make_node("Add", [f"t{k}", "b"], [f"t{k + 1}"])
        for k in range(100)
    ]
    b = (rng.standard_normal((8,)) * 0.1).astype(np.float32)
    model = model_of(nodes, [("t0", [4, 8])], ["t100"], [("b", b)])
    x = rng.standard_normal((4, 8)).astype(np.float32)
    result, got, want = compile_and_run(model, {"t0": x})
    kernels = len(result.lowered.program.kernels)  # (a failing assert must not print the DAG)
    assert kernels == -(-100 // MAX_INLINED_DEPTH)  # a stored tensor every MAX_INLINED_DEPTH ops
    expected = x
    for k in range(100):
        expected = np.maximum(expected, 0) if k % 2 == 0 else expected + b
    np.testing.assert_allclose(got["t100"], want["t100"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["t100"], expected, rtol=1e-5, atol=1e-5)
