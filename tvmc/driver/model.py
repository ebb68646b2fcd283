"""Loading, the first step: a model file (ONNX, or a saved `.tvmc`) into a graph with its
params, constants folded; and the saved-model format `TVMCModel.save` writes.

Works on graphs (`tvmc.driver.objects.TVMCModel` wraps them); never prints.
"""

from __future__ import annotations

import io
import json
import logging
import os
import tarfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tvmc.errors import ModelError, UnsupportedModelError, UsageError, unknown_choice
from tvmc.graph import Graph, graph_from_json, graph_to_json
from tvmc.version import __version__

if TYPE_CHECKING:
    from tvmc.driver.pipeline import PassTime

logger = logging.getLogger("tvmc")

MODEL_FORMATS = ("onnx", "tvmc")
SAVED_MODEL_FORMAT = "tvmc.model"
SAVED_MODEL_FORMAT_VERSION = 1
_EXTENSIONS = {".onnx": "onnx", ".tvmc": "tvmc"}
# Other frameworks' files: which framework, and how to get ONNX from it (_TO_ONNX).
_FOREIGN = {".tflite": ("TensorFlow Lite", "tflite"), ".pb": ("TensorFlow", "graphdef"),
            ".h5": ("Keras", "keras"), ".keras": ("Keras", "keras"),
            ".pt": ("PyTorch", "torch"), ".pth": ("PyTorch", "torch")}  # fmt: skip
_TO_ONNX = {
    "tflite": "convert it with tf2onnx: python -m tf2onnx.convert --tflite MODEL.tflite "
    "--output model.onnx",
    "graphdef": "convert it with tf2onnx: python -m tf2onnx.convert --saved-model DIR --output "
    "model.onnx (a SavedModel directory), or --graphdef MODEL.pb --inputs X:0 --outputs Y:0 "
    "(a frozen graph)",
    "savedmodel": "convert it with tf2onnx: python -m tf2onnx.convert --saved-model DIR "
    "--output model.onnx",
    "keras": "convert it with tf2onnx: tf2onnx.convert.from_keras(model, output_path="
    "'model.onnx') in Python, after keras.models.load_model(...)",
    "torch": "export it from PyTorch: torch.onnx.export(model, example_inputs, 'model.onnx') "
    "with the model's class loaded (a .pt/.pth file holds weights or TorchScript, not a graph "
    "tvmc can read)",
}


def save_graph(graph: Graph, path: str) -> str:
    """Write a graph and its params as a saved model (graph.json, params.npz, metadata.json)."""
    buffer = io.BytesIO()
    np.savez(buffer, **graph.params)

    def described(names: list[str]) -> dict[str, Any]:
        return {n: {"shape": list(graph.types[n].shape), "dtype": graph.types[n].dtype}
                for n in names}  # fmt: skip

    metadata = {
        "format": SAVED_MODEL_FORMAT,
        "format_version": SAVED_MODEL_FORMAT_VERSION,
        "tvmc_version": __version__,
        "inputs": described(graph.inputs),
        "outputs": described(graph.outputs),
    }
    members = {
        "metadata.json": json.dumps(metadata, indent=1).encode(),
        "graph.json": graph_to_json(graph).encode(),
        "params.npz": buffer.getvalue(),
    }
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with tarfile.open(tmp, "w") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, path)  # a crash mid-write never leaves half a model behind
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(
            f"cannot write the model to {path!r}: {exc.strerror or exc}; "
            "give -o a path in a writable directory"
        ) from None
    return path


def read_saved_graph(path: str) -> Graph:
    """The graph of a model written by `save_graph`."""
    members = read_tar_members(path, ("metadata.json", "graph.json", "params.npz"), "saved model")
    try:
        metadata = json.loads(members["metadata.json"])
    except ValueError as exc:
        raise ModelError(f"{path!r}: corrupt metadata.json: {exc}") from None
    if metadata.get("format") != SAVED_MODEL_FORMAT:
        raise ModelError(f"{path!r} is not a saved tvmc model")
    if metadata.get("format_version") != SAVED_MODEL_FORMAT_VERSION:
        raise ModelError(
            f"{path!r} has saved-model format {metadata.get('format_version')}; "
            f"this tvmc reads {SAVED_MODEL_FORMAT_VERSION}: load the original model again"
        )
    try:
        with np.load(io.BytesIO(members["params.npz"]), allow_pickle=False) as npz:
            params = {name: npz[name] for name in npz.files}
    except (ValueError, OSError) as exc:
        raise ModelError(f"{path!r}: corrupt params.npz: {exc}") from None
    return graph_from_json(members["graph.json"].decode(), params)


def read_tar_members(path: str, names: tuple[str, ...], what: str) -> dict[str, bytes]:
    """The named regular files of a tar, refusing anything else; ModelError when unreadable."""
    if not os.path.isfile(path):
        raise ModelError(f"{what} {path!r} does not exist" if not os.path.exists(path) else
                         f"{path!r} is not a file")  # fmt: skip
    try:
        with tarfile.open(path, "r:*") as tar:
            found = {}
            for member in tar.getmembers():
                if member.name in names and member.isfile():
                    handle = tar.extractfile(member)
                    found[member.name] = handle.read() if handle else b""
    except (tarfile.TarError, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[-1].lstrip("- ")  # tarfile lists each method it tried
        raise ModelError(
            f"{path!r} is not a readable {what} (corrupt or truncated?): {reason}"
        ) from None
    missing = [n for n in names if n not in found]
    if missing:
        raise ModelError(f"{path!r} is not a valid {what}: it lacks {', '.join(missing)}")
    return found


def guess_format(path: str, model_format: str | None) -> str:
    """The model format: given, or from the file extension."""
    if model_format is not None:
        if model_format not in MODEL_FORMATS:
            raise UsageError(unknown_choice("model format", model_format, MODEL_FORMATS))
        return model_format
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, "saved_model.pb")):
            raise UnsupportedModelError(f"{path!r} is a TensorFlow SavedModel; tvmc reads ONNX: "
                                        + _TO_ONNX["savedmodel"])  # fmt: skip
        raise ModelError(f"{path!r} is a directory, not a model file")
    ext = os.path.splitext(path)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if not os.path.exists(path):
        raise ModelError(f"model file {path!r} does not exist")
    if ext in _FOREIGN:
        framework, how = _FOREIGN[ext]
        raise UnsupportedModelError(f"{path!r} is a {framework} model; tvmc reads ONNX: "
                                    + _TO_ONNX[how])  # fmt: skip
    raise UsageError(
        f"cannot tell the format of {path!r} from its extension {ext or '(none)'!r}; "
        f"name it *.onnx or *.tvmc, or pass --model-format ({', '.join(MODEL_FORMATS)})"
    )


def load_graph(
    path: str,
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    model_format: str | None = None,
    dtype_dict: Mapping[str, str] | None = None,
    times: list[PassTime] | None = None,
) -> Graph:
    """The graph of an ONNX model (constants folded) or a saved `.tvmc` model; `times` gets
    one entry per step: "import" (read and convert), then each IMPORT_PIPELINE pass."""
    # imported here: reading MODEL_FORMATS or a saved model (tvmc run) needs no ONNX frontend
    from tvmc.driver.pipeline import PassTime
    from tvmc.frontend import load_onnx
    from tvmc.passes import IMPORT_PIPELINE, run_passes

    fmt = guess_format(path, model_format)
    start = time.perf_counter()
    if fmt == "tvmc":
        if shape_dict or dtype_dict:
            raise UsageError(
                "a saved .tvmc model has fixed input shapes; load the .onnx to change them"
            )
        graph = read_saved_graph(path)
        if times is not None:
            times.append(PassTime("read-saved", "load", time.perf_counter() - start))
        return graph
    graph = load_onnx(path, shape_dict, dtype_dict)
    imported = time.perf_counter()
    seconds: dict[str, float] = {}
    graph = run_passes(graph, IMPORT_PIPELINE, timings=seconds)
    if times is not None:
        times.append(PassTime("import", "load", imported - start))
        times += [PassTime(name, "load", t) for name, t in seconds.items()]
    logger.info("loaded %s in %.2f s: %d nodes", path, time.perf_counter() - start,
                len(graph.nodes))  # fmt: skip
    return graph
