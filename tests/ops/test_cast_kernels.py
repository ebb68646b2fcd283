"""Cast and CastLike to and from the narrow types, compiled natively (some interpreted, one
lowered for CUDA), bit for bit against ONNX's reference implementation (onnx.reference), which
defines them: float8 saturation, float8_e8m0fnu's rounding modes, int4 and int2 conversions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.kernel.narrow import bits_of, edge_samples
from tests.lowering_helpers import run_graph_lowered
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes

# NaN and overflow to integers or float16 make numpy warn; the conversions define what they give
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLOAT8 = ["FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"]
NARROW = ["BFLOAT16", *FLOAT8, "FLOAT8E8M0", "FLOAT4E2M1", "INT4", "UINT4", "INT2", "UINT2"]


def cast_model(x: np.ndarray, to: str, like: bool = False, **attrs) -> onnx.ModelProto:
    """One Cast (or CastLike) node from x's type to `to`; opset 25 knows every type."""
    elem = getattr(TensorProto, to)
    inputs = [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype),
                                            x.shape)]  # fmt: skip
    init = []
    if like:
        init = [helper.make_tensor("like", elem, [0], [])]
        node = helper.make_node("CastLike", ["x", "like"], ["y"], **attrs)
    else:
        node = helper.make_node("Cast", ["x"], ["y"], to=elem, **attrs)
    out = helper.make_tensor_value_info("y", elem, x.shape)
    graph = helper.make_graph([node], "cast", inputs, [out], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])


def compiled(model: onnx.ModelProto, x: np.ndarray, **options) -> np.ndarray:
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    assert [n.op for n in graph.nodes] == ["Cast"]
    return run_graph_lowered(graph, {"x": x}, **options)["y"]


def check(x: np.ndarray, to: str, like: bool = False, **attrs) -> None:
    model = cast_model(x, to, like, **attrs)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    got = compiled(model, x)
    assert got.dtype == want.dtype
    bad = bits_of(got) != bits_of(want)
    assert not bad.any(), (f"{x.dtype} -> {to} {attrs}: {int(bad.sum())} differ: {x[bad][:6]} "
                           f"gives {got[bad][:6]}, want {want[bad][:6]}")  # fmt: skip


def samples(to: str) -> np.ndarray:
    """float32 values that test a conversion to `to`: its values, ties, overflow, specials."""
    fmt = {"BFLOAT16": "bfloat16", "FLOAT8E4M3FN": "float8_e4m3fn",
           "FLOAT8E4M3FNUZ": "float8_e4m3fnuz", "FLOAT8E5M2": "float8_e5m2",
           "FLOAT8E5M2FNUZ": "float8_e5m2fnuz", "FLOAT8E8M0": "float8_e8m0fnu",
           "FLOAT4E2M1": "float4_e2m1fn"}.get(to, "float8_e5m2")  # fmt: skip
    return edge_samples(fmt, step=16 if fmt == "bfloat16" else 1)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("to", FLOAT8)
def test_float8_saturates_as_onnx_says(to, saturate):
    x = samples(to)
    check(x, to, saturate=saturate)
    check(x.astype(np.float16), to, saturate=saturate)
    check(x.astype(np.float64), to, like=True, saturate=saturate)


@pytest.mark.parametrize("to", ["BFLOAT16", "FLOAT4E2M1", "INT4", "UINT4", "INT2", "UINT2"])
def test_other_narrow_types(to):
    x = samples(to)
    check(x, to)
    check(x.astype(np.float16), to, like=True)
    check(np.arange(-300, 300, dtype=np.int32), to)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_e8m0_round_modes(mode, saturate):
    x = np.abs(samples("FLOAT8E8M0"))
    check(x, "FLOAT8E8M0", saturate=saturate, round_mode=mode)


@pytest.mark.parametrize("src", NARROW)
def test_every_narrow_value_converts_back(src):
    count = 1 << {"BFLOAT16": 16, "FLOAT4E2M1": 4, "INT4": 4, "UINT4": 4}.get(src, 8)
    count = 4 if src in ("INT2", "UINT2") else count
    patterns = np.arange(count, dtype=np.uint16 if src == "BFLOAT16" else np.uint8)
    x = patterns.view(helper.tensor_dtype_to_np_dtype(getattr(TensorProto, src)))
    for to in ("FLOAT", "FLOAT16", "DOUBLE", "INT32", "INT8", "BFLOAT16", "FLOAT8E4M3FN"):
        if to != src:
            check(x, to)


def test_interpreted_and_cuda_lowered_casts_agree():
    x = samples("FLOAT8E4M3FN")
    model = cast_model(x, "FLOAT8E4M3FN", saturate=0)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    for options in ({"use_interpreter": True}, {"target": LoweringTarget(kind="cuda")}):
        np.testing.assert_array_equal(bits_of(compiled(model, x, **options)), bits_of(want))


def test_narrow_initializers_are_unpacked():
    """int4 initializers are packed two to a byte in the file; the frontend unpacks them."""
    w = np.array([-8, -1, 0, 3, 7], dtype=np.int8)
    init = helper.make_tensor("w", TensorProto.INT4, [5], w.tolist())
    node = helper.make_node("Cast", ["w"], ["y"], to=TensorProto.FLOAT)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [5])], [init])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    assert numpy_helper.to_array(init).dtype.name == "int4"
    tvmc_graph = convert_model(model)  # constant folded by the reference on import
    (y,) = [tvmc_graph.params[n] for n in tvmc_graph.outputs]
    np.testing.assert_array_equal(y, w.astype(np.float32))
