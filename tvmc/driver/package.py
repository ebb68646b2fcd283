"""`compile_model` (the third step) and `TVMCPackage`, the compiled model it writes."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tvmc.codegen.cuda_program import CUDAArtifact
from tvmc.codegen.target import NVPTX_TRIPLE, CPUTarget, CUDATarget, target_kind
from tvmc.driver.compiler import TARGET_KINDS, BuildResult, CompileOptions, build
from tvmc.driver.model import TVMCModel, load
from tvmc.errors import UsageError, did_you_mean
from tvmc.graph import TensorType
from tvmc.runtime import Executor, ProgramInfo
from tvmc.runtime.cuda import CUDAExecutor
from tvmc.runtime.package import (
    PACKAGE_FORMAT,
    PACKAGE_FORMAT_VERSION,
    PackageContents,
    link_shared_library,
    load_cuda,
    load_module,
    read_package,
    write_package,
)
from tvmc.version import __version__

if TYPE_CHECKING:
    from tvmc.driver.runner import TVMCResult

logger = logging.getLogger("tvmc")

# --dump-code: kernel IR, LLVM IR, assembly (for cuda: the PTX), PTX (cuda only), the graph
DUMP_FORMATS = ("kernel", "ll", "asm", "ptx", "graph")
DEFAULT_PACKAGE = "module.tar"  # TVMC's default output name


class TVMCPackage:
    """A compiled model package (a .tar): its metadata, and its code loaded once to run."""

    def __init__(self, package_path: str | os.PathLike[str], use_shared_library: bool = True):
        self.package_path = os.fspath(package_path)
        self.use_shared_library = use_shared_library  # False: load mod.o without a linker
        self.dumps: dict[str, str] = {}  # --dump-code files written by compile_model
        self._contents = read_package(self.package_path)
        self._executor: Executor | CUDAExecutor | None = None

    @classmethod
    def _written(cls, path: str, contents: PackageContents) -> TVMCPackage:
        """The package compile_model just wrote, without reading it back."""
        package = cls.__new__(cls)
        package.package_path, package.use_shared_library = path, True
        package.dumps, package._contents, package._executor = {}, contents, None
        return package

    @property
    def metadata(self) -> dict[str, Any]:
        """The parsed metadata.json."""
        return self._contents.metadata

    @property
    def inputs(self) -> dict[str, TensorType]:
        """Runtime inputs by the model's names, in order."""
        return _types(self.metadata["inputs"])

    @property
    def outputs(self) -> dict[str, TensorType]:
        """Outputs by the model's names, in order."""
        return _types(self.metadata["outputs"])

    @property
    def device(self) -> str:
        """Where the package's code runs: "cpu" or "cuda"."""
        return self._contents.device

    @property
    def program(self) -> ProgramInfo:
        """The entry function's plan (mod.json)."""
        return self._contents.program

    def executor(self) -> Executor | CUDAExecutor:
        """The loaded code with its params bound (loaded on first use, then reused).

        A CUDA package loads on the GPU: device memory, kernels and the CUDA graph, once.
        """
        if self._executor is None:
            contents = self._contents
            if contents.device == "cuda":
                self._executor = load_cuda(self.package_path, contents)
            else:
                module = load_module(self.package_path, contents, self.use_shared_library)
                self._executor = Executor(module, contents.program, contents.params)
        return self._executor

    def run(self, **options: Any) -> TVMCResult:
        """`tvmc.run(self, **options)`: a TVMCResult."""
        from tvmc.driver.runner import run  # runner imports this module

        return run(self, **options)

    def summary(self) -> dict[str, Any]:
        """What `tvmc compile --format json` prints: the package at a glance."""
        meta = self.metadata
        return {
            "package": self.package_path,
            "device": self.device,
            "target": meta["target"],
            "triple": meta["triple"],
            "cpu": meta["cpu"],
            "inputs": {
                e["name"]: {"shape": e["shape"], "dtype": e["dtype"]} for e in meta["inputs"]
            },
            "outputs": {
                e["name"]: {"shape": e["shape"], "dtype": e["dtype"]} for e in meta["outputs"]
            },
            "nodes": meta.get("nodes"),
            "kernels": meta.get("kernels"),
            "calls": meta.get("calls"),
            "workspace_bytes": meta["workspace_bytes"],
            "naive_bytes": meta["naive_bytes"],
            "param_bytes": meta.get("param_bytes"),
            "shared_library": self._contents.shared_library is not None,
            "compile_seconds": meta.get("compile_seconds", {}),
            "tuning": meta.get("tuning"),
            "dumps": dict(self.dumps),
        }

    def __repr__(self) -> str:
        return f"TVMCPackage({self.package_path!r}, target={self.metadata['target']!r})"


def _types(entries: list[dict[str, Any]]) -> dict[str, TensorType]:
    return {e["name"]: TensorType(tuple(e["shape"]), e["dtype"]) for e in entries}


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    """A comma-separated string or a list of (comma-separated) names, as a tuple."""
    items = [value] if isinstance(value, str) else list(value)
    return tuple(n.strip() for item in items for n in str(item).split(",") if n.strip())


def compile_model(
    model: TVMCModel | str | os.PathLike[str],
    target: str = "llvm",
    package_path: str | os.PathLike[str] | None = None,
    opt_level: int = 3,
    disabled_passes: str | Iterable[str] = (),
    dump_code: str | Iterable[str] = (),
    target_llvm_mcpu: str | None = None,
    target_llvm_mattr: str | None = None,
    target_llvm_mtriple: str | None = None,
    *,
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    dtype_dict: Mapping[str, str] | None = None,
    model_format: str | None = None,
    tuning_records: str | os.PathLike[str] | None = None,
) -> TVMCPackage:
    """Compile a model (a TVMCModel or a model file) into a package; None path: a temp file.

    `tuning_records`: a records file (`tvmc tune`) whose best config per workload is applied;
    tasks without one keep the default schedule (one warning says how many).
    """
    dumps = _names(dump_code)
    for fmt in dumps:
        if fmt not in DUMP_FORMATS:
            valid = ", ".join(DUMP_FORMATS)
            hint = did_you_mean(fmt, DUMP_FORMATS)
            raise UsageError(f"unknown --dump-code format {fmt!r}; valid: {valid}.{hint}")
    if "ptx" in dumps and target_kind(target) != "cuda":
        raise UsageError("--dump-code ptx needs a cuda target; for llvm targets dump asm")
    seconds: dict[str, float] = {}
    if not isinstance(model, TVMCModel):
        start = time.perf_counter()
        model = load(os.fspath(model), shape_dict, model_format, dtype_dict)
        seconds["load"] = time.perf_counter() - start
    elif shape_dict or dtype_dict or model_format:
        raise UsageError(
            "shape_dict, dtype_dict and model_format apply to model files; "
            "this model is loaded already"
        )
    options = CompileOptions(
        target=target,
        mcpu=target_llvm_mcpu,
        mattr=target_llvm_mattr,
        mtriple=target_llvm_mtriple,
        opt_level=opt_level,
        disabled_passes=_names(disabled_passes),
        codegen_jobs=1 if "asm" in dumps else None,  # assembly needs the one in-process module
        tuning_records=os.fspath(tuning_records) if tuning_records is not None else None,
    )
    result = build(model.graph, options)
    seconds.update(result.seconds)

    start = time.perf_counter()
    library = None
    # the system linker makes code for this machine's CPU only
    if isinstance(result.target, CPUTarget) and result.target.is_native:
        library = link_shared_library(result.artifact.object_code, result.artifact.uses_threads)
    seconds["link"] = time.perf_counter() - start

    temp_dir = None
    if package_path is None:
        temp_dir = tempfile.mkdtemp(prefix="tvmc-compile-")
        package_path = os.path.join(temp_dir, DEFAULT_PACKAGE)
    path = os.fspath(package_path)
    contents = _contents(model, result, options, library, seconds)
    try:
        write_package(path, contents)
    except BaseException:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    package = TVMCPackage._written(path, contents)
    if temp_dir is not None:  # the temporary package lives as long as the object
        weakref.finalize(package, shutil.rmtree, temp_dir, True)
    for fmt in dumps:
        text = result.graph.dump() if fmt == "graph" else result.artifact.dump(fmt)
        dump_path = package.dumps[fmt] = f"{path}.{fmt}"
        try:
            with open(dump_path, "w", encoding="utf-8") as f:
                f.write(text if text.endswith("\n") else text + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write {dump_path!r}: {exc.strerror or exc}") from None
    logger.info("wrote %s (%s)", path, ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()))
    return package


def _target_string(options: CompileOptions) -> str:
    """The target as typed, with the --target-llvm-* refinements folded in."""
    refinements = [(options.mtriple, "mtriple"), (options.mcpu, "mcpu"), (options.mattr, "mattr")]
    extra = [f"-{key}={value}" for value, key in refinements if value]
    return " ".join([options.target.strip(), *extra])


def _code_metadata(result: BuildResult) -> dict[str, Any]:
    """What the code is for: the CPU's triple/cpu/features, or the GPU arch (and its PTX ISA)."""
    target = result.target
    if isinstance(target, CUDATarget):
        return {"device": "cuda", "target": str(target), "triple": NVPTX_TRIPLE,
                "cpu": target.arch, "features": f"+{target.ptx_version}",
                "arch": target.arch}  # fmt: skip
    return {"device": "cpu", "triple": target.triple, "cpu": target.cpu,
            "features": target.features}  # fmt: skip


def _contents(
    model: TVMCModel,
    result: BuildResult,
    options: CompileOptions,
    library: bytes | None,
    seconds: dict[str, float],
) -> PackageContents:
    """The members of the package for a build."""
    program, graph = result.lowered.program, result.graph
    info = ProgramInfo(
        program.entry,
        program.inputs,
        program.outputs,
        program.params,
        program.buffers,
        program.calls,
        program.workspace_bytes,
        program.naive_bytes,
    )

    def entries(names: list[str], buffers: list[str]) -> list[dict[str, Any]]:
        return [
            {
                "name": n,
                "buffer": b,
                "shape": list(graph.types[n].shape),
                "dtype": graph.types[n].dtype,
            }
            for n, b in zip(names, buffers)
        ]

    params = dict(result.lowered.param_values)
    metadata = {
        "format": PACKAGE_FORMAT,
        "format_version": PACKAGE_FORMAT_VERSION,
        "tvmc_version": __version__,
        "model": model.source or graph.name,
        "target": _target_string(options),
        **_code_metadata(result),
        "opt_level": options.opt_level,
        "disabled_passes": list(options.disabled_passes),
        "inputs": entries(graph.inputs, program.inputs),
        "outputs": entries(graph.outputs, program.outputs),
        "configs": _kernel_configs(result),
        "tuning": result.tuning.to_json() if result.tuning else None,
        "workspace_bytes": program.workspace_bytes,
        "naive_bytes": program.naive_bytes,
        "param_bytes": sum(int(v.nbytes) for v in params.values()),
        "nodes": len(graph.nodes),
        "kernels": len(program.kernels),
        "calls": len(program.calls),
        "uses_threads": getattr(result.artifact, "uses_threads", False),
        "compile_seconds": seconds,
    }
    artifact = result.artifact
    if isinstance(artifact, CUDAArtifact):
        return PackageContents(metadata, info, artifact.kernels, params, b"", None,
                               artifact.ptx, artifact.launches)  # fmt: skip
    return PackageContents(metadata, info, artifact.kernels, params, artifact.object_code, library)


def _kernel_configs(result: BuildResult) -> dict[str, dict[str, Any]]:
    """Per kernel, the knob values of its node's tuning record ({}: the default schedule)."""
    program = result.lowered.program
    configs: dict[str, dict[str, Any]] = {kernel.name: {} for kernel in program.kernels}
    tuned = result.tuning.configs if result.tuning else {}
    for call in program.calls:
        # a call's node label is the node's name, then "+Op" per fused epilogue op
        parts = call.node.split("+")
        names = ("+".join(parts[:i]) for i in range(len(parts), 0, -1))
        node = next((n for n in names if n in tuned), None)
        if node is not None:
            configs[call.kernel] = _plain(tuned[node])
    return configs


def _plain(value: Any) -> Any:
    """Tuples as lists, so metadata reads back as it was written."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


__all__ = ["DEFAULT_PACKAGE", "DUMP_FORMATS", "TARGET_KINDS", "TVMCPackage", "compile_model"]
