"""The trigonometric and hyperbolic ops and ONNX's later activations, compiled (one each on the
CUDA schedules, interpreted), against onnxruntime.

Tolerances: float32 rtol 1e-5, atol 1e-6 (tvmc's functions round correctly but in near-halfway
cases; onnxruntime's are within a few ulps); float16 rtol 2e-3, atol 1e-3 (a float16 ulp is
1e-3 relative, and each side rounds once from float32). onnxruntime has no float64 kernel for
most of them: float64 runs against tvmc's numpy reference (float64 numpy) at rtol 1e-13.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import run_node
from tests.onnx_helpers import single_node_model
from tests.ops.kernel_checks import check
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.graph import Node, TensorType
from tvmc.ops import OPS, evaluate_node
from tvmc.ops.lowering import LoweringTarget

F32 = np.float32
CUDA = LoweringTarget(kind="cuda")
# op -> the interval its inputs come from (and the edges it must get right)
DOMAINS = {
    "Sin": (-30, 30, [0.0, -0.0, np.pi, 1e4]),
    "Cos": (-30, 30, [0.0, -0.0, np.pi / 2, 1e4]),
    "Tan": (-1.5, 1.5, [0.0, -0.0, 1.5707, -1.5707]),
    "Asin": (-1, 1, [1.0, -1.0, 0.0, -0.0, 0.99999994]),
    "Acos": (-1, 1, [1.0, -1.0, 0.0, 0.5, -0.99999994]),
    "Atan": (-50, 50, [0.0, -0.0, 1e30, -1e30]),
    "Sinh": (-20, 20, [0.0, -0.0, 1e-5, 80.0]),
    "Cosh": (-20, 20, [0.0, -0.0, 1e-5, -80.0]),
    "Asinh": (-1e3, 1e3, [0.0, -0.0, 1e-5, 3e38]),
    "Acosh": (1, 1e3, [1.0, 1.0000001, 2.0, 3e38]),
    "Atanh": (-1, 1, [0.0, -0.0, 0.5, -0.99999994]),
}
SHAPES = [(2, 3, 37), ()]  # 37: a vector body and a scalar tail
HALF = {"rtol": 2e-3, "atol": 1e-3}


def sample(op: str, shape: tuple[int, ...], rng, dtype=F32) -> np.ndarray:
    """Inputs of `op`'s domain; its edge values first when the shape has room."""
    lo, hi, edges = DOMAINS[op]
    x = rng.uniform(lo, hi, shape)
    if x.size > len(edges):
        x.flat[: len(edges)] = edges
    return x.astype(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", sorted(DOMAINS))
def test_function(op, shape, rng):
    check(op, {"x": sample(op, shape, rng)}, opset=22)


@pytest.mark.parametrize("op", sorted(DOMAINS))
def test_function_float16(op, rng):
    x = sample(op, (3, 37), rng).astype(np.float64)
    x = np.where(np.abs(x) > 6e4, 100, x).astype(np.float16)  # 3e38 is past float16's range
    check(op, {"x": x}, opset=22, **HALF)


def against_reference(op: str, x: np.ndarray, attrs: dict | None = None, rtol: float = 1e-13,
                      atol: float = 1e-300) -> None:  # fmt: skip
    """Compiled against tvmc's numpy reference (which computes in float64)."""
    node = Node(op, ["x"], ["y"], OPS[op].normalize_attrs(attrs or {}, op))
    with np.errstate(all="ignore"):
        (want,) = evaluate_node(node, [x])
    (got,) = run_node(node, [x], [TensorType.of(want)])
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("op", sorted(DOMAINS))
def test_function_float64(op, rng):
    against_reference(op, sample(op, (2, 37), rng, np.float64))


@pytest.mark.parametrize("op", ["Sin", "Acosh", "Atanh"])
def test_function_on_the_cuda_schedules(op, rng):
    check(op, {"x": sample(op, (4, 70), rng)}, opset=22, target=CUDA)


def test_a_float_function_of_integers_is_a_model_error():
    model = single_node_model("Sin", {"x": np.zeros((3,), np.int32)}, opset=22)
    model.graph.node[0].name = "sin0"
    with pytest.raises(ModelError, match="sin0.*Sin takes float tensors, got int32"):
        convert_model(model)


# ---- activations of later opsets -----------------------------------------------------------------
ACTIVATIONS = [  # (op, attrs, opset)
    ("Celu", {}, 12),
    ("Celu", {"alpha": 2.5}, 12),
    ("Selu", {}, 22),
    ("Selu", {"alpha": 2.0, "gamma": 3.0}, 22),
    ("ThresholdedRelu", {}, 22),
    ("ThresholdedRelu", {"alpha": -0.5}, 22),
    ("Softsign", {}, 22),
    ("Shrink", {}, 9),
    ("Shrink", {"lambd": 1.5, "bias": 0.7}, 9),
    ("Mish", {}, 22),
    ("Swish", {}, 24),
    ("Swish", {"alpha": 1.702}, 24),
]


def wide_inputs(shape: tuple[int, ...], rng, dtype=F32) -> np.ndarray:
    """Normal samples times 4, with 0, -0, large and tiny values first."""
    x = rng.standard_normal(shape) * 4
    edges = [0.0, -0.0, 30.0, -30.0, 100.0, -100.0, 1e-6, -1e-6]
    if x.size > len(edges):
        x.flat[: len(edges)] = edges
    return x.astype(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op,attrs,opset", ACTIVATIONS)
def test_activation(op, attrs, opset, shape, rng):
    check(op, {"x": wide_inputs(shape, rng)}, attrs, opset=opset)


@pytest.mark.parametrize("op,attrs,opset", ACTIVATIONS[::2])
def test_activation_float16(op, attrs, opset, rng):
    x = wide_inputs((3, 37), rng, np.float16)
    if op == "Celu":  # onnxruntime has no float16 Celu
        against_reference(op, x, attrs, **HALF)
    else:
        check(op, {"x": x}, attrs, opset=opset, **HALF)


@pytest.mark.parametrize("op,attrs,opset", ACTIVATIONS[1::2])
def test_activation_float64(op, attrs, opset, rng):
    against_reference(op, wide_inputs((2, 37), rng, np.float64), attrs)


def test_mish_keeps_its_digits_far_left():
    """x * tanh(softplus(x)) for x << 0 is about x e**x: log(1 + e**x) would round to 0."""
    x = np.linspace(-80, -10, 64, dtype=F32)
    check("Mish", {"x": x}, opset=22, atol=0)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_shrink_integers(dtype, rng):
    """Integers compute in float64 and truncate: -5 + 0.7 is -4; unsigned results wrap."""
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -20), min(info.max, 20), (2, 37), endpoint=True).astype(dtype)
    check("Shrink", {"x": x}, {"lambd": 1.5, "bias": 0.7}, opset=9)


@pytest.mark.parametrize("op,attrs,opset", [ACTIVATIONS[1], ACTIVATIONS[9], ACTIVATIONS[11]])
def test_activation_on_the_cuda_schedules(op, attrs, opset, rng):
    check(op, {"x": wide_inputs((4, 70), rng)}, attrs, opset=opset, target=CUDA)
