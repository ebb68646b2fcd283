"""TopK: the insertion template, compiled natively and interpreted with GPU semantics, against
onnxruntime (values and indices exact: of equal values the lower index comes first, NaN ranks
above every number) or tvmc's reference where onnxruntime has no kernel (uint64).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.onnx_helpers import run_onnxruntime, run_tvmc_reference, single_node_model
from tests.ops.gpu.test_gpu_ptx import assemble, kernels_of
from tests.ops.kernel_checks import check, run_direct
from tests.ops.template_checks import FORCE_PARALLEL
from tvmc.errors import ModelError, NonConstantInputError
from tvmc.frontend import convert_model
from tvmc.graph import TensorType
from tvmc.ops.lowering import LoweringTarget
from tvmc.ops.schedule.gpu_launch import check_gpu_config

F32, I64 = np.float32, np.int64
CUDA = LoweringTarget(kind="cuda")
EXACT = {"rtol": 0.0, "atol": 0.0}


def k_(k: int) -> dict[str, np.ndarray]:
    return {"k": np.array([k], I64)}


def topk(x, k, attrs=None, opset=11, **options) -> None:
    check("TopK", {"x": x}, attrs or {}, k_(k), num_outputs=2, opset=opset, **EXACT, **options)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("k", [1, 3])
def test_topk(axis, k, largest, rng):
    x = rng.standard_normal((4, 5, 37)).astype(F32)
    topk(x, k, {"axis": axis, "largest": largest})


@pytest.mark.parametrize("k", [0, 7])
def test_k_of_nothing_and_of_everything(k, rng):
    """k = 0 gives empty outputs (no kernel); k = n sorts the whole axis."""
    x = rng.standard_normal((3, 7)).astype(F32)
    topk(x, k, {"axis": 1})
    topk(x, k, {"axis": 1, "largest": 0})


@pytest.mark.parametrize("largest", [1, 0])
def test_ties_keep_the_lower_index_first(largest, rng):
    x = rng.integers(0, 3, (5, 40)).astype(F32)
    topk(x, 12, {"largest": largest})
    topk(x.T.astype(np.int32), 12, {"largest": largest, "axis": 0})


@pytest.mark.parametrize("largest", [1, 0])
def test_nan_and_infinities(largest):
    """NaN ranks above +inf, as in onnxruntime: first when largest, last when smallest."""
    x = np.array([[1, np.nan, 3, np.nan, 2, -np.inf, np.inf, 3]], F32)
    for k in (3, 8):
        topk(x, k, {"largest": largest})
        topk(x, k, {"largest": largest}, target=CUDA)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int64, np.int32, np.int8, np.uint8])
def test_dtypes(dtype, rng):
    x = (rng.standard_normal((6, 19)) * 50).astype(dtype)
    topk(x, 5, {"axis": 1})
    topk(x, 2, {"axis": 0, "largest": 0})


def test_uint64_against_the_reference(rng):
    """onnxruntime has no uint64 TopK; values above 2**63 must compare unsigned."""
    x = rng.integers(0, 2**64 - 1, (3, 9), dtype=np.uint64)
    for largest in (1, 0):
        run_direct("TopK", {"k": 4, "axis": 1, "largest": largest, "sorted": 1}, x,
                   num_outputs=2)  # fmt: skip


def test_k_as_an_attribute_before_opset_10(rng):
    x = rng.standard_normal((3, 11)).astype(F32)
    check("TopK", {"x": x}, {"k": 4, "axis": 1}, num_outputs=2, opset=9, **EXACT)


def test_unsorted_gives_the_same_set_sorted(rng):
    """sorted=0 leaves the order to the implementation (onnxruntime: a heap order); tvmc's is
    sorted, and holds the same elements."""
    x = rng.standard_normal((4, 30)).astype(F32)
    model = single_node_model("TopK", {"x": x}, {"sorted": 0}, k_(6), num_outputs=2, opset=11)
    ort_values, ort_indices = run_onnxruntime(model, {"x": x})
    values, indices = run_tvmc_reference(model, {"x": x})
    np.testing.assert_array_equal(np.sort(indices, axis=1), np.sort(ort_indices, axis=1))
    np.testing.assert_array_equal(values, -np.sort(-ort_values, axis=1))
    topk(x, 6, {"sorted": 1})  # the kernels match the sorted result exactly


def test_parallel_rows_and_cuda(rng):
    x = rng.standard_normal((8, 64, 3)).astype(F32)
    topk(x, 10, {"axis": 1}, config=FORCE_PARALLEL)
    topk(x, 10, {"axis": 1}, target=CUDA)
    topk(x[:, :, 0], 64, {"axis": 1, "largest": 0}, target=CUDA)


def test_only_indices_used(rng):
    """A model that uses only one output still gets both (the other with a fresh name)."""
    x = rng.standard_normal((2, 9)).astype(F32)
    model = single_node_model("TopK", {"x": x}, {}, k_(3), num_outputs=2, opset=11)
    model.graph.node[0].output[0] = ""
    del model.graph.output[0]
    (indices,) = run_tvmc_reference(model, {"x": x})
    np.testing.assert_array_equal(indices, np.argsort(-x, axis=1)[:, :3])


def test_runtime_k_and_bad_k_are_refused(rng):
    x = rng.standard_normal((2, 9)).astype(F32)
    model = single_node_model("TopK", {"x": x, "k": np.array([3], I64)}, num_outputs=2, opset=11)
    with pytest.raises(NonConstantInputError, match="TopK node.*k"):
        convert_model(model)
    model = single_node_model("TopK", {"x": x}, {}, k_(10), num_outputs=2, opset=11)
    with pytest.raises(ModelError, match="TopK node.*k=10 is outside \\[0, 9\\]"):
        convert_model(model)


def test_ptx_assembles(tmp_path):
    for dtype, attrs in [("float32", {"k": 5, "axis": 1}), ("float16", {"k": 3, "axis": 0}),
                         ("int64", {"k": 2, "axis": 1, "largest": 0})]:  # fmt: skip
        kernels = kernels_of("TopK", [TensorType((6, 40), dtype)], attrs)
        check_gpu_config(kernels)
        assemble(kernels, tmp_path)


def test_in_a_compiled_graph(rng, tmp_path):
    """TopK and ScatterND among computes in one model: their inputs come from kernels of fused
    computes (an Add, a Relu), their outputs feed others; compiled for llvm against
    onnxruntime, and lowered for CUDA into PTX that assembles."""
    from onnx import TensorProto, helper, numpy_helper

    from tests.backend.node_cases import evaluate
    from tvmc.lower import lower_graph
    from tvmc.passes import IMPORT_PIPELINE, run_passes

    nodes = [
        helper.make_node("Add", ["x", "b"], ["s"]),
        helper.make_node("TopK", ["s", "k"], ["v", "i"], axis=1),
        helper.make_node("Mul", ["v", "v"], ["v2"]),
        helper.make_node("Relu", ["u"], ["ur"]),
        helper.make_node("ScatterND", ["s", "rows", "ur"], ["sc"], reduction="add"),
        helper.make_node("Neg", ["sc"], ["out"]),
    ]
    inputs = [("x", TensorProto.FLOAT, [4, 30]), ("u", TensorProto.FLOAT, [3, 30]),
              ("rows", TensorProto.INT64, [3, 1])]  # fmt: skip
    constants = [numpy_helper.from_array(rng.standard_normal((1, 30)).astype(F32), "b"),
                 numpy_helper.from_array(np.array([5], I64), "k")]  # fmt: skip
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_empty_tensor_value_info(n) for n in ("v2", "i", "out")], constants,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    x, u = (rng.standard_normal((n, 30)).astype(F32) for n in (4, 3))
    feeds = {"x": x, "u": u, "rows": np.array([[1], [3], [1]], I64)}
    ours = run_passes(convert_model(model), IMPORT_PIPELINE)
    got = evaluate(ours, feeds, compiled=True)
    for name, want in zip(("v2", "i", "out"), run_onnxruntime(model, feeds)):
        np.testing.assert_allclose(got[name], want, rtol=1e-6)
    kernels = lower_graph(ours, CUDA).program.kernels
    check_gpu_config(kernels)
    assemble(kernels, tmp_path)
