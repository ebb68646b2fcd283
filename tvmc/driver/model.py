"""`TVMCModel` (a graph with its params) and `load`, the first of the four steps."""

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

from tvmc.errors import ModelError, UsageError, unknown_choice
from tvmc.frontend import load_onnx
from tvmc.graph import Graph, TensorType, graph_from_json, graph_to_json
from tvmc.passes import IMPORT_PIPELINE, run_passes
from tvmc.version import __version__

if TYPE_CHECKING:
    from tvmc.driver.package import TVMCPackage

logger = logging.getLogger("tvmc")

MODEL_FORMATS = ("onnx", "tvmc")
SAVED_MODEL_FORMAT_VERSION = 1
_EXTENSIONS = {".onnx": "onnx", ".tvmc": "tvmc"}


class TVMCModel:
    """A loaded model: the graph IR (static shapes) and its constant params."""

    def __init__(self, graph: Graph, source: str | None = None, load_seconds: float = 0.0):
        self.graph = graph
        self.source = source
        self.load_seconds = load_seconds

    @property
    def params(self) -> dict[str, np.ndarray]:
        return self.graph.params

    @property
    def inputs(self) -> dict[str, TensorType]:
        """Runtime inputs by name, in the model's order."""
        return {name: self.graph.types[name] for name in self.graph.inputs}

    @property
    def outputs(self) -> dict[str, TensorType]:
        """Outputs by the model's own names."""
        return {name: self.graph.types[name] for name in self.graph.outputs}

    def summary(self) -> str:
        """Inputs, outputs, op counts and the graph listing, as text."""
        lines = [f"model {self.graph.name}" + (f" (from {self.source})" if self.source else "")]
        lines += [f"  input  {name}: {typ}" for name, typ in self.inputs.items()]
        lines += [f"  output {name}: {typ}" for name, typ in self.outputs.items()]
        counts = ", ".join(f"{op} x{n}" for op, n in self.graph.op_counts().items())
        lines.append(f"  {len(self.graph.nodes)} nodes: {counts}")
        lines.append(f"  {len(self.params)} params, {self.graph.param_bytes() / 1e6:.2f} MB")
        return "\n".join(lines) + "\n\n" + self.graph.dump()

    def save(self, path: str) -> str:
        """Write the model as a tar (graph.json, params.npz, metadata.json); returns the path."""
        buffer = io.BytesIO()
        np.savez(buffer, **self.params)
        metadata = {
            "format": "tvmc.model",
            "format_version": SAVED_MODEL_FORMAT_VERSION,
            "tvmc_version": __version__,
            "inputs": {
                k: {"shape": list(t.shape), "dtype": t.dtype} for k, t in self.inputs.items()
            },
            "outputs": {
                k: {"shape": list(t.shape), "dtype": t.dtype} for k, t in self.outputs.items()
            },
        }
        members = {
            "metadata.json": json.dumps(metadata, indent=1).encode(),
            "graph.json": graph_to_json(self.graph).encode(),
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

    @classmethod
    def load(cls, path: str) -> TVMCModel:
        """Read a model written by `save`."""
        start = time.perf_counter()
        members = read_tar_members(
            path, ("metadata.json", "graph.json", "params.npz"), "saved model"
        )
        try:
            metadata = json.loads(members["metadata.json"])
        except ValueError as exc:
            raise ModelError(f"{path!r}: corrupt metadata.json: {exc}") from None
        if metadata.get("format") != "tvmc.model":
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
        graph = graph_from_json(members["graph.json"].decode(), params)
        return cls(graph, source=path, load_seconds=time.perf_counter() - start)

    def compile(
        self, target: str = "llvm", package_path: str | None = None, **options: Any
    ) -> TVMCPackage:
        """`tvmc.compile(self, target, package_path, **options)`: a TVMCPackage."""
        from tvmc.driver.package import compile_model  # package.py imports this module

        return compile_model(self, target, package_path, **options)

    def tune(self, target: str = "llvm", tuning_records: str | None = None, **options: Any) -> str:
        """`tvmc.tune(self, target, tuning_records, **options)`: the records path."""
        from tvmc.driver.tuning import tune  # tuning.py imports this module

        return tune(self, target, tuning_records, **options)

    def __repr__(self) -> str:
        return f"TVMCModel({self.graph.name!r}, {len(self.graph.nodes)} nodes)"


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
        raise ModelError(f"{path!r} is a directory, not a model file")
    ext = os.path.splitext(path)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if not os.path.exists(path):
        raise ModelError(f"model file {path!r} does not exist")
    raise UsageError(
        f"cannot tell the format of {path!r} from its extension {ext or '(none)'!r}; "
        f"name it *.onnx or *.tvmc, or pass --model-format ({', '.join(MODEL_FORMATS)})"
    )


def load(
    path: str,
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    model_format: str | None = None,
    dtype_dict: Mapping[str, str] | None = None,
) -> TVMCModel:
    """Load an ONNX model (or a saved `.tvmc` model) into a `TVMCModel`, constants folded."""
    fmt = guess_format(path, model_format)
    start = time.perf_counter()
    if fmt == "tvmc":
        if shape_dict or dtype_dict:
            raise UsageError(
                "a saved .tvmc model has fixed input shapes; load the .onnx to change them"
            )
        return TVMCModel.load(path)
    graph = load_onnx(path, shape_dict, dtype_dict)
    graph = run_passes(graph, IMPORT_PIPELINE)
    seconds = time.perf_counter() - start
    logger.info("loaded %s in %.2f s: %d nodes", path, seconds, len(graph.nodes))
    return TVMCModel(graph, source=path, load_seconds=seconds)
