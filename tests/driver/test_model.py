"""TVMCModel: save/load round trip and refusing corrupt files."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tvmc.errors import ModelError, UsageError
from tvmc.graph import graph_to_json


@pytest.fixture
def onnx_path(tmp_path):
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("LeakyRelu", ["h"], ["y"], alpha=0.1),
    ]
    graph = helper.make_graph(nodes, "tiny", [x], [y], [numpy_helper.from_array(w, "w")])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return str(path)


def test_save_load_round_trip_is_exact(onnx_path, tmp_path):
    model = tvmc.load(onnx_path)
    saved = model.save(str(tmp_path / "tiny.tvmc"))
    again = tvmc.load(saved)
    assert graph_to_json(again.graph) == graph_to_json(model.graph)
    assert list(again.params) == list(model.params)
    for name, value in model.params.items():
        assert again.params[name].dtype == value.dtype
        np.testing.assert_array_equal(again.params[name], value)
    assert again.inputs == model.inputs and again.outputs == model.outputs


def test_summary_names_inputs_outputs_and_ops(onnx_path):
    text = tvmc.load(onnx_path).summary()
    assert "input  x: float32[2,3]" in text and "output y: float32[2,4]" in text
    assert "MatMul x1" in text


def test_saved_model_rejects_shape_overrides(onnx_path, tmp_path):
    saved = tvmc.load(onnx_path).save(str(tmp_path / "m.tvmc"))
    with pytest.raises(UsageError, match="fixed input shapes"):
        tvmc.load(saved, shape_dict={"x": (1, 3)})


def _tar_with(path, members):
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_corrupt_saved_models(onnx_path, tmp_path):
    good = tvmc.load(onnx_path).save(str(tmp_path / "good.tvmc"))
    data = open(good, "rb").read()
    cut = tmp_path / "cut.tvmc"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(ModelError):
        tvmc.load(str(cut))
    missing = tmp_path / "missing.tvmc"
    _tar_with(missing, {"metadata.json": b"{}"})
    with pytest.raises(ModelError, match="lacks graph.json, params.npz"):
        tvmc.load(str(missing))
    pickled = tmp_path / "pickled.tvmc"
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    with tarfile.open(good) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    npz = io.BytesIO()
    with __import__("zipfile").ZipFile(npz, "w") as zf:
        zf.writestr("w.npy", buffer.getvalue())
    members["params.npz"] = npz.getvalue()
    _tar_with(pickled, members)
    with pytest.raises(ModelError, match="corrupt params.npz"):
        tvmc.load(str(pickled))


def test_unknown_extension(tmp_path, onnx_path):
    other = tmp_path / "model.bin"
    other.write_bytes(open(onnx_path, "rb").read())
    with pytest.raises(UsageError, match="--model-format"):
        tvmc.load(str(other))
    assert list(tvmc.load(str(other), model_format="onnx").outputs) == ["y"]
    with pytest.raises(UsageError, match="Did you mean 'onnx'"):
        tvmc.load(str(other), model_format="onxx")


def test_tvmc_model_from_model_path_as_tvmc(onnx_path, tmp_path):
    saved = tvmc.load(onnx_path).save(str(tmp_path / "tiny.tvmc"))
    for path in (saved, onnx_path):  # TVMC's saved model, and an ONNX file as tvmc.load takes
        model = tvmc.TVMCModel(model_path=path)
        assert model.source == path and model.load_seconds > 0
        assert graph_to_json(model.graph) == graph_to_json(tvmc.load(onnx_path).graph)
    assert tvmc.TVMCModel(model_path=saved).compile().run().outputs["y"].shape == (2, 4)


def test_tvmc_model_needs_a_graph_or_a_path(onnx_path):
    with pytest.raises(UsageError, match="needs a graph or model_path"):
        tvmc.TVMCModel()
    with pytest.raises(UsageError, match="not both"):
        tvmc.TVMCModel(tvmc.load(onnx_path).graph, model_path=onnx_path)
    with pytest.raises(ModelError, match="does not exist"):
        tvmc.TVMCModel(model_path="missing.tvmc")
