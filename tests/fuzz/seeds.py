"""What the mutators start from: small valid ONNX models, and one package, inputs file and
records file made from the first of them by tvmc itself (`prepare`)."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.fuzz.harness import ACCEPTED, Case, Executor

OPSET = 17
F32 = TensorProto.FLOAT


def _model(name: str, nodes, inputs, outputs, constants: dict[str, np.ndarray]) -> onnx.ModelProto:
    initializers = [numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()]
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def _info(name: str, elem_type: int, shape: list[int] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def cnn() -> onnx.ModelProto:
    """Conv, Relu, MaxPool, Flatten, Gemm, Softmax on a float32[1,3,8,8] input."""
    rng = np.random.default_rng(0)
    constants = {
        "w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "b": np.zeros(4, np.float32),
        "fc": rng.standard_normal((64, 10)).astype(np.float32),
    }
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "w", "b"],
            ["c"],
            "conv",
            pads=[1, 1, 1, 1],
            group=1,
            strides=[1, 1],
            kernel_shape=[3, 3],
        ),  # fmt: skip
        helper.make_node("Relu", ["c"], ["r"], "relu"),
        helper.make_node("MaxPool", ["r"], ["p"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], "flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc"], ["g"], "gemm", alpha=1.0, transB=0),
        helper.make_node("Softmax", ["g"], ["y"], "softmax", axis=-1),
    ]
    return _model("cnn", nodes, [_info("x", F32, [1, 3, 8, 8])], [_info("y", F32, [1, 10])],
                  constants)  # fmt: skip


def shapes() -> onnx.ModelProto:
    """The ops that make tensors from constants: ConstantOfShape, Expand, Tile, Pad, Range,
    Resize, Slice, Reshape."""
    constants = {
        "shape": np.array([2, 4], np.int64),
        "target": np.array([3, 2, 4], np.int64),
        "repeats": np.array([1, 1, 2], np.int64),
        "pads": np.array([0, 0, 1, 0, 0, 1], np.int64),
        "start": np.array(0, np.int64),
        "limit": np.array(20, np.int64),
        "delta": np.array(1, np.int64),
        "roi": np.array([], np.float32),
        "scales": np.array([1, 1, 2], np.float32),
        "starts": np.array([0], np.int64),
        "ends": np.array([2], np.int64),
        "axes": np.array([0], np.int64),
        "newshape": np.array([-1, 20], np.int64),
    }
    one = numpy_helper.from_array(np.array([1.0], np.float32), "one")
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["k"], "fill", value=one),
        helper.make_node("Add", ["x", "k"], ["a"], "add"),
        helper.make_node("Expand", ["a", "target"], ["e"], "expand"),
        helper.make_node("Tile", ["e", "repeats"], ["t"], "tile"),
        helper.make_node("Pad", ["t", "pads"], ["p"], "pad", mode="constant"),
        helper.make_node("Resize", ["p", "roi", "scales"], ["z"], "resize", mode="nearest"),
        helper.make_node("Slice", ["z", "starts", "ends", "axes"], ["s"], "slice"),
        helper.make_node("Range", ["start", "limit", "delta"], ["rg"], "range"),
        helper.make_node("Cast", ["rg"], ["rf"], "cast", to=F32),
        helper.make_node("Reshape", ["s", "newshape"], ["rs"], "reshape"),
        helper.make_node("Add", ["rs", "rf"], ["y"], "add2"),
    ]
    return _model("shapes", nodes, [_info("x", F32, [2, 4])], [_info("y", F32, None)],
                  constants)  # fmt: skip


def tensors() -> onnx.ModelProto:
    """Gather, Where, Cast, Clip, Transpose, Concat, Split, ReduceSum, ArgMax, MatMul."""
    constants = {
        "idx": np.array([2, 0], np.int64),
        "lo": np.array(-1.0, np.float32),
        "hi": np.array(1.0, np.float32),
        "m": np.ones((3, 4), np.float32),
        "axes": np.array([1], np.int64),
    }
    nodes = [
        helper.make_node("Gather", ["x", "idx"], ["g"], "gather", axis=1),
        helper.make_node("Clip", ["x", "lo", "hi"], ["c"], "clip"),
        helper.make_node("Greater", ["x", "c"], ["gt"], "greater"),
        helper.make_node("Where", ["gt", "x", "c"], ["w"], "where"),
        helper.make_node("MatMul", ["w", "m"], ["mm"], "matmul"),
        helper.make_node("Transpose", ["mm"], ["tr"], "transpose", perm=[1, 0]),
        helper.make_node("Split", ["tr"], ["s0", "s1"], "split", axis=0),
        helper.make_node("Concat", ["s1", "s0"], ["cc"], "concat", axis=0),
        helper.make_node("ReduceSum", ["cc", "axes"], ["rs"], "sum", keepdims=1),
        helper.make_node("ArgMax", ["g"], ["am"], "argmax", axis=1, keepdims=0),
        helper.make_node("Cast", ["am"], ["y2"], "cast", to=TensorProto.INT32),
        helper.make_node("Identity", ["rs"], ["y"], "identity"),
    ]
    outputs = [_info("y", F32, None), _info("y2", TensorProto.INT32, None)]
    return _model("tensors", nodes, [_info("x", F32, [2, 3])], outputs, constants)


def windows() -> onnx.ModelProto:
    """ConvTranspose, BatchNormalization, AveragePool (auto_pad), GlobalAveragePool."""
    rng = np.random.default_rng(1)
    constants = {
        "wt": rng.standard_normal((2, 2, 3, 3)).astype(np.float32),
        "scale": np.ones(2, np.float32),
        "bias": np.zeros(2, np.float32),
        "mean": np.zeros(2, np.float32),
        "var": np.ones(2, np.float32),
    }
    nodes = [
        helper.make_node(
            "ConvTranspose",
            ["x", "wt"],
            ["ct"],
            "deconv",
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            output_padding=[1, 1],
            group=1,
        ),  # fmt: skip
        helper.make_node(
            "BatchNormalization", ["ct", "scale", "bias", "mean", "var"], ["bn"], "bn", epsilon=1e-5
        ),  # fmt: skip
        helper.make_node(
            "AveragePool", ["bn"], ["ap"], "avg", kernel_shape=[3, 3], auto_pad="SAME_UPPER"
        ),  # fmt: skip
        helper.make_node("GlobalAveragePool", ["ap"], ["y"], "gap"),
    ]
    return _model("windows", nodes, [_info("x", F32, [1, 2, 4, 4])], [_info("y", F32, None)],
                  constants)  # fmt: skip


SEEDS: dict[str, Callable[[], onnx.ModelProto]] = {
    "cnn": cnn,
    "shapes": shapes,
    "tensors": tensors,
    "windows": windows,
}
PACKAGE_SEED = "cnn"  # the model of the package, inputs and records the other mutators use


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz file's bytes, as numpy.savez writes it."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@dataclass(frozen=True)
class Resources:
    """Files the package, npz, records and CLI mutators point their cases at."""

    directory: Path
    model: Path  # the package seed, as ONNX
    package: Path  # compiled from it
    inputs: Path  # a valid inputs file for it
    records: Path  # tuning records measured on it
    input_shape: tuple[int, ...] = (1, 3, 8, 8)

    @property
    def record_lines(self) -> list[str]:
        return self.records.read_text().splitlines()


def prepare(directory: str | Path, executor: Executor, trials: int = 6) -> Resources:
    """Write the seed model, then compile it, tune it for `trials` and write an inputs file."""
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    model, package = directory / "seed.onnx", directory / "seed.tar"
    records, inputs = directory / "seed.json", directory / "inputs.npz"
    onnx.save(SEEDS[PACKAGE_SEED](), model)
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    inputs.write_bytes(npz_bytes({"x": x}))
    tune = ["tune", str(model), "-o", str(records), "--trials", str(trials), "--tuner", "random",
            "--repeat", "1", "--parallel", "1"]  # fmt: skip
    for args in (["compile", str(model), "-o", str(package)], tune):
        outcome = executor.run(Case("setup", args), timeout=600)
        if outcome.kind != ACCEPTED:
            raise RuntimeError(f"fuzz setup failed: tvmc {' '.join(args)}:\n{outcome.stderr}")
    return Resources(directory, model, package, inputs, records)
