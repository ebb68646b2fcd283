"""TensorScatter (a KV cache update) compiled natively, interpreted and lowered for CUDA,
against ONNX's reference implementation (onnxruntime has no opset 24 kernel to compare with)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from tests.lowering_helpers import run_graph_lowered
from tvmc.errors import ModelError
from tvmc.frontend import convert_model
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import IMPORT_PIPELINE, run_passes


def scatter_model(past: np.ndarray, update: np.ndarray, indices: np.ndarray | None,
                  **attrs) -> onnx.ModelProto:  # fmt: skip
    names = ["past", "update"] + (["indices"] if indices is not None else [])
    arrays = [past, update] + ([indices] if indices is not None else [])
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in zip(names, arrays)]  # fmt: skip
    node = helper.make_node("TensorScatter", names, ["present"], **attrs)
    out = helper.make_tensor_value_info("present", TensorProto.FLOAT, past.shape)
    graph = helper.make_graph([node], "cache", inputs, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


CASES = [  # past shape, update length, axis, mode, write indices
    ((2, 3, 8, 4), 1, -2, "linear", [0, 7]),
    ((2, 3, 8, 4), 3, 2, "linear", [5, 2]),
    ((2, 3, 8, 4), 3, -2, "circular", [6, 13]),  # wraps round; 13 is past the end
    ((3, 8, 5), 8, 1, "circular", [3, 0, 9]),  # the whole cache rewritten, rotated
    ((2, 6, 3, 4), 2, 1, "linear", None),  # no write indices: from 0
    ((2, 2, 5, 3, 4), 4, 2, "circular", [4, 1]),
]


@pytest.mark.parametrize("shape,length,axis,mode,starts", CASES)
def test_tensor_scatter_matches_onnx_reference(shape, length, axis, mode, starts, rng):
    past = rng.standard_normal(shape).astype(np.float32)
    update_shape = list(shape)
    update_shape[axis] = length
    update = rng.standard_normal(update_shape).astype(np.float32)
    indices = None if starts is None else np.array(starts, np.int64)
    model = scatter_model(past, update, indices, axis=axis, mode=mode)
    feeds = {"past": past, "update": update, **({"indices": indices} if starts else {})}
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    for options in ({}, {"use_interpreter": True}, {"target": LoweringTarget(kind="cuda")}):
        got = run_graph_lowered(graph, feeds, **options)["present"]
        np.testing.assert_array_equal(got, want)


def test_a_linear_write_past_the_end_drops_the_overflow(rng):
    past, update = np.zeros((1, 4, 2), np.float32), np.ones((1, 3, 2), np.float32)
    model = scatter_model(past, update, np.array([2], np.int64), axis=1)
    graph = run_passes(convert_model(model), IMPORT_PIPELINE)
    feeds = {"past": past, "update": update, "indices": np.array([2], np.int64)}
    got = run_graph_lowered(graph, feeds)["present"]
    np.testing.assert_array_equal(got[0, :, 0], [0, 0, 1, 1])  # undefined in ONNX; nothing leaks


@pytest.mark.parametrize("update_shape,attrs,message", [
    ((2, 9, 4), {"axis": 1}, "longer than the cache"),
    ((2, 3, 5), {"axis": 1}, "must match the cache"),
    ((2, 3, 4), {"axis": 0}, "batch axis"),
    ((2, 3, 4), {"axis": 1, "mode": "ring"}, "not one of"),
])  # fmt: skip
def test_bad_tensor_scatters_are_model_errors(update_shape, attrs, message):
    past, update = np.zeros((2, 8, 4), np.float32), np.zeros(update_shape, np.float32)
    with pytest.raises(ModelError, match=message):
        convert_model(scatter_model(past, update, None, **attrs))
