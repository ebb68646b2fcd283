"""The models `make bench` and benchmarks/tune_models.py run: the nine ONNX light models
(randomized weights, seeded inputs) and the model zoo (tests/models/zoo: shrunk real
architectures with their stored inputs, each of a family named in manifest.json)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

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

    def inputs(self, path: str) -> dict[str, np.ndarray]:
        """The inputs by name: seeded random ones, or the zoo's stored input_0, input_1, ..."""
        if self.family == LIGHT_FAMILY:
            return light_model_inputs(onnx.load(path))
        entry = _zoo_manifest()[self.name]
        arrays = np.load(ZOO / f"{self.name}.npz")
        return {x["name"]: arrays[f"input_{i}"] for i, x in enumerate(entry["inputs"])}


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
