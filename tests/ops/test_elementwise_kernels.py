"""Elementwise and broadcasting computes, compiled natively (a few interpreted), vs onnxruntime.

Tolerances: float32 rtol 1e-5, atol 1e-6 for every op. The transcendental ones (exp, log, tanh,
erf, sigmoid and what builds on them) run codegen's float32 polynomials; measured against
onnxruntime over [-30, 30] plus normal samples, the worst case needs rtol 1.2e-7 (Exp) at atol
1e-6, so the default tolerance holds with margin.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import run_node
from tests.onnx_helpers import onnx_type, single_node_model
from tests.ops.kernel_checks import check, run_direct
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.graph import Node, TensorType
from tvmc.ops.lowering import LoweringTarget

F32 = np.float32


# ---- unary ---------------------------------------------------------------------------------------
UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Erf", "HardSwish", "Softplus"]
UNARY += ["Floor", "Ceil"]
POSITIVE = ["Sqrt", "Log", "Reciprocal"]


@pytest.mark.parametrize("op", UNARY + POSITIVE)
@pytest.mark.parametrize("shape", [(2, 3, 37), ()])  # 37: vector body and scalar tail
def test_unary(op, shape, rng):
    x = (rng.standard_normal(shape) * 3).astype(F32)
    if op in POSITIVE:
        x = np.abs(x) + F32(0.1)
    check(op, {"x": x})


def test_unary_wide_range(rng):
    """Saturation and overflow regions of the polynomial functions."""
    x = np.linspace(-60, 60, 301, dtype=F32)
    for op in ["Sigmoid", "Tanh", "Erf", "Softplus", "Exp", "Elu"]:
        check(op, {"x": x})
    for approximate in ["none", "tanh"]:  # tanh: 1 + tanh(z) would cancel for x << 0
        check("Gelu", {"x": x / F32(2)}, {"approximate": approximate}, opset=20)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("LeakyRelu", {}),
        ("LeakyRelu", {"alpha": 0.3}),
        ("Elu", {"alpha": 0.5}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("Gelu", {}),
        ("Gelu", {"approximate": "tanh"}),
    ],
)
def test_unary_with_attributes(op, attrs, rng):
    x = (rng.standard_normal((3, 40)) * 3).astype(F32)
    check(op, {"x": x}, attrs, opset=20 if op == "Gelu" else 17)


@pytest.mark.parametrize("op", ["Neg", "Abs"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_unary_integer(op, dtype, rng):
    check(op, {"x": rng.integers(-50, 50, (4, 33)).astype(dtype)})


def test_unary_interpreted(rng):
    x = rng.standard_normal((3, 36)).astype(F32)
    for op in ["Relu", "Sigmoid", "HardSwish", "Softplus"]:
        check(op, {"x": x}, use_interpreter=True)


@pytest.mark.parametrize("opset", [7, 13])
def test_clip(opset, rng):
    x = (rng.standard_normal((4, 35)) * 4).astype(F32)
    if opset < 11:
        check("Clip", {"x": x}, {"min": -1.0, "max": 2.0}, opset=opset)
        return
    bounds = {"lo": np.array(-1.0, F32), "hi": np.array(2.0, F32)}
    check("Clip", {"x": x}, constants=bounds, opset=opset)
    check("Clip", {"x": x}, constants={"hi": bounds["hi"]}, input_order=["x", "", "hi"],
          opset=opset)  # fmt: skip
    ints = rng.integers(-9, 9, (3, 5)).astype(np.int32)
    lo = {"lo": np.array(-2, np.int32)}
    check("Clip", {"x": ints}, constants=lo, input_order=["x", "lo"], opset=opset)


@pytest.mark.parametrize(
    "source,target",
    [
        (F32, np.int64),  # truncation toward zero
        (F32, np.int32),
        (F32, np.bool_),
        (F32, np.float64),
        (F32, np.float16),
        (np.int64, F32),
        (np.int64, np.int32),
        (np.int32, np.bool_),
        (np.bool_, F32),
        (np.bool_, np.int64),
    ],
)
def test_cast(source, target, rng):
    x = rng.standard_normal((3, 34)) * 10
    x[0, :4] = [0.0, -0.0, 2.5, -2.5]
    check("Cast", {"x": x.astype(source)}, {"to": onnx_type(target)})


# ---- binary and n-ary ----------------------------------------------------------------------------
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "LessOrEqual"]
BINARY += ["GreaterOrEqual"]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize(
    "shapes", [((2, 3, 40), (2, 3, 40)), ((4, 1, 5), (3, 1)), ((5,), ()), ((2, 40), (40,))]
)
def test_binary_broadcast(op, shapes, rng):
    a = rng.standard_normal(shapes[0]).astype(F32)
    b = rng.standard_normal(shapes[1]).astype(F32)
    if op == "Pow":
        a = np.abs(a) + F32(0.5)
    if op.endswith("Equal"):  # make ties happen
        b = np.round(b).astype(F32)
        a = np.round(a).astype(F32)
    check(op, {"a": a, "b": b})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_binary_integer(op, dtype, rng):
    a = rng.integers(-20, 20, (3, 33)).astype(dtype)
    b = rng.integers(1, 7, (33,)).astype(dtype) * np.where(np.arange(33) % 2, 1, -1).astype(dtype)
    check(op, {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_truncates(dtype):
    a = np.array([7, -7, 7, -7, 0, 9], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, -4], dtype=dtype)
    check("Div", {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_division_does_not_trap(dtype):
    """A zero divisor counts as 1 (the reference's rule) instead of raising SIGFPE."""
    a = np.arange(0, 40).astype(dtype)
    b = np.where(np.arange(40) % 3 == 0, 0, 3).astype(dtype)
    run_direct("Div", {}, a, b)


def test_integer_min_divided_by_minus_one_wraps():
    """MIN / -1 overflows (x86 traps on it); it wraps to MIN like numpy's integer negation."""
    low = np.iinfo(np.int32).min
    a = np.array([low, low + 1, 7, -7, 0] * 8, np.int32)
    b = np.array([-1, -1, -1, -1, -1] * 8, np.int32)
    (y,) = run_node(Node("Div", ["a", "b"], ["y"]), [a, b], [TensorType.of(a)])
    np.testing.assert_array_equal(y, np.negative(a))


@pytest.mark.parametrize("op", ["And", "Or", "Equal"])
def test_logical(op, rng):
    a = rng.standard_normal((3, 40)) > 0
    b = rng.standard_normal((40,)) > 0
    check(op, {"a": a, "b": b})
    check("Not", {"a": a})


@pytest.mark.parametrize("exponent", [2.0, 0.5, 3.0, -1.0, 1.0])
def test_pow_constant_exponent(exponent, rng):
    x = np.abs(rng.standard_normal((2, 37))).astype(F32) + F32(0.1)
    check("Pow", {"x": x}, constants={"e": np.array(exponent, F32)})


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -1.0, 1.0])
def test_pow_common_constant_exponents_need_no_pow_call(exponent):
    """x**2 (decomposed norms) and x**3 (tanh GELU) are products, never the general pow."""
    from tvmc.graph import TensorType
    from tvmc.kernel import Buffer, Var
    from tvmc.ops import OPS
    from tvmc.ops.lowering import ref_of_buffer

    typ = TensorType((4,), "float32")
    x = ref_of_buffer("x", typ, Buffer("x", (4,), "float32"))
    e = np.array(exponent, F32)
    e_ref = ref_of_buffer("e", TensorType((), "float32"), Buffer("e", (), "float32"), e)
    (read,) = OPS["Pow"].compute("cpu")({}, [x, e_ref], [typ])
    assert "pow" not in str(read((Var("i", "int64"),)))


def test_pow_mixed_dtypes(rng):
    x = (rng.standard_normal((2, 35)) * 2).astype(F32)
    check("Pow", {"x": x}, constants={"e": np.array(3, np.int64)})
    check("Pow", {"x": x, "e": rng.integers(0, 4, (35,)).astype(np.int32)})
    base = rng.integers(-5, 5, (2, 35)).astype(np.int64)
    check("Pow", {"x": base}, constants={"e": np.array(2, np.int64)})
    check("Pow", {"x": base.astype(np.int32), "e": rng.integers(0, 5, (35,)).astype(np.int32)})


def test_prelu(rng):
    x = rng.standard_normal((2, 3, 34)).astype(F32)
    slope = np.array([[0.1], [0.2], [0.3]], F32)
    check("PRelu", {"x": x}, constants={"slope": slope})
    check("PRelu", {"x": x, "slope": slope})
    check("PRelu", {"x": x}, constants={"slope": np.array([0.25], F32)})


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
@pytest.mark.parametrize("shapes", [[(2, 3, 34), (3, 34), (1, 1, 34)], [(2, 35)]])
def test_variadic(op, shapes, rng):
    xs = {f"x{i}": rng.standard_normal(s).astype(F32) for i, s in enumerate(shapes)}
    check(op, xs)


def test_variadic_with_a_constant(rng):
    x = rng.standard_normal((2, 40)).astype(F32)
    check("Sum", {"x": x}, constants={"c": np.full((40,), 1.5, F32)})
    check("Max", {"x": x}, constants={"c": rng.standard_normal((2, 1)).astype(F32)})


@pytest.mark.parametrize("dtype", [F32, np.int64, np.uint8])
def test_where(dtype, rng):
    cond = rng.standard_normal((3, 40)) > 0
    x = (rng.standard_normal((2, 3, 40)) * 5).astype(dtype)
    y = (rng.standard_normal((40,)) * 5).astype(dtype)
    check("Where", {"c": cond, "x": x, "y": y})


def test_where_bool_direct(rng):
    """onnxruntime has no bool Where kernel: against the reference instead."""
    cond, x, y = (rng.standard_normal((3, 40)) > 0 for _ in range(3))
    run_direct("Where", {}, cond, x, y[0])


def test_where_interpreted(rng):
    cond = rng.standard_normal((3, 40)) > 0
    x = rng.standard_normal((3, 40)).astype(F32)
    check("Where", {"c": cond, "x": x}, constants={"y": np.array(0.5, F32)}, use_interpreter=True)


def test_large_parallel(rng):
    """Past PARALLEL_MIN_ELEMENTS: the outer loop runs on the thread pool."""
    a = rng.standard_normal((4, 64, 130)).astype(F32)
    b = rng.standard_normal((64, 1)).astype(F32)
    check("Mul", {"a": a, "b": b})
    check("Gelu", {"a": a}, opset=20)


def test_identity_direct(rng):
    """The import passes remove Identity, so its compute is checked on a bare node."""
    run_direct("Identity", {}, rng.standard_normal((3, 40)).astype(F32))
    run_direct("Identity", {}, rng.integers(0, 9, (5,)))


# ---- BatchNormalization --------------------------------------------------------------------------
def _bn_params(rng, channels: int, uniform: bool = False) -> dict[str, np.ndarray]:
    if uniform:
        return {k: np.full(channels, v, F32) for k, v in zip("sbmv", (1.5, 0.1, -0.2, 0.8))}
    scale, bias, mean = (rng.standard_normal(channels).astype(F32) for _ in range(3))
    return {"s": scale, "b": bias, "m": mean, "v": rng.uniform(0.5, 2, channels).astype(F32)}


@pytest.mark.parametrize("shape", [(2, 3, 5, 34), (4, 35), (1, 4, 37)])
@pytest.mark.parametrize("params", ["constant", "uniform", "runtime"])
def test_batch_norm(shape, params, rng):
    x = rng.standard_normal(shape).astype(F32)
    p = _bn_params(rng, shape[1], uniform=params == "uniform")
    attrs = {"epsilon": 1e-3}
    if params == "runtime":
        check("BatchNormalization", {"x": x, **p}, attrs)
    else:
        check("BatchNormalization", {"x": x}, attrs, constants=p)


def test_batch_norm_interpreted(rng):
    x = rng.standard_normal((2, 3, 36)).astype(F32)
    check("BatchNormalization", {"x": x}, constants=_bn_params(rng, 3), use_interpreter=True)


# ---- Mod -----------------------------------------------------------------------------------------
MOD_DTYPES = ["int8", "int32", "int64", "uint8", "uint32", "float32", "float64"]


@pytest.mark.parametrize("dtype", MOD_DTYPES)
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(dtype, fmod, rng):
    """Python's remainder (sign of the divisor) or C's fmod (sign of the dividend), broadcast."""
    if fmod == 0 and dtype.startswith("float"):
        pytest.skip("ONNX requires fmod=1 for floats")
    if dtype.startswith("float"):
        a = (rng.standard_normal((2, 3, 37)) * 20).astype(dtype)
        b = (rng.uniform(0.5, 7, 37) * rng.choice([-1, 1], 37)).astype(dtype)
    else:
        info = np.iinfo(dtype)
        a = rng.integers(max(info.min, -100), min(info.max, 100), (2, 3, 37), endpoint=True)
        b = rng.integers(1, 9, 37) * (rng.choice([-1, 1], 37) if info.min < 0 else 1)
        a, b = a.astype(dtype), b.astype(dtype)
    for inputs in ({"a": a, "b": b}, {"a": a[0, 0], "b": b}):
        check("Mod", inputs, {"fmod": fmod}, opset=13)


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_never_traps_on_integer_edge_cases(fmod):
    """x % 0 and MIN % -1 trap in hardware; tvmc gives 0 for both, as numpy does."""
    low = np.iinfo(np.int32).min
    a = np.array([7, -7, low, low, 5, 0, -9, 9], np.int32)
    b = np.array([0, 0, -1, 1, -1, 3, 4, -4], np.int32)
    run_direct("Mod", {"fmod": fmod}, a, b)
    run_direct("Mod", {"fmod": fmod}, a.astype(np.uint16) % 50, b.astype(np.uint16) % 3)


def test_mod_keeps_fmod_exact_for_large_quotients():
    """fmod of the magnitudes is exact (frem); a floored remainder minus the divisor is not."""
    a = np.array([-1e30, 1e30, -5.5, 5.5, -1e-30], np.float32)
    b = np.array([3.0, -3.0, 2.0, -2.0, 7.0], np.float32)
    check("Mod", {"a": a, "b": b}, {"fmod": 1}, opset=13, rtol=0, atol=0)


@pytest.mark.parametrize(
    "src,like", [("float32", "float16"), ("float16", "float32"), ("float32", "int32"),
                 ("int64", "float64"), ("float32", "bool"), ("uint8", "int8")]
)  # fmt: skip
def test_castlike(src, like, rng):
    """A Cast to the second input's element type; that input's values are never read."""
    x = (rng.standard_normal((3, 37)) * 50).astype(src)
    check("CastLike", {"x": x}, constants={"like": np.zeros((2,), like)}, opset=19, expect="Cast")


# ---- signs, rounding, classification -------------------------------------------------------------
SPECIALS = [0.0, -0.0, np.nan, np.inf, -np.inf, 2.5, -2.5, 0.5, -0.5, 1.5]


def with_specials(x: np.ndarray) -> np.ndarray:
    """`x` with 0, -0, NaN, +-inf and halves in its first elements."""
    x.flat[: len(SPECIALS)] = SPECIALS
    return x


@pytest.mark.parametrize("dtype", [F32, np.float64, np.float16, np.int8, np.int32, np.int64,
                                   np.uint8, np.uint32])  # fmt: skip
def test_sign(dtype, rng):
    if np.dtype(dtype).kind == "f":
        x = with_specials((rng.standard_normal((3, 37)) * 5).astype(dtype))
        if dtype == np.float16:  # onnxruntime's float16 Sign makes NaN 0 (numpy and tvmc: NaN)
            x[np.isnan(x)] = 1
    else:
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -9), min(info.max, 9), (3, 37), endpoint=True).astype(dtype)
    check("Sign", {"x": x})


@pytest.mark.parametrize("dtype", [F32, np.float64, np.float16])
def test_round_halves_to_even(dtype, rng):
    x = with_specials((rng.standard_normal((3, 37)) * 8).astype(dtype))
    big = 512.5 if dtype == np.float16 else 1e6 + 0.5  # a half the dtype holds
    x[1, :6] = [0.49999997, -0.49999997, 3.5, -3.5, 4.5, big]
    check("Round", {"x": x}, opset=22)


@pytest.mark.parametrize("dtype", [F32, np.float64, np.float16])
@pytest.mark.parametrize("attrs", [{}, {"detect_negative": 0}, {"detect_positive": 0},
                                   {"detect_positive": 0, "detect_negative": 0}])  # fmt: skip
def test_isinf(attrs, dtype, rng):
    x = with_specials(rng.standard_normal((2, 37)).astype(dtype))
    check("IsInf", {"x": x}, attrs, opset=20)


@pytest.mark.parametrize("dtype", [F32, np.float64, np.float16])
def test_isnan(dtype, rng):
    check("IsNaN", {"x": with_specials(rng.standard_normal((2, 37)).astype(dtype))}, opset=20)


def test_sign_and_round_on_the_cuda_schedules(rng):
    x = with_specials((rng.standard_normal((4, 70)) * 5).astype(F32))
    check("Sign", {"x": x}, target=LoweringTarget(kind="cuda"))
    check("Round", {"x": x}, opset=22, target=LoweringTarget(kind="cuda"))


# ---- bitwise -------------------------------------------------------------------------------------
BIT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def integers(shape: tuple[int, ...], dtype, rng) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", BIT_DTYPES)
def test_bitwise(op, dtype, rng):
    a, b = integers((2, 3, 37), dtype, rng), integers((3, 1), dtype, rng)
    check(op, {"a": a, "b": b}, opset=18)
    check("BitwiseNot", {"a": a}, opset=18)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", BIT_DTYPES)
def test_bit_shift(direction, dtype, rng):
    """Amounts in range, at and past the width (every bit out), negative ones for signed types
    (opset 28); onnxruntime before opset 28 shifts unsigned types only."""
    x = integers((3, 37), dtype, rng)
    bits = np.dtype(dtype).itemsize * 8
    amounts = rng.integers(0, bits, 37)
    amounts[:5] = [0, bits - 1, bits, bits + 5, min(2 * bits, np.iinfo(dtype).max)]
    if np.iinfo(dtype).min < 0:
        amounts[5:8] = [-1, -bits, -100]
    opset = 28 if np.iinfo(dtype).min < 0 else 11
    check("BitShift", {"x": x, "y": amounts.astype(dtype)}, {"direction": direction}, opset=opset)
    check("BitShift", {"x": x}, {"direction": direction}, constants={"y": np.array(3, dtype)},
          opset=opset)  # fmt: skip


def test_bit_operations_on_the_cuda_schedules(rng):
    x, y = integers((4, 70), np.int32, rng), rng.integers(-2, 40, (70,)).astype(np.int32)
    check("BitShift", {"x": x, "y": y}, {"direction": "RIGHT"}, opset=28,
          target=LoweringTarget(kind="cuda"))  # fmt: skip
    check("BitwiseXor", {"x": x, "y": y}, opset=18, target=LoweringTarget(kind="cuda"))


def test_xor(rng):
    a = rng.standard_normal((2, 3, 40)) > 0
    b = rng.standard_normal((3, 40)) > 0
    check("Xor", {"a": a, "b": b})
    check("Xor", {"a": a}, constants={"b": np.array(True)})


@pytest.mark.parametrize(
    "op,inputs,attrs,message",
    [("BitShift", {"x": np.zeros(3, np.uint8), "y": np.ones(3, np.uint8)}, {"direction": "UP"},
      "direction must be LEFT or RIGHT"),
     ("BitwiseAnd", {"x": np.zeros(3, F32), "y": np.ones(3, F32)}, {}, "one of uint8, uint16"),
     ("Xor", {"x": np.zeros(3, np.int32), "y": np.ones(3, np.int32)}, {}, "one of bool")],
)  # fmt: skip
def test_wrong_attributes_and_types_are_model_errors(op, inputs, attrs, message):
    model = single_node_model(op, inputs, attrs, opset=18)
    model.graph.node[0].name = "n0"
    with pytest.raises(ModelError, match=f"n0.*{message}"):
        convert_model(model)
