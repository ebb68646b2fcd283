"""bfloat16, float8 and int4 tensors through the whole flow: a model's inputs, params (mod.params)
and outputs, bound by the executor, read from .npz input files (which keep ml_dtypes arrays as
raw bytes), filled at random, `tvmc run --inputs` on the command line, and a CUDA package run
on the fake GPU (tests/runtime/fake_cuda.py)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tests.cli.runners import run_in_process
from tests.runtime.fake_cuda import FakeDriver
from tvmc.driver.compiler import CompileOptions, build
from tvmc.driver.runner import fill
from tvmc.dtypes import NARROW_FLOATS, NARROW_INTS, as_dtype
from tvmc.errors import InputError
from tvmc.frontend import convert_model
from tvmc.graph import TensorType
from tvmc.ops import run_reference
from tvmc.runtime import cuda_driver
from tvmc.runtime.package import read_package

BF16, INT4 = ml_dtypes.bfloat16, ml_dtypes.int4


def narrow_model() -> onnx.ModelProto:
    """x: bfloat16[2,8] @ a bfloat16 param + an int4 input cast to bfloat16; the sum also as
    float8, and an int4 param concatenated to the int4 input."""
    w = (np.arange(32).reshape(8, 4) / 16 - 1).astype(BF16)
    k = np.array([[-8, 7, 1, -1]], INT4)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["p"]),
        helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.BFLOAT16),
        helper.make_node("Add", ["p", "qf"], ["y"]),
        helper.make_node("Cast", ["y"], ["y8"], to=TensorProto.FLOAT8E4M3FN, saturate=1),
        helper.make_node("Concat", ["q", "k"], ["qk"], axis=0),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 8]),
              helper.make_tensor_value_info("q", TensorProto.INT4, [2, 4])]  # fmt: skip
    outputs = [helper.make_empty_tensor_value_info(n) for n in ("y", "y8", "qk")]
    params = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(k, "k")]
    graph = helper.make_graph(nodes, "narrow", inputs, outputs, params)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = min(model.ir_version, 10)
    return model


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> tvmc.TVMCPackage:
    directory = tmp_path_factory.mktemp("narrow")
    onnx.save(narrow_model(), directory / "narrow.onnx")
    return tvmc.compile(str(directory / "narrow.onnx"), package_path=str(directory / "n.tar"))


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((2, 8)).astype(BF16),
            "q": rng.integers(-8, 8, (2, 4)).astype(INT4)}  # fmt: skip


def test_outputs_equal_the_references(package: tvmc.TVMCPackage):
    feeds = inputs()
    result = package.run(inputs=feeds)
    want = run_reference(convert_model(narrow_model()), feeds)
    assert {n: result.outputs[n].dtype.name for n in want} == {
        "y": "bfloat16", "y8": "float8_e4m3fn", "qk": "int4"}  # fmt: skip
    for name, value in want.items():
        np.testing.assert_array_equal(result.outputs[name], value)


def test_params_keep_their_types_through_the_package(package: tvmc.TVMCPackage):
    contents = read_package(package.package_path)
    types = {value.dtype.name for value in contents.params.values()}
    assert {"bfloat16", "int4"} <= types  # read back from .npz as raw bytes, then viewed
    again = tvmc.run(package.package_path, inputs=inputs())
    np.testing.assert_array_equal(again.outputs["qk"], package.run(inputs=inputs()).outputs["qk"])


def test_npz_inputs_and_outputs(package: tvmc.TVMCPackage, tmp_path: Path):
    feeds = inputs()
    np.savez(tmp_path / "in.npz", **feeds)
    with np.load(tmp_path / "in.npz") as saved:
        assert saved["x"].dtype == np.dtype("V2")  # numpy keeps only the bytes...
    from_file = package.run(inputs=str(tmp_path / "in.npz"))  # ...tvmc views them by the model
    np.testing.assert_array_equal(from_file.outputs["y"], package.run(inputs=feeds).outputs["y"])
    from_file.save(tmp_path / "out.npz")
    with np.load(tmp_path / "out.npz") as saved:
        y = as_dtype(saved["y"], "bfloat16")  # or saved["y"].view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y, from_file.outputs["y"])


def test_wrong_types_are_input_errors(package: tvmc.TVMCPackage):
    feeds = {**inputs(), "x": np.zeros((2, 8), np.float32)}
    with pytest.raises(InputError, match=r"'x' is float32.*astype\('bfloat16'\)"):
        package.run(inputs=feeds)


@pytest.mark.parametrize("dtype", NARROW_FLOATS + NARROW_INTS)
def test_random_fill(dtype):
    value = fill(TensorType((1000,), dtype), "random", np.random.default_rng(0))
    assert value.dtype.name == dtype
    wide = value.astype(np.float32)
    assert np.isfinite(wide).all() and len(np.unique(wide)) > 1


def test_cli_run_reads_npz_of_narrow_types(package: tvmc.TVMCPackage, tmp_path: Path):
    np.savez(tmp_path / "in.npz", **inputs())
    code, out, err = run_in_process(["run", package.package_path, "--inputs", "in.npz",
                                     "--outputs", "out.npz"], tmp_path)  # fmt: skip
    assert code == 0, err
    with np.load(tmp_path / "out.npz") as saved:
        y8 = saved["y8"].view(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(y8, package.run(inputs=inputs()).outputs["y8"])


def test_cuda_package_on_the_fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The CUDA build of the model (PTX, launches, bfloat16/int4 params), its kernels run by the
    interpreter standing in for the GPU, gives the CPU's outputs."""
    graph = convert_model(narrow_model())
    options = CompileOptions(target="cuda -arch=sm_90")
    drv = FakeDriver(build(graph, options).lowered.program.kernels)
    monkeypatch.setattr(cuda_driver, "driver", lambda: drv)
    cuda_driver.device.cache_clear()
    try:
        onnx.save(narrow_model(), tmp_path / "narrow.onnx")
        package = tvmc.compile(str(tmp_path / "narrow.onnx"), target="cuda -arch=sm_90",
                               package_path=str(tmp_path / "n.tar"))  # fmt: skip
        result = package.run(device="cuda", inputs=inputs())
    finally:
        cuda_driver.device.cache_clear()
    for name, want in run_reference(graph, inputs()).items():
        np.testing.assert_array_equal(result.outputs[name], want)
