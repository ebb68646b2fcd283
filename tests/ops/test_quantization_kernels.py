"""Quantization ops lowered and compiled natively (a few interpreted, one CUDA-interpreted case
per op), against onnxruntime.

Every integer output must match bit for bit (check compares integers exactly), float outputs
too (EXACT): each lowering does onnxruntime's arithmetic in its order and precision. Data holds
exact ties (x / scale = k + 0.5) and values past the output range, so a rounding that is not
half-to-even or a saturation that wraps shows.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import run_graph_lowered
from tests.onnx_helpers import int8_beside_uint8, single_node_model
from tests.ops.kernel_checks import check
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes

CUDA = LoweringTarget(kind="cuda")
EXACT = {"rtol": 0.0, "atol": 0.0}
F32, F16 = np.float32, np.float16
U8, I8, I16, U16, I32 = np.uint8, np.int8, np.int16, np.uint16, np.int32
INT8, FLOAT16 = 3, 10  # ONNX element type codes


def scalar(value, dtype) -> np.ndarray:
    return np.array(value, dtype)


def ties(rng, shape, scale: float, dtype=F32, span: int = 300) -> np.ndarray:
    """Data whose quotients by `scale` are halves (ties), integers and others, in [-span, span]
    (past the 8-bit ranges by default)."""
    halves = rng.integers(-span, span, shape) + rng.choice([0.5, 0.0, 0.25, 0.75], shape)
    return (halves * scale).astype(dtype)


def small_ints(rng, dtype, shape, beside=None) -> np.ndarray:
    """Random `dtype` integers over its whole range; int8 data to multiply with uint8 data
    (`beside`) stays where onnxruntime sums such products exactly on this host."""
    info = np.iinfo(dtype)
    if dtype == I8 and beside == U8:
        return int8_beside_uint8(rng, info.min, int(info.max) + 1, shape)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


# ---- QuantizeLinear ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [U8, I8, I16, U16])
@pytest.mark.parametrize("runtime_params", [False, True])
def test_quantize_per_tensor(dtype, runtime_params, rng):
    x = ties(rng, (3, 5, 37), 0.5, span=300 if np.iinfo(dtype).bits == 8 else 80000)
    x[0, 0, :4] = [np.inf, -np.inf, np.nan, 0.0]  # NaN: the range's minimum, as onnxruntime
    params = {"scale": scalar(0.5, F32), "zero_point": scalar(np.iinfo(dtype).max // 3, dtype)}
    inputs, constants = ({"x": x, **params}, None) if runtime_params else ({"x": x}, params)
    check("QuantizeLinear", inputs, constants=constants, opset=21, **EXACT)


@pytest.mark.parametrize("opset", [10, 13, 19])
def test_quantize_older_opsets_and_default_uint8(opset, rng):
    x = ties(rng, (4, 33), 0.25)
    check("QuantizeLinear", {"x": x}, constants={"s": scalar(0.25, F32)}, opset=opset, **EXACT)
    zp = np.array([-3], I8)  # a 1-element vector beside a scalar scale: per tensor too
    check("QuantizeLinear", {"x": x, "s": scalar(0.25, F32), "z": zp}, opset=opset, **EXACT)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_per_axis(axis, rng):
    x = ties(rng, (4, 3, 18), 0.125)
    n = x.shape[axis]
    scale = rng.choice([0.125, 0.25, 0.5, 2.0], n).astype(F32)
    zero = rng.integers(-20, 20, n).astype(I8)
    attrs = {"axis": axis}
    check("QuantizeLinear", {"x": x, "s": scale, "z": zero}, attrs, opset=13, **EXACT)
    check("QuantizeLinear", {"x": x}, attrs, {"s": scale, "z": zero}, opset=13, **EXACT)


@pytest.mark.parametrize("block,length", [(2, 6), (3, 7), (4, 4)])
def test_quantize_blocked(block, length, rng):
    x = ties(rng, (2, length, 5), 0.25)
    blocks = -(-length // block)
    scale = rng.choice([0.25, 0.5, 1.0], (2, blocks, 5)).astype(F32)
    zero = rng.integers(0, 255, (2, blocks, 5)).astype(U8)
    attrs = {"axis": 1, "block_size": block}
    check("QuantizeLinear", {"x": x, "s": scale, "z": zero}, attrs, opset=21, **EXACT)
    check("QuantizeLinear", {"x": x, "s": scale}, attrs, opset=21, **EXACT)  # symmetric: uint8


def test_quantize_float16_output_dtype_and_precision(rng):
    """float16 data and scales divide in float32 (onnxruntime's choice), unless precision says
    float16; output_dtype without a zero point."""
    x = ties(rng, (3, 41), 0.37, F16, span=1000)
    scale = scalar(0.37, F16)
    check("QuantizeLinear", {"x": x, "s": scale, "z": scalar(5, I8)}, opset=21, **EXACT)
    check("QuantizeLinear", {"x": x, "s": scale}, {"output_dtype": INT8}, opset=21, **EXACT)
    for precision in (1, FLOAT16):  # float32, float16
        attrs = {"precision": precision}
        check("QuantizeLinear", {"x": x, "s": scale, "z": scalar(0, I16)}, attrs, opset=25,
              **EXACT)  # fmt: skip
    check("QuantizeLinear", {"x": x, "s": scalar(0.37, F32)}, opset=25, **EXACT)  # mixed types


# ---- DequantizeLinear ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [U8, I8, I16, U16, I32])
def test_dequantize_per_tensor(dtype, rng):
    x = small_ints(rng, dtype, (3, 37))
    zero = scalar(0 if dtype == I32 else np.iinfo(dtype).max // 5, dtype)  # int32: no offset
    check("DequantizeLinear", {"x": x, "s": scalar(0.037, F32), "z": zero}, opset=21, **EXACT)
    check("DequantizeLinear", {"x": x}, constants={"s": scalar(0.5, F32)}, opset=21, **EXACT)


def test_dequantize_per_axis_blocked_and_float16(rng):
    x = small_ints(rng, I8, (4, 6, 7))
    scale, zero = rng.random(6).astype(F32), rng.integers(-9, 9, 6).astype(I8)
    check("DequantizeLinear", {"x": x, "s": scale, "z": zero}, {"axis": 1}, opset=13, **EXACT)
    check("DequantizeLinear", {"x": x, "s": scale.astype(F16)}, {"axis": 1}, opset=21, **EXACT)
    blocked = rng.random((4, 6, 3)).astype(F32)
    attrs = {"axis": 2, "block_size": 3}
    zb = rng.integers(-9, 9, (4, 6, 3)).astype(I8)
    check("DequantizeLinear", {"x": x, "s": blocked, "z": zb}, attrs, opset=21, **EXACT)
    out16 = {"output_dtype": FLOAT16}
    check("DequantizeLinear", {"x": x, "s": scalar(0.3, F32)}, out16, opset=23, **EXACT)


# ---- DynamicQuantizeLinear -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mixed", "positive", "negative", "zeros", "ties"])
def test_dynamic_quantize(kind, rng):
    x = rng.standard_normal((3, 4, 37)).astype(F32) * 3
    if kind == "positive":
        x = np.abs(x) + 1
    elif kind == "negative":
        x = -np.abs(x) - 1
    elif kind == "zeros":
        x = np.zeros_like(x)  # an empty range: scale 1
    elif kind == "ties":  # range [-255, 0]: scale 1, every half a tie
        x = (rng.integers(-510, 1, x.shape) / 2).astype(F32)
        x.flat[0] = -255.0
    check("DynamicQuantizeLinear", {"x": x}, num_outputs=3, opset=11,
          expect="DynamicQuantizeParams", **EXACT)  # fmt: skip


# ---- MatMulInteger / QLinearMatMul ---------------------------------------------------------------
@pytest.mark.parametrize("a_type,b_type", [(U8, U8), (U8, I8), (I8, I8), (I8, U8)])
def test_matmul_integer(a_type, b_type, rng):
    a, b = small_ints(rng, a_type, (5, 300)), small_ints(rng, b_type, (300, 9), a_type)
    za, zb = small_ints(rng, a_type, ()), small_ints(rng, b_type, (9,))  # b: per column
    check("MatMulInteger", {"a": a, "b": b, "za": za, "zb": zb}, opset=10, expect="MatMul")
    check("MatMulInteger", {"a": a}, constants={"b": b}, opset=10, expect="MatMul")


def test_matmul_integer_uint8_by_int8_is_exact_past_int16_pairs(rng):
    """Full-range uint8 x int8, whose pairs of products pass int16 (where onnxruntime without
    VNNI saturates them), summed exactly: against tvmc's int64 reference, not onnxruntime."""
    a, b = small_ints(rng, U8, (5, 300)), small_ints(rng, I8, (300, 9))
    a[0], b[:, 0] = 255, 127
    za, zb = scalar(3, U8), scalar(-2, I8)
    model = single_node_model("MatMulInteger", {"a": a, "b": b, "za": za, "zb": zb}, opset=10)
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    (got,) = run_graph_lowered(graph, {"a": a, "b": b, "za": za, "zb": zb}).values()
    want = (a.astype(np.int64) - 3) @ (b.astype(np.int64) + 2)
    np.testing.assert_array_equal(got, want)


def test_matmul_integer_batched_and_extreme(rng):
    """All-255 operands over K = 1000 (sums near 6.5e7) and batch broadcasting."""
    a, b = np.full((2, 3, 1000), 255, U8), np.full((1000, 4), 255, U8)
    check("MatMulInteger", {"a": a, "b": b}, opset=10, expect="MatMul")
    a, b = small_ints(rng, I8, (2, 3, 4, 16)), small_ints(rng, I8, (3, 16, 5))
    check("MatMulInteger", {"a": a, "b": b, "za": scalar(-7, I8)}, opset=10, expect="MatMul")


@pytest.mark.parametrize("a_type,b_type,y_type", [(U8, U8, U8), (U8, I8, U8), (I8, I8, I8)])
@pytest.mark.parametrize("scale_type", [F32, F16])
def test_qlinear_matmul(a_type, b_type, y_type, scale_type, rng):
    a, b = small_ints(rng, a_type, (2, 6, 70)), small_ints(rng, b_type, (70, 11), a_type)
    inputs = {
        "a": a, "a_scale": scalar(0.0213, scale_type), "a_zero": small_ints(rng, a_type, ()),
        "b": b, "b_scale": rng.uniform(0.01, 0.03, 11).astype(scale_type),
        "b_zero": small_ints(rng, b_type, (11,)) if b_type == U8 else np.zeros(11, I8),
        "y_scale": scalar(0.37, scale_type), "y_zero": small_ints(rng, y_type, ()),
    }  # fmt: skip
    check("QLinearMatMul", inputs, opset=21 if scale_type == F16 else 10, expect="Requantize")


def test_qlinear_matmul_ties():
    """Multiplier 0.5: every odd sum is a tie, rounded to even; sums past 255 saturate."""
    a = np.arange(64, dtype=U8).reshape(8, 8)
    b = np.eye(8, dtype=U8) * 7
    ones = scalar(1.0, F32)
    inputs = {"a": a, "as": ones, "az": scalar(0, U8), "b": b, "bs": ones, "bz": scalar(0, U8),
              "ys": scalar(2.0, F32), "yz": scalar(3, U8)}  # fmt: skip
    check("QLinearMatMul", inputs, opset=10, expect="Requantize")


# ---- ConvInteger / QLinearConv -------------------------------------------------------------------
CONV_ATTRS = [
    {},
    {"pads": [1, 1, 1, 1]},
    {"pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 2]},
    {"auto_pad": "SAME_UPPER", "group": 2},
]


@pytest.mark.parametrize("attrs", CONV_ATTRS)
@pytest.mark.parametrize("x_type,w_type", [(U8, U8), (U8, I8), (I8, I8)])
def test_conv_integer(attrs, x_type, w_type, rng):
    x, w = small_ints(rng, x_type, (1, 4, 7, 8)), small_ints(rng, w_type, (6, 4 // attrs.get(
        "group", 1), 3, 3))  # fmt: skip
    zx, zw = small_ints(rng, x_type, ()), small_ints(rng, w_type, ())
    check("ConvInteger", {"x": x, "w": w, "zx": zx, "zw": zw}, attrs, opset=10, expect="Conv")
    check("ConvInteger", {"x": x}, attrs, {"w": w}, opset=10, expect="Conv")


def test_conv_integer_wide_sums_accumulate_in_float64(rng):
    """576 products of up to 255 * 255 with runtime weights: past 2**24, so float64 (exact)."""
    x, w = np.full((1, 64, 5, 5), 255, U8), small_ints(rng, U8, (4, 64, 3, 3))
    w[0] = 255
    check("ConvInteger", {"x": x, "w": w, "zx": scalar(0, U8)}, {"pads": [1, 1, 1, 1]},
          opset=10, expect="Conv")  # fmt: skip


@pytest.mark.parametrize("attrs", CONV_ATTRS[1:])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(attrs, per_channel, rng):
    groups = attrs.get("group", 1)
    x, w = small_ints(rng, U8, (2, 4, 6, 9)), small_ints(rng, I8, (6, 4 // groups, 3, 3), U8)
    w_scale = rng.uniform(0.002, 0.01, 6 if per_channel else ()).astype(F32)
    inputs = {"x": x, "xs": scalar(0.05, F32), "xz": scalar(128, U8)}
    params = {"w": w, "ws": w_scale, "wz": np.zeros(w_scale.shape, I8),
              "ys": scalar(0.09, F32), "yz": scalar(100, U8),
              "b": rng.integers(-3000, 3000, 6).astype(I32)}  # fmt: skip
    check("QLinearConv", inputs, attrs, params, opset=10, expect="Requantize")
    check("QLinearConv", {**inputs, **params}, attrs, opset=10, expect="Requantize")


# ---- CUDA lowerings through the interpreter (GPU thread semantics) -------------------------------
def test_cuda_quantize_dequantize(rng):
    x = ties(rng, (2, 3, 37), 0.5)
    scale, zero = rng.choice([0.5, 0.25], 3).astype(F32), rng.integers(-9, 9, 3).astype(I8)
    check("QuantizeLinear", {"x": x, "s": scale, "z": zero}, opset=13, target=CUDA, **EXACT)
    blocked = rng.choice([0.5, 0.25], (2, 3, 13)).astype(F32)
    attrs = {"axis": -1, "block_size": 3}
    check("QuantizeLinear", {"x": x, "s": blocked}, attrs, opset=21, target=CUDA, **EXACT)
    q = small_ints(rng, U16, (2, 3, 37))
    check("DequantizeLinear", {"x": q, "s": scale, "z": zero.astype(U16) + 9}, {"axis": 1},
          opset=21, target=CUDA, **EXACT)  # fmt: skip


def test_cuda_dynamic_quantize(rng):
    x = rng.standard_normal((4, 37)).astype(F32)
    check("DynamicQuantizeLinear", {"x": x}, num_outputs=3, opset=11, target=CUDA,
          expect="DynamicQuantizeParams", **EXACT)  # fmt: skip


def test_cuda_integer_matmuls(rng):
    a, b = small_ints(rng, U8, (5, 40)), small_ints(rng, I8, (40, 7), U8)
    za, zb = scalar(9, U8), scalar(0, I8)
    check("MatMulInteger", {"a": a, "b": b, "za": za, "zb": zb}, opset=10, target=CUDA,
          expect="MatMul")  # fmt: skip
    inputs = {"a": a, "as": scalar(0.02, F32), "az": za, "b": b, "bs": scalar(0.03, F32),
              "bz": zb, "ys": scalar(0.1, F32), "yz": scalar(7, U8)}  # fmt: skip
    check("QLinearMatMul", inputs, opset=10, target=CUDA, expect="Requantize")


def test_cuda_integer_convs(rng):
    x, w = small_ints(rng, U8, (1, 4, 6, 6)), small_ints(rng, U8, (3, 4, 3, 3))
    attrs = {"pads": [1, 1, 1, 1]}
    check("ConvInteger", {"x": x, "w": w, "zx": scalar(100, U8)}, attrs, opset=10,
          target=CUDA, expect="Conv")  # fmt: skip
    inputs = {"x": x, "xs": scalar(0.05, F32), "xz": scalar(100, U8), "w": w.astype(I8) // 2,
              "ws": scalar(0.01, F32), "wz": scalar(0, I8), "ys": scalar(0.2, F32),
              "yz": scalar(9, U8)}  # fmt: skip
    check("QLinearConv", inputs, attrs, opset=10, target=CUDA, expect="Requantize")
