"""Quantization beyond one node against onnxruntime: a whole QDQ model compiled, the variants
onnxruntime lacks (against exact integer numpy), the exact-accumulation rule, the errors a model
can cause, and the CUDA kernels' PTX."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.backend.node_cases import evaluate
from tests.lowering_helpers import run_graph_lowered
from tests.onnx_helpers import int8_beside_uint8, run_onnxruntime, single_node_model
from tests.ops.gpu.test_gpu_ptx import assemble, kernels_of
from tests.ops.kernel_checks import run_direct
from tvmc.errors import ModelError, UnsupportedModelError
from tvmc.frontend import convert_model
from tvmc.graph import TensorType
from tvmc.ops.quantization.common import round_saturate_reference
from tvmc.ops.quantization.integer import accumulation_dtype, offset_bound, weight_sums
from tvmc.passes import IMPORT_PIPELINE, run_passes

U8, I8, I32, F32 = np.uint8, np.int8, np.int32, np.float32


def lowered(op: str, inputs: dict, attrs=None, constants=None, opset: int = 10) -> np.ndarray:
    """One node converted and run through its lowered kernels (no onnxruntime)."""
    model = single_node_model(op, inputs, attrs, constants, 1, opset)
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    return run_graph_lowered(graph, inputs)[graph.outputs[0]]


def value(name: str, dtype, shape) -> helper.ValueInfoProto:
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                         shape)  # fmt: skip


# ---- a whole model -------------------------------------------------------------------------------
def test_qdq_model_compiles_and_matches_onnxruntime(rng):
    """Quantize -> QLinearConv -> Dequantize -> Quantize -> QLinearMatMul -> Dequantize, and
    DynamicQuantizeLinear's three outputs, through fusion, memory planning and native code."""
    init = {
        "s_in": np.array(0.02, F32), "z_in": np.array(128, U8),
        "w": int8_beside_uint8(rng, -127, 128, (6, 3, 3, 3)),
        "ws": rng.uniform(0.001, 0.01, 6).astype(F32), "wz": np.zeros(6, I8),
        "s_mid": np.array(0.05, F32), "z_mid": np.array(10, U8),
        "b": rng.integers(-500, 500, 6).astype(I32),
        "m": int8_beside_uint8(rng, -127, 128, (8, 5)), "ms": np.array(0.01, F32),
        "mz": np.array(0, I8), "s_out": np.array(0.1, F32), "z_out": np.array(3, U8),
    }  # fmt: skip
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["q"]),
        helper.make_node(
            "QLinearConv",
            ["q", "s_in", "z_in", "w", "ws", "wz", "s_mid", "z_mid", "b"],
            ["c"],
            pads=[1, 1, 1, 1],
        ),
        helper.make_node("DequantizeLinear", ["c", "s_mid", "z_mid"], ["d"]),
        helper.make_node("Relu", ["d"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "s_mid", "z_mid"], ["q2"]),
        helper.make_node(
            "QLinearMatMul", ["q2", "s_mid", "z_mid", "m", "ms", "mz", "s_out", "z_out"], ["y"]
        ),
        helper.make_node("DequantizeLinear", ["y", "s_out", "z_out"], ["out"]),
        helper.make_node("DynamicQuantizeLinear", ["x"], ["dq", "dq_scale", "dq_zero"]),
    ]
    outputs = ["y", "out", "dq", "dq_scale", "dq_zero"]
    graph = helper.make_graph(
        nodes, "qdq", [value("x", F32, [2, 3, 4, 8])],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in init.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    x = {"x": (rng.standard_normal((2, 3, 4, 8)) * 2).astype(F32)}
    expected = run_onnxruntime(model, x)
    ours = run_passes(convert_model(model), IMPORT_PIPELINE)
    got = evaluate(ours, x, compiled=True)
    for name, want in zip(outputs, expected):
        np.testing.assert_array_equal(got[name], want, err_msg=name)
        assert got[name].dtype == want.dtype


# ---- what onnxruntime does not run ---------------------------------------------------------------
def test_matmul_integer_per_row_zero_point(rng):
    """A 1-D a_zero_point has one value per row of A (the spec; onnxruntime wants a scalar)."""
    a, b = rng.integers(0, 256, (4, 7)).astype(U8), rng.integers(0, 256, (7, 3)).astype(U8)
    za, zb = rng.integers(0, 256, 4).astype(U8), rng.integers(0, 256, 3).astype(U8)
    got = lowered("MatMulInteger", {"a": a, "b": b, "za": za, "zb": zb})
    want = (a.astype(np.int64) - za[:, None].astype(np.int64)) @ (b.astype(np.int64) - zb)
    np.testing.assert_array_equal(got, want.astype(I32))


def test_conv_integer_per_channel_zero_point_and_int32_wrap(rng):
    """One weight zero point per output channel; then sums past int32 wrap, as int32 sums do."""
    x, w = rng.integers(0, 256, (1, 2, 5, 5)).astype(U8), rng.integers(0, 256, (3, 2, 3, 3))
    w, zw = w.astype(U8), np.array([0, 100, 255], U8)
    got = lowered("ConvInteger", {"x": x, "w": w, "zx": np.array(7, U8), "zw": zw})
    xs, ws = x.astype(np.int64) - 7, w.astype(np.int64) - zw[:, None, None, None]
    windows = np.lib.stride_tricks.sliding_window_view(xs, (3, 3), axis=(2, 3))
    want = np.einsum("nchwij,mcij->nmhw", windows, ws)
    np.testing.assert_array_equal(got, want.astype(I32))
    # 40,000 taps of 255 * 255: 2.6e9 wraps to a negative int32; float64 holds it exactly
    big_x, big_w = np.full((1, 40000, 1, 1), 255, U8), np.full((1, 40000, 1, 1), 255, U8)
    wrapped = lowered("ConvInteger", {"x": big_x}, constants={"w": big_w})
    assert wrapped.item() == np.int64(40000 * 255 * 255).astype(I32)


def test_int32_data_and_output_against_the_reference(rng):
    """int32 data (the spec allows it) and int32 outputs saturating in float64."""
    x = rng.integers(-(1 << 30), 1 << 30, (3, 17)).astype(I32)
    attrs = {"axis": 1, "block_size": 0, "to": "int8", "precision": ""}
    run_direct("QuantizeLinear", attrs, x, np.array(1000.0, F32), np.array(5, I8))
    wide = np.array([3e9, -3e9, 2.5, -2.5, 1.5, np.nan, 2147483647.0], F32)
    out = {**attrs, "to": "int32"}
    run_direct("QuantizeLinear", out, wide, np.array(1.0, F32), np.array(0, I32))
    got = round_saturate_reference(wide.astype(np.float64), None, "int32")
    assert got.tolist() == [2**31 - 1, -(2**31), 2, -2, 2, -(2**31), 2**31 - 1]
    dq = {"axis": 1, "block_size": 0, "to": "float32"}
    run_direct("DequantizeLinear", dq, x, np.array(0.5, F32), np.array(-7, I32))


# ---- exact accumulation --------------------------------------------------------------------------
def test_accumulation_dtype_bounds():
    assert offset_bound("uint8", None) == 255 and offset_bound("int8", None) == 128
    assert offset_bound("uint8", np.array([0, 200], U8)) == 255
    assert offset_bound("int8", np.array(0, I8), runtime=True) == 255
    assert accumulation_dtype(255, None, 258, 255, 0) == "float32"  # 16,776,450 <= 2**24
    assert accumulation_dtype(255, None, 259, 255, 0) == "float64"
    assert accumulation_dtype(128, 1000, 10**9, 255, 1 << 24) == "float64"
    assert accumulation_dtype(255, 60000, 10**9, 255, 0) == "float32"  # constant weights' sums
    with pytest.raises(ValueError, match="not exact"):
        accumulation_dtype(255, None, 1 << 40, 255, 0)
    w = np.array([[[1, -2]], [[-3, 4]]], I8)
    assert weight_sums(w, None) == 7 and weight_sums(w, np.array([-5, 0], I8)) == 9


@pytest.mark.parametrize("channels,dtype", [(16, "float32"), (64, "float64")])
def test_conv_integer_accumulates_in_the_smallest_exact_float(channels, dtype):
    x, w = np.zeros((1, channels, 4, 4), U8), np.zeros((2, channels, 3, 3), U8)
    graph = convert_model(single_node_model("ConvInteger", {"x": x, "w": w}, opset=10))
    (conv,) = [n for n in graph.nodes if n.op == "Conv"]
    assert graph.types[conv.outputs[0]].dtype == dtype  # 16*9*255*255 <= 2**24 < 64*9*255*255


# ---- errors a model can cause --------------------------------------------------------------------
OUTPUTS = {"DynamicQuantizeLinear": 3}  # ops whose schema requires more than one output


def convert(op: str, inputs: dict, attrs=None, opset: int = 21) -> None:
    convert_model(single_node_model(op, inputs, attrs, None, OUTPUTS.get(op, 1), opset))


X, S = np.zeros((2, 6), F32), np.array(0.5, F32)


@pytest.mark.parametrize(
    "op,inputs,attrs,message",
    [
        ("QuantizeLinear", {"x": X, "s": np.ones(5, F32)}, {"axis": 1}, "neither a scalar"),
        ("QuantizeLinear", {"x": X, "s": np.ones((2, 2), F32)}, {"axis": 1, "block_size": 2},
         r"blocked the scale must have shape \[2, 3\]"),
        ("QuantizeLinear", {"x": X, "s": np.ones((2, 3), F32)}, {"axis": 1, "block_size": -1},
         "block_size must be >= 0"),
        ("QuantizeLinear", {"x": X, "s": np.ones(6, F32)}, {"axis": 2}, "axis 2 is out of range"),
        ("QuantizeLinear", {"x": X, "s": S, "z": np.array(0, I8)},
         {"output_dtype": TensorProto.UINT8}, "differs from the zero point"),
        ("QuantizeLinear", {"x": X, "s": S}, {"saturate": 2}, "saturate must be 0 or 1"),
        ("DequantizeLinear", {"x": X, "s": S}, None, "DequantizeLinear's input must be one of"),
        ("DequantizeLinear", {"x": X.astype(I8), "s": S, "z": np.zeros(2, I8)}, None,
         "zero point's shape"),
        ("DynamicQuantizeLinear", {"x": X.astype(np.float16)}, None, "reads float32"),
        ("MatMulInteger", {"a": X.astype(np.int16), "b": X.T.astype(np.int16)}, None,
         "it must be one of int8, uint8"),
        ("MatMulInteger", {"a": X.astype(U8), "b": X.T.astype(U8), "z": np.zeros(3, U8)}, None,
         "does not fit input 0"),
        ("ConvInteger", {"x": np.zeros((1, 2, 4, 4), U8), "w": np.zeros((1, 2, 3, 3), U8),
                         "z": np.zeros(2, U8)}, None, "must be a scalar"),
    ],
)  # fmt: skip
def test_model_errors_name_the_node(op, inputs, attrs, message):
    with pytest.raises(ModelError, match=f"{op} node .*{message}"):
        convert(op, inputs, attrs)


def test_element_types_without_numpy_dtypes_are_unsupported():
    with pytest.raises(UnsupportedModelError, match="output_dtype float8_e4m3fn"):
        convert("QuantizeLinear", {"x": X, "s": S}, {"output_dtype": TensorProto.FLOAT8E4M3FN})
    with pytest.raises(UnsupportedModelError, match="precision bfloat16"):
        convert("QuantizeLinear", {"x": X, "s": S}, {"precision": TensorProto.BFLOAT16}, 25)


# ---- CUDA kernels assemble -----------------------------------------------------------------------
def T(*shape: int, dtype: str = "float32") -> TensorType:
    return TensorType(tuple(shape), dtype)


PTX_CASES = {
    "quantize_axis": ("QuantizeLinear", [T(4, 37), T(37), T(37, dtype="int8")],
                      {"axis": 1, "to": "int8"}),
    "quantize_blocked_f16": ("QuantizeLinear", [T(4, 37, dtype="float16"),
                             T(4, 13, dtype="float16")], {"axis": 1, "block_size": 3,
                                                         "to": "uint16"}),
    "dequantize_int32": ("DequantizeLinear", [T(4, 37, dtype="int32"), T()],
                         {"to": "float16"}),
    "requantize": ("Requantize", [T(8, 9, dtype="int32"), T(9), T(dtype="uint8")], {}),
    "dynamic_params": ("DynamicQuantizeParams", [T(), T()], {}),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(PTX_CASES))
def test_cuda_kernels_assemble(case, tmp_path):
    op, types, attrs = PTX_CASES[case]
    assemble(kernels_of(op, types, attrs, constant_from=len(types)), tmp_path)
