"""ScatterElements (and the deprecated Scatter) and ScatterND: the copy-then-update templates,
compiled natively and interpreted with GPU semantics, against onnxruntime (or tvmc's reference
where onnxruntime has no kernel: float16 and bool reductions).

Updates apply in order, so duplicate indices matter: `add`/`mul` combine every update of an
element, `none` keeps the last. Scattering moves values (and adds a few): results are exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.lowering_helpers import lower_node, run_node
from tests.ops.gpu.test_gpu_ptx import assemble, kernels_of
from tests.ops.kernel_checks import check, run_direct
from tests.ops.template_checks import FORCE_PARALLEL
from tvmc.errors import ModelError
from tvmc.graph import Node, TensorType
from tvmc.kernel import kernel_str
from tvmc.ops import OPS
from tvmc.ops.lowering import LowerContext, LoweringTarget
from tvmc.ops.schedule.gpu_launch import check_gpu_config

F32, I64 = np.float32, np.int64
CUDA = LoweringTarget(kind="cuda")
EXACT = {"rtol": 0.0, "atol": 0.0}
ORDER = ["data", "indices", "updates"]
REDUCTIONS = ["none", "add", "mul", "max", "min"]


def elements_case(rng, axis: int, reduction: str, dtype=F32, shape=(4, 5, 6)):
    """(data, indices, updates) for ScatterElements along `axis` of `shape`; indices of `none`
    never repeat a target (duplicates have no defined order there), the others repeat."""
    data = (rng.standard_normal(shape) * 4).astype(dtype)
    axis %= len(shape)
    ishape = list(shape)
    ishape[axis] = 3
    if reduction == "none":  # distinct targets per line, some negative
        idx = np.stack([rng.permutation(shape[axis])[:3] for _ in range(np.prod(ishape) // 3)])
        idx = np.moveaxis(idx.reshape(*ishape[:axis], *ishape[axis + 1 :], 3), -1, axis)
        idx = np.where(rng.random(ishape) < 0.5, idx - shape[axis], idx)
    else:
        idx = rng.integers(-shape[axis], shape[axis], ishape)
    updates = (rng.standard_normal(ishape) * 4).astype(dtype)
    return data, idx.astype(I64), updates


# ---- ScatterElements -----------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(axis, reduction, rng):
    data, idx, upd = elements_case(rng, axis, reduction)
    attrs = {"axis": axis, "reduction": reduction}
    check("ScatterElements", {"data": data, "indices": idx, "updates": upd}, attrs, opset=18,
          **EXACT)  # fmt: skip


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_constant_indices(reduction, rng):
    data, idx, upd = elements_case(rng, 1, reduction)
    check("ScatterElements", {"data": data, "updates": upd}, {"axis": 1, "reduction": reduction},
          {"indices": idx}, opset=18, input_order=ORDER, **EXACT)  # fmt: skip


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8, np.float64])
def test_scatter_elements_dtypes(dtype, rng):
    data, idx, upd = elements_case(rng, 0, "add", dtype)
    check("ScatterElements", {"data": data, "indices": idx.astype(np.int32), "updates": upd},
          {"axis": 0, "reduction": "add"}, opset=16)  # fmt: skip


def test_scatter_elements_duplicates_add_and_mul_combine_all(rng):
    data = rng.standard_normal((3, 4)).astype(F32)
    idx = np.array([[1, 1, 1, -3]], I64)  # four updates of column 1 in row 0
    upd = rng.standard_normal((1, 4)).astype(F32)
    for reduction in ["add", "mul"]:
        check("ScatterElements", {"data": data, "indices": idx, "updates": upd},
              {"axis": 1, "reduction": reduction}, opset=16, rtol=1e-6)  # fmt: skip


def test_scatter_elements_indices_smaller_than_data(rng):
    """Indices may cover only a corner of the data outside `axis`."""
    data = rng.standard_normal((5, 7, 3)).astype(F32)
    idx = rng.integers(0, 7, (2, 4, 1)).astype(I64)
    upd = rng.standard_normal((2, 4, 1)).astype(F32)
    check("ScatterElements", {"data": data, "indices": idx, "updates": upd},
          {"axis": 1, "reduction": "max"}, opset=18, **EXACT)  # fmt: skip


@pytest.mark.parametrize("opset", [11, 13])
def test_scatter_elements_before_reductions(opset, rng):
    data, idx, upd = elements_case(rng, 2, "none")
    check("ScatterElements", {"data": data, "indices": idx, "updates": upd}, {"axis": 2},
          opset=opset, **EXACT)  # fmt: skip


@pytest.mark.parametrize("opset", [9, 10])
def test_deprecated_scatter(opset, rng):
    data, idx, upd = elements_case(rng, 1, "none")
    check("Scatter", {"data": data, "indices": idx, "updates": upd}, {"axis": 1}, opset=opset,
          expect="ScatterElements", **EXACT)  # fmt: skip


def test_scatter_elements_in_parallel(rng):
    data, idx, upd = elements_case(rng, 1, "add", shape=(6, 40, 8))
    check("ScatterElements", {"data": data, "indices": idx, "updates": upd},
          {"axis": 1, "reduction": "add"}, opset=18, config=FORCE_PARALLEL, rtol=1e-6)  # fmt: skip


@pytest.mark.parametrize("reduction", ["none", "add", "min"])
@pytest.mark.parametrize("constant", [False, True])
def test_scatter_elements_cuda(reduction, constant, rng):
    """Runtime indices: a thread per line walking its updates; constant indices that never
    repeat a target: a thread per update."""
    data, idx, upd = elements_case(rng, 1, reduction)
    attrs = {"axis": 1, "reduction": reduction}
    if constant:
        check("ScatterElements", {"data": data, "updates": upd}, attrs, {"indices": idx},
              opset=18, input_order=ORDER, target=CUDA, **EXACT)  # fmt: skip
    else:
        check("ScatterElements", {"data": data, "indices": idx, "updates": upd}, attrs,
              opset=18, target=CUDA, **EXACT)  # fmt: skip


# ---- ScatterND -----------------------------------------------------------------------------------
def nd_case(rng, data_shape, lead, k, reduction, dtype=F32):
    """(data, indices [*lead, k], updates) with tuples that repeat unless reduction is none."""
    data = (rng.standard_normal(data_shape) * 4).astype(dtype)
    count = int(np.prod(lead))
    if reduction == "none":  # distinct tuples
        flat = rng.permutation(int(np.prod(data_shape[:k])))[:count]
        tuples = np.stack(np.unravel_index(flat, data_shape[:k]), axis=-1)
    else:
        tuples = rng.integers(0, np.array(data_shape[:k]), (count, k))
    negative = rng.random(tuples.shape) < 0.3
    tuples = np.where(negative, tuples - np.array(data_shape[:k]), tuples)
    idx = tuples.reshape(*lead, k).astype(I64)
    upd = (rng.standard_normal((*lead, *data_shape[k:])) * 4).astype(dtype)
    return data, idx, upd


ND_GEOMETRIES = [
    ((4, 5, 6), (3,), 1),  # slices of [5, 6]
    ((4, 5, 6), (2, 2), 2),  # rows of [6], indices with two lead dims
    ((4, 5, 6), (7,), 3),  # single elements
    ((8,), (4,), 1),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("data_shape,lead,k", ND_GEOMETRIES)
def test_scatter_nd(data_shape, lead, k, reduction, rng):
    data, idx, upd = nd_case(rng, data_shape, lead, k, reduction)
    check("ScatterND", {"data": data, "indices": idx, "updates": upd}, {"reduction": reduction},
          opset=18, rtol=1e-6)  # fmt: skip


@pytest.mark.parametrize("reduction", ["none", "mul"])
def test_scatter_nd_constant_indices(reduction, rng):
    data, idx, upd = nd_case(rng, (4, 5, 6), (3,), 2, reduction)
    check("ScatterND", {"data": data, "updates": upd}, {"reduction": reduction},
          {"indices": idx}, opset=18, input_order=ORDER, rtol=1e-6)  # fmt: skip


@pytest.mark.parametrize("opset", [11, 13, 16])
def test_scatter_nd_opsets(opset, rng):
    data, idx, upd = nd_case(rng, (3, 4, 5), (2,), 1, "none")
    attrs = {"reduction": "add"} if opset >= 16 else {}
    check("ScatterND", {"data": data, "indices": idx, "updates": upd}, attrs, opset=opset,
          **EXACT)  # fmt: skip


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.float64])
def test_scatter_nd_dtypes(dtype, rng):
    data, idx, upd = nd_case(rng, (5, 3), (4,), 1, "add", dtype)
    check("ScatterND", {"data": data, "indices": idx, "updates": upd}, {"reduction": "add"},
          opset=16)  # fmt: skip


def test_scatter_nd_bool_reductions_are_or_and(rng):
    data = rng.random((6, 2)) < 0.5
    idx = np.array([[1], [4], [1]], I64)
    upd = rng.random((3, 2)) < 0.5
    for reduction in ["none", "add", "mul"]:  # what onnxruntime runs on bools
        i = idx[:2] if reduction == "none" else idx
        check("ScatterND", {"data": data, "indices": i, "updates": upd[: len(i)]},
              {"reduction": reduction}, opset=18)  # fmt: skip
    for reduction in ["max", "min"]:  # onnxruntime has none: tvmc's reference (or, and)
        attrs = {"reduction": reduction}
        run_direct("ScatterND", attrs, data, idx, upd)
        run_direct("ScatterElements", {"axis": 0, **attrs}, data, np.array([[1, 4]], I64),
                   upd[:1])  # fmt: skip


def test_float16_reductions_against_the_reference(rng):
    """onnxruntime runs float16 scatters only without a reduction."""
    data, idx, upd = nd_case(rng, (4, 6), (5,), 1, "add", np.float16)
    for reduction in ["add", "max"]:
        run_direct("ScatterND", {"reduction": reduction}, data, idx, upd)
    data, idx, upd = elements_case(rng, 1, "mul", np.float16)
    run_direct("ScatterElements", {"axis": 1, "reduction": "mul"}, data, idx, upd)


def test_scatter_nd_slices_cuda(rng):
    for reduction in ["none", "add"]:
        data, idx, upd = nd_case(rng, (4, 5, 6), (2, 2), 2, reduction)
        check("ScatterND", {"data": data, "indices": idx, "updates": upd},
              {"reduction": reduction}, opset=18, target=CUDA, rtol=1e-6)  # fmt: skip
    data, idx, upd = nd_case(rng, (4, 5, 6), (3,), 1, "none")
    check("ScatterND", {"data": data, "updates": upd}, {}, {"indices": idx}, opset=18,
          input_order=ORDER, target=CUDA, **EXACT)  # fmt: skip


# ---- both: safety, schedules, errors -------------------------------------------------------------
def test_out_of_range_indices_are_clamped():
    """Indices past either end write the edge element, never memory outside the output (no
    ONNX meaning: onnxruntime rejects them; the reference raises)."""
    data = np.zeros((4, 3), F32)
    node = Node("ScatterND", ["d", "i", "u"], ["y"], {"reduction": "none"})
    idx, upd = np.array([[9], [-9]], I64), np.array([[1, 2, 3], [4, 5, 6]], F32)
    for target in [None, CUDA]:
        (y,) = run_node(node, [data, idx, upd], [TensorType((4, 3), "float32")], target=target)
        np.testing.assert_array_equal(y, [[4, 5, 6], [0, 0, 0], [0, 0, 0], [1, 2, 3]])
    node = Node("ScatterElements", ["d", "i", "u"], ["y"], {"axis": 1, "reduction": "add"})
    (y,) = run_node(node, [data, np.array([[7, -7]], I64), upd[:1, :2]], [TensorType.of(data)])
    np.testing.assert_array_equal(y[0], [2, 0, 1])


def cuda_update_kernel(op: str, attrs: dict, arrays: list[np.ndarray], constant: bool) -> str:
    """The CUDA update kernel of one node (indices constant or not), printed."""
    node = Node(op, ["d", "i", "u"], ["y"], OPS[op].normalize_attrs(attrs, "test"))
    types = [TensorType.of(a) for a in arrays]
    constants = {1: arrays[1]} if constant else {}
    kernels, _, _ = lower_node(LowerContext(CUDA), node, types, types[:1], constants)
    check_gpu_config(kernels)
    assert [k.name.split("_", 1)[1] for k in kernels] == [f"{op.lower()}_copy", op.lower()]
    return kernel_str(kernels[1])


def test_update_schedules_on_cuda():
    """A thread per update only when constant indices never repeat a target; else a thread per
    line (position within the slices) walking every update in order."""
    data, upd = np.zeros((8, 16), F32), np.zeros((3, 16), F32)
    distinct, repeated = np.array([[1], [5], [-1]], I64), np.array([[1], [5], [-7]], I64)
    serial = "for (m: int32, 0, 3)"
    assert serial in cuda_update_kernel("ScatterND", {}, [data, distinct, upd], False)
    assert serial in cuda_update_kernel("ScatterND", {}, [data, repeated, upd], True)
    assert serial not in cuda_update_kernel("ScatterND", {}, [data, distinct, upd], True)
    attrs, idx = {"axis": 1}, np.array([[0, 3], [2, 2]], I64)
    serial = "for (j: int32, 0, 2)"
    assert serial in cuda_update_kernel("ScatterElements", attrs, [data, idx, upd[:2, :2]], True)
    idx = np.array([[0, 3], [2, 5]], I64)
    assert serial not in cuda_update_kernel(
        "ScatterElements", attrs, [data, idx, upd[:2, :2]], True
    )


def test_ptx_assembles(tmp_path):
    cases = [
        ("ScatterND", [(8, 16), (3, 1), (3, 16)], {"reduction": "add"}, "float32"),
        ("ScatterND", [(8, 16), (3, 2), (3,)], {"reduction": "max"}, "float16"),
        ("ScatterElements", [(8, 16), (8, 4), (8, 4)], {"axis": 1, "reduction": "mul"}, "int64"),
        ("ScatterElements", [(8, 16), (2, 16), (2, 16)], {"axis": 0, "reduction": "none"},
         "float32"),
    ]  # fmt: skip
    for op, (d, i, u), attrs, dtype in cases:
        types = [TensorType(d, dtype), TensorType(i, "int64"), TensorType(u, dtype)]
        assemble(kernels_of(op, types, attrs, {}, 3), tmp_path)


@pytest.mark.parametrize(
    "op,shapes,attrs,message",
    [
        ("ScatterND", [(4, 5), (2, 3), (2,)], {}, "k from 1 to its rank"),
        ("ScatterND", [(4, 5), (2, 1), (2, 4)], {}, "need \\[2, 5\\]"),
        ("ScatterND", [(4, 5), (2, 1), (2, 5)], {"reduction": "sub"}, "reduction 'sub'"),
        ("ScatterElements", [(4, 5), (2, 6), (2, 6)], {"axis": 0}, "exceed data"),
        ("ScatterElements", [(4, 5), (2, 5), (2, 4)], {"axis": 0}, "shaped like"),
    ],
)
def test_bad_models_name_the_node(op, shapes, attrs, message, rng):
    from tests.onnx_helpers import single_node_model
    from tvmc.frontend import convert_model

    data, idx, upd = (np.zeros(s, F32) for s in shapes)
    inputs = {"data": data, "indices": idx.astype(I64), "updates": upd}
    model = single_node_model(op, inputs, attrs, opset=18)
    with pytest.raises(ModelError, match=f"{op} node.*{message}"):
        convert_model(model)


@pytest.mark.parametrize(
    "op,shapes,attrs",
    [
        ("ScatterND", [(4, 3), (0, 1), (0, 3)], {}),  # no updates: the copy alone
        ("ScatterElements", [(4, 3), (4, 0), (4, 0)], {"axis": 0}),
        ("ScatterND", [(0, 3), (0, 1), (0, 3)], {}),  # all empty: folded at import
    ],
)
def test_empty_tensors_compiled(op, shapes, attrs, rng):
    """Whole-model compilation (empty tensors are placeholders there) against onnxruntime."""
    from tests.backend.node_cases import evaluate
    from tests.onnx_helpers import run_onnxruntime, single_node_model
    from tvmc.frontend import convert_model

    data, idx, upd = (rng.standard_normal(s).astype(F32) for s in shapes)
    inputs = {"data": data, "indices": idx.astype(I64), "updates": upd}
    model = single_node_model(op, inputs, attrs, opset=13)
    graph = convert_model(model)
    assert [n.op for n in graph.nodes] == ([op] if data.size else [])
    (want,) = run_onnxruntime(model, inputs)
    got = evaluate(graph, inputs, compiled=True)[graph.outputs[0]]
    np.testing.assert_array_equal(got, want)
