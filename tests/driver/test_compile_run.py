"""tvmc.compile -> package -> tvmc.run: outputs equal the references; inputs, timing, profiles."""

from __future__ import annotations

import gc
import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tvmc
from tvmc.driver.objects import format_more_times
from tvmc.driver.runner import fill, make_inputs
from tvmc.errors import InputError, UsageError
from tvmc.graph import TensorType
from tvmc.ops import run_reference
from tvmc.runtime import Timings

TVMC_HEADER = " mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  "


def tiny_model(shape: tuple[int, int, int] = (2, 3, 4), name: str = "tiny") -> onnx.ModelProto:
    """Two inputs, two outputs, a param: elementwise ops, Transpose, Reshape and Concat
    (x, y -> s = sigmoid(relu(x + b)), cat = concat(flatten(transpose(s * y)), flatten(x)))."""
    n, c, w = shape
    b = np.linspace(-1, 1, w, dtype=np.float32)
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Sigmoid", ["r"], ["s"]),
        helper.make_node("Mul", ["s", "y"], ["m"]),
        helper.make_node("Transpose", ["m"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["flat"]),
        helper.make_node("Reshape", ["x", "shape"], ["x_flat"]),
        helper.make_node("Concat", ["flat", "x_flat"], ["cat"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, [n, c, w]) for v in ("x", "y")],
        [helper.make_empty_tensor_value_info(v) for v in ("cat", "s")],
        [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array([n, c * w]), "shape")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    return model


def write_tiny_model(directory: Path) -> Path:
    """tiny.onnx in `directory`."""
    path = directory / "tiny.onnx"
    onnx.save(tiny_model(), path)
    return path


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def package(onnx_path: Path) -> tvmc.TVMCPackage:
    return tvmc.compile(str(onnx_path), package_path=str(onnx_path.with_suffix(".tar")))


def inputs_for(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {n: rng.standard_normal((2, 3, 4)).astype(np.float32) for n in ("x", "y")}


@pytest.mark.parametrize("opt_level", [0, 3])
def test_outputs_equal_the_reference(onnx_path: Path, tmp_path: Path, rng, opt_level: int):
    model = tvmc.load(str(onnx_path))
    package = model.compile(package_path=str(tmp_path / "m.tar"), opt_level=opt_level)
    inputs = inputs_for(rng)
    result = package.run(inputs=inputs)
    expected = run_reference(model.graph, inputs)
    assert result.output_names == ["cat", "s"]
    for i, name in enumerate(result.output_names):
        np.testing.assert_allclose(result.outputs[name], expected[name], rtol=1e-6, atol=1e-6)
        assert result.get_output(f"output_{i}") is result.outputs[name]
    assert result.times is None and result.profile == []


def test_package_round_trip(package: tvmc.TVMCPackage, rng):
    again = tvmc.TVMCPackage(package.package_path)
    assert again.metadata == package.metadata
    assert again.inputs == {
        "x": TensorType((2, 3, 4), "float32"),
        "y": TensorType((2, 3, 4), "float32"),
    }
    assert again.outputs == {
        "cat": TensorType((2, 24), "float32"),
        "s": TensorType((2, 3, 4), "float32"),
    }
    inputs = inputs_for(rng)
    first, second = package.run(inputs=inputs), tvmc.run(package.package_path, inputs=inputs)
    for name in first.output_names:
        np.testing.assert_array_equal(first.outputs[name], second.outputs[name])


def test_metadata(package: tvmc.TVMCPackage):
    meta = package.metadata
    assert meta["format"] == "tvmc.package" and meta["format_version"] == 3
    assert meta["tvmc_version"] == tvmc.__version__
    assert meta["target"] == "llvm" and meta["triple"] and meta["cpu"]
    assert [e["name"] for e in meta["inputs"]] == ["x", "y"]
    assert [e["buffer"] for e in meta["inputs"]] == package.program.inputs
    assert meta["outputs"][0] == {"name": "cat", "buffer": package.program.outputs[0],
                                  "shape": [2, 24], "dtype": "float32"}  # fmt: skip
    assert set(meta["configs"]) == {c.kernel for c in package.program.calls}
    assert all(config == {} for config in meta["configs"].values())
    assert meta["workspace_bytes"] >= 0 and meta["naive_bytes"] >= 0
    assert {"load", "optimize", "lower", "codegen", "link"} <= set(meta["compile_seconds"])
    assert meta["kernels"] >= 1 and meta["nodes"] >= 1


def test_temporary_package_lives_with_the_object(onnx_path: Path):
    package = tvmc.compile(tvmc.load(str(onnx_path)))
    path = package.package_path
    assert os.path.isfile(path) and package.run().outputs["cat"].shape == (2, 24)
    del package
    gc.collect()
    assert not os.path.exists(path)


def test_dump_code(onnx_path: Path, tmp_path: Path):
    path = tmp_path / "m.tar"
    package = tvmc.compile(
        str(onnx_path), package_path=str(path), dump_code=["ll,asm", "kernel", "graph"]
    )
    assert set(package.dumps) == {"ll", "asm", "kernel", "graph"}
    for fmt, dump in package.dumps.items():
        assert dump == f"{path}.{fmt}" and os.path.getsize(dump) > 0
    assert "define" in Path(f"{path}.ll").read_text()
    assert "Sigmoid" in Path(f"{path}.graph").read_text()
    with pytest.raises(UsageError, match=r"unknown --dump-code format 'lll'.*'ll'\?"):
        tvmc.compile(str(onnx_path), package_path=str(path), dump_code="lll")


def test_fill_modes(package: tvmc.TVMCPackage):
    zeros = package.run(fill_mode="zeros")
    b = np.linspace(-1, 1, 4, dtype=np.float32)
    sigmoid = 1 / (1 + np.exp(-np.maximum(b, 0)))
    np.testing.assert_allclose(zeros.outputs["s"], np.broadcast_to(sigmoid, (2, 3, 4)), rtol=1e-6)
    assert np.all(zeros.outputs["cat"] == 0)
    ones = package.run(fill_mode="ones").outputs["cat"]
    assert np.all(ones[:, 12:] == 1)
    first, again = package.run().outputs["cat"], package.run(fill_mode="random").outputs["cat"]
    np.testing.assert_array_equal(first, again)  # seeded: the same inputs every run
    partial = package.run(inputs={"y": np.zeros((2, 3, 4), np.float32)}, fill_mode="ones")
    assert np.all(partial.outputs["cat"][:, :12] == 0)
    with pytest.raises(UsageError, match=r"fill mode 'zero'.*'zeros'\?"):
        package.run(fill_mode="zero")


def test_fill_by_dtype():
    rng = np.random.default_rng(0)
    ints = fill(TensorType((100,), "int64"), "random", rng)
    assert ints.dtype == np.int64 and set(np.unique(ints)) <= {0, 1}
    assert fill(TensorType((3,), "bool"), "random", rng).dtype == np.bool_
    floats = fill(TensorType((1000,), "float32"), "random", rng)
    assert floats.dtype == np.float32 and 0.8 < floats.std() < 1.2
    assert make_inputs({"a": TensorType((2,), "int32")}, {"a": [1, 2]})["a"].dtype == np.int32


@pytest.mark.parametrize(
    ("inputs", "pattern"),
    [
        ({"z": np.zeros((2, 3, 4), np.float32)}, r"unknown input 'z'.*x \(float32\[2,3,4\]\)"),
        ({"x": np.zeros((2, 3), np.float32)}, r"'x' has shape \[2, 3\].*float32\[2,3,4\]"),
        ({"x": np.zeros((2, 3, 4))}, r"'x' is float64.*\.astype\('float32'\)"),
    ],
    ids=["name", "shape", "dtype"],
)
def test_wrong_inputs(package: tvmc.TVMCPackage, inputs, pattern: str):
    with pytest.raises(InputError, match=pattern):
        package.run(inputs=inputs)


def test_inputs_from_npz(package: tvmc.TVMCPackage, tmp_path: Path, rng):
    inputs = inputs_for(rng)
    np.savez(tmp_path / "in.npz", **inputs)
    from_file = package.run(inputs=str(tmp_path / "in.npz")).outputs["cat"]
    np.testing.assert_array_equal(from_file, package.run(inputs=inputs).outputs["cat"])
    with pytest.raises(InputError, match="does not exist"):
        package.run(inputs=str(tmp_path / "missing.npz"))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="cannot read inputs file"):
        package.run(inputs=str(tmp_path / "bad.npz"))


def test_devices_and_options(package: tvmc.TVMCPackage, onnx_path: Path):
    with pytest.raises(UsageError, match="runs with --device cpu.*compile it for the GPU"):
        package.run(device="cuda")
    with pytest.raises(UsageError, match=r"unknown device 'cpp'.*'cpu'\?"):
        package.run(device="cpp")
    with pytest.raises(UsageError, match="repeat must be at least 1"):
        package.run(benchmark=True, repeat=0)
    with pytest.raises(UsageError, match="not compiled yet"):
        tvmc.run(tvmc.load(str(onnx_path)))
    with pytest.raises(UsageError, match="loaded already"):
        tvmc.compile(tvmc.load(str(onnx_path)), shape_dict={"x": (2, 3, 4)})
    result = package.run(num_threads=1)
    assert result.outputs["cat"].shape == (2, 24)


def test_benchmark_and_format_times(package: tvmc.TVMCPackage):
    result = package.run(benchmark=True, repeat=4, number=2)
    assert len(result.times.results) == 4
    lines = result.format_times().splitlines()
    assert lines[0] == "Execution time summary:"
    assert lines[1] == TVMC_HEADER
    values = lines[2].split()
    assert len(values) == 5 and all(float(v) >= 0 for v in values)
    assert float(values[3]) <= float(values[1]) <= float(values[2])  # min <= median <= max
    heads, values = lines[3].split(), [float(v) for v in lines[4].split()]
    assert heads[:8:2] == ["p50", "p90", "p95", "p99"] and heads[-1] == "inferences/s"
    assert values[0] <= values[1] <= values[2] <= values[3] and values[4] > 0
    cold = r"(load [0-9.]+ ms, first inference [0-9.]+ ms, )?"  # the package's first run only
    adaptive = r"(, runs on [0-9]+ threads [0-9]+, .* \(tried, and kept while faster; .*\))?"
    assert re.fullmatch(cold + r"1 warm-up run, [0-9]+ timed in 4 measurements over [0-9.]+ s"
                        + adaptive, lines[5])  # fmt: skip
    document = result.to_json(top=3)
    assert set(document["time"]) == {
        "mean_ms", "median_ms", "max_ms", "min_ms", "std_ms",
        "p50_ms", "p90_ms", "p95_ms", "p99_ms", "throughput_per_s",
        "load_ms", "first_inference_ms", "warmup", "runs", "seconds", "thread_runs",
        "results_ms",
    }  # fmt: skip
    assert document["time"]["runs"] == 8 and document["time"]["warmup"] == 1
    assert len(document["top"]) == 3
    with pytest.raises(UsageError, match="no timings"):
        package.run().format_times()


def test_format_times_says_when_runs_took_fewer_threads():
    times = Timings((0.001, 0.002), runs=2, seconds=0.003, warmup=1, thread_runs=((2, 90), (1, 11)))
    text = format_more_times(times)
    assert "runs on 2 threads 90, 11 on 1 (tried, and kept while faster; " in text
    assert "TVMC_ADAPTIVE_THREADS=0: always 2)" in text
    assert times.to_json()["thread_runs"] == [
        {"threads": 2, "runs": 90},
        {"threads": 1, "runs": 11},
    ]
    assert "runs on" not in format_more_times(Timings((0.001,), runs=1, thread_runs=((2, 5),)))


def test_warmup_duration_and_load_time(onnx_path: Path):
    package = tvmc.TVMCPackage(onnx_path.with_suffix(".tar"))
    assert package.load_seconds is None  # read, not loaded yet
    result = tvmc.run(package, benchmark=True, repeat=3, warmup=0, duration=0.05)
    times = result.times
    assert times.warmup == 0 and times.seconds >= 0.05 and len(times.results) > 3
    assert times.load_seconds == package.load_seconds and 0 < times.load_seconds < 10
    assert times.first_seconds is not None and times.first_seconds > 0
    assert result.format_times().splitlines()[-1].startswith("load ")
    exact = tvmc.run(package, benchmark=True, repeat=3, warmup=4)
    assert len(exact.times.results) == 3 and exact.times.warmup == 4
    assert exact.times.load_seconds is None and exact.times.first_seconds is None  # warm now
    assert exact.format_times().splitlines()[-1].startswith("4 warm-up runs, ")
    for bad, match in (({"warmup": -1}, "warmup must be at least 0"),
                       ({"duration": -0.5}, "duration must be at least 0"),
                       ({"duration": float("nan")}, "duration"),
                       ({"duration": float("inf")}, "finite")):  # fmt: skip
        with pytest.raises(UsageError, match=match):
            tvmc.run(package, benchmark=True, **bad)


def test_profile(package: tvmc.TVMCPackage):
    rows = package.run(profile=True, repeat=3).profile
    assert [r["kernel"] for r in rows] == [c.kernel for c in package.program.calls]
    assert {"node", "kernel", "time_ms", "share_percent", "gflops", "flops"} <= set(rows[0])
    assert abs(sum(r["share_percent"] for r in rows) - 100) < 1e-6


def test_top_and_save(package: tvmc.TVMCPackage, tmp_path: Path):
    result = package.run()
    first = result.outputs["cat"][0]
    top = result.top(3)
    assert [c for c, _ in top] == list(np.argsort(-first, kind="stable")[:3])
    assert result.save(tmp_path / "out.bin") == str(tmp_path / "out.bin")
    with np.load(tmp_path / "out.bin") as saved:
        assert set(saved.files) == {"cat", "s", "output_0", "output_1"}
        np.testing.assert_array_equal(saved["output_1"], result.outputs["s"])
    with pytest.raises(UsageError, match=r"no output 'sx'.*'s'\?"):
        result.get_output("sx")


def test_loading_a_package_never_generates_code(package: tvmc.TVMCPackage, monkeypatch):
    """Load + first inference stay fast because nothing is compiled again (timed in the bench)."""
    import tvmc.codegen.llvm_cpu

    def refuse(*args, **kwargs):
        raise AssertionError("code generation while loading a package")

    monkeypatch.setattr(tvmc.codegen.llvm_cpu.CPUModule, "build", refuse)
    assert tvmc.TVMCPackage(package.package_path).run().outputs


def test_cross_compiled_package_is_inspectable(onnx_path: Path, tmp_path: Path):
    path = str(tmp_path / "arm.tar")
    package = tvmc.compile(
        str(onnx_path), package_path=path, target_llvm_mtriple="aarch64-linux-gnu"
    )
    again = tvmc.TVMCPackage(path)
    assert again.metadata["triple"] == "aarch64-linux-gnu"
    assert again.summary()["shared_library"] is False  # the host linker cannot link it
    assert again.outputs == package.outputs
