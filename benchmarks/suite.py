"""The models `make bench` and benchmarks/tune_models.py run: the nine ONNX light models
(randomized weights, seeded inputs) and the model zoo (tests/models/zoo: shrunk real
architectures with their stored inputs, each of a family named in manifest.json)."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.shape_inference

from tvmc.models import LIGHT_MODELS, light_model_inputs, randomized_light_model

ZOO = Path(__file__).resolve().parent.parent / "tests" / "models" / "zoo"
LIGHT_FAMILY = "light cnn"  # the ONNX light models: all CNN classifiers
SUITES = ("light", "zoo", "all")


@dataclass(frozen=True)
class BenchModel:
    """A model to run: its name, family, and where its ONNX file and inputs come from."""

    name: str
    family: str

    def onnx_path(self, directory: str) -> str:
        """The ONNX file (a light model is randomized and written into `directory` first)."""
        if self.family != LIGHT_FAMILY:
            return str(ZOO / f"{self.name}.onnx")
        path = os.path.join(directory, f"{self.name}.onnx")
        if not os.path.exists(path):
            onnx.save(randomized_light_model(self.name), path)
        return path

    def inputs(self, path: str, batch: int = 1) -> dict[str, np.ndarray]:
        """The inputs by name: seeded random ones (of the shapes `path` declares), or the zoo's
        stored input_0, input_1, ... (each image's `batch` times over)."""
        if self.family == LIGHT_FAMILY:
            return light_model_inputs(onnx.load(path))
        entry = _zoo_manifest()[self.name]
        arrays = np.load(ZOO / f"{self.name}.npz")
        stored = {x["name"]: arrays[f"input_{i}"] for i, x in enumerate(entry["inputs"])}
        return {name: np.concatenate([a] * batch) for name, a in stored.items()}


def rebatched(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """A copy of `model` whose graph inputs and outputs lead with `batch` where they declare a
    leading dim of 1 or a named one (ValueError where an input declares another, or none).
    A Reshape to a constant shape leading with 1, of an input leading with 1 (a flatten to
    [1, -1], a split of heads [1, 16, 12, 64]), keeps its input's leading dim instead (0, as
    Reshape reads it). Whether the graph then runs so (an Expand or a Concat of constant
    shapes may still hold one image) is for a runtime to find: `benchmarks/models.py --batch`
    runs it in onnxruntime first."""
    model = copy.deepcopy(model)
    _reshapes_keep_the_batch(model)
    constants = {t.name for t in model.graph.initializer}
    for value in [*model.graph.input, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if value.name in constants or (not dims and value in model.graph.output):
            continue  # an output of no declared shape: inferred by each runtime
        if not dims or (dims[0].HasField("dim_value") and dims[0].dim_value != 1):
            lead = dims[0].dim_value if dims else "none"
            raise ValueError(f"{value.name} has no batch dim of 1 to set (its first is {lead})")
        dims[0].Clear()
        dims[0].dim_value = batch
    del model.graph.value_info[:]  # intermediate shapes of one image
    return model


def _reshapes_keep_the_batch(model: onnx.ModelProto) -> None:
    """Reshapes of a constant shape [1, ...] whose input leads with 1 read [0, ...] instead, from
    a shape of their own (the constant may have other readers)."""
    ir_version = model.ir_version
    model.ir_version = max(ir_version, 4)  # initializers need not be inputs from IR 4
    inferred = onnx.shape_inference.infer_shapes(model)  # a copy, shapes filled in
    model.ir_version = ir_version
    leading = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value"):
            leading[value.name] = dims[0].dim_value
    shapes = {n.input[1] for n in model.graph.node if n.op_type == "Reshape"}
    constants = {t.name: onnx.numpy_helper.to_array(t)
                 for t in model.graph.initializer if t.name in shapes}  # fmt: skip
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] in shapes and node.attribute and (
                node.attribute[0].name == "value"):  # fmt: skip
            constants[node.output[0]] = onnx.numpy_helper.to_array(node.attribute[0].t)
    for i, node in enumerate(model.graph.node):
        if node.op_type != "Reshape":
            continue
        shape = constants.get(node.input[1])
        if shape is None or shape.ndim != 1 or not len(shape) or shape[0] != 1:
            continue
        if leading.get(node.input[0]) != 1:
            continue
        literal = any(a.name == "allowzero" and a.i for a in node.attribute)
        if literal and 0 in shape:
            continue  # a zero-sized dim held literally: 0 cannot mean the input's dim too
        if literal:  # as torch exports it: 0 then reads as a zero-sized dim, so drop it
            keep = [a for a in node.attribute if a.name != "allowzero"]
            del node.attribute[:]
            node.attribute.extend(keep)
        kept = shape.copy()
        kept[0] = 0
        name = f"{node.input[1]}_batch_kept_{i}"
        model.graph.initializer.append(onnx.numpy_helper.from_array(kept, name))
        node.input[1] = name


def _zoo_manifest() -> dict[str, dict]:
    manifest = json.loads((ZOO / "manifest.json").read_text())
    return {entry["name"]: entry for entry in manifest["models"]}


def suite(which: str) -> list[BenchModel]:
    """The models of `which`: light, zoo or all (light first, then the zoo's manifest order)."""
    light = [BenchModel(n, LIGHT_FAMILY) for n in LIGHT_MODELS]
    zoo = [BenchModel(n, e["family"]) for n, e in _zoo_manifest().items()]
    return {"light": light, "zoo": zoo, "all": light + zoo}[which]


def by_names(names: list[str]) -> list[BenchModel]:
    """The named models of the whole suite, in the order given (SystemExit naming the valid)."""
    known = {m.name: m for m in suite("all")}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]
