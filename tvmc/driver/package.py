"""Compiling, the third step: a graph into a package (.tar) of native code, its plan, params and
metadata, and the --dump-code files beside it.

Works on graphs and package contents (`tvmc.driver.objects.TVMCPackage` wraps what this
writes); never prints.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tvmc.codegen.cuda_program import CUDAArtifact
from tvmc.codegen.llvm_cpu import CPUArtifact
from tvmc.codegen.program import heap_scratch_bytes
from tvmc.codegen.target import NVPTX_TRIPLE, CPUTarget, CUDATarget, target_kind
from tvmc.driver.compiler import TARGET_KINDS, BuildResult, CompileOptions, build
from tvmc.driver.outputs import check_output
from tvmc.driver.pipeline import CompileProgress, PassTime, stage_seconds
from tvmc.errors import UsageError, did_you_mean
from tvmc.graph import Graph
from tvmc.runtime import ProgramInfo
from tvmc.runtime.package import (
    PACKAGE_FORMAT,
    PACKAGE_FORMAT_VERSION,
    PackageContents,
    link_shared_library,
    write_package,
)
from tvmc.version import __version__

logger = logging.getLogger("tvmc")

# --dump-code: kernel IR, LLVM IR, assembly (for cuda: the PTX), PTX (cuda only), the graph
DUMP_FORMATS = ("kernel", "ll", "asm", "ptx", "graph")
DEFAULT_PACKAGE = "module.tar"  # TVMC's default output name


@dataclass
class CompiledPackage:
    """What `compile_graph` wrote: the package, its members, the dump files by format, and the
    temporary directory to remove with it (when no path was given)."""

    path: str
    contents: PackageContents
    dumps: dict[str, str] = field(default_factory=dict)
    temp_dir: str | None = None


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    """A comma-separated string or a list of (comma-separated) names, as a tuple."""
    items = [value] if isinstance(value, str) else list(value)
    return tuple(n.strip() for item in items for n in str(item).split(",") if n.strip())


def dump_formats(dump_code: str | Iterable[str], target: str) -> tuple[str, ...]:
    """The --dump-code formats, checked: each known, and ptx for cuda targets only."""
    dumps = _names(dump_code)
    for fmt in dumps:
        if fmt not in DUMP_FORMATS:
            valid = ", ".join(DUMP_FORMATS)
            hint = did_you_mean(fmt, DUMP_FORMATS)
            raise UsageError(f"unknown --dump-code format {fmt!r}; valid: {valid}.{hint}")
    if "ptx" in dumps and target_kind(target) != "cuda":
        raise UsageError("--dump-code ptx needs a cuda target; for llvm targets dump asm")
    return dumps


def compile_graph(
    graph: Graph,
    source: str | None = None,
    target: str = "llvm",
    package_path: str | os.PathLike[str] | None = None,
    opt_level: int = 3,
    disabled_passes: str | Iterable[str] = (),
    dump_code: str | Iterable[str] = (),
    target_llvm_mcpu: str | None = None,
    target_llvm_mattr: str | None = None,
    target_llvm_mtriple: str | None = None,
    *,
    tuning_records: str | os.PathLike[str] | None = None,
    load_times: list[PassTime] | None = None,
    force: bool = False,
    progress: CompileProgress | None = None,
    cross_compiler: str | None = None,
    cross_compiler_options: str | None = None,
    num_threads: int | None = None,
) -> CompiledPackage:
    """Compile a graph (from `source`, a model file) into a package; None path: a temp file.

    `tuning_records`: a records file (`tvmc tune`) whose best config per workload is applied;
    tasks without one keep the default schedule (one warning says how many). `load_times`: the
    passes of loading the model, when it was loaded to be compiled (metadata records them).
    The package replaces an existing tvmc package only: not the model, not any other file,
    unless `force`. `progress` hears each stage begin and kernels' code get done.
    `cross_compiler` (with `cross_compiler_options`, one shell-quoted string, as TVMC): the C
    compiler that links mod.so for the target, e.g. `aarch64-linux-gnu-gcc`; without it a
    package for another architecture holds mod.o only (tvmc loads it via LLVM). `num_threads`:
    the threads the runs use, which the code is planned for (default: this machine's).
    """
    dumps = dump_formats(dump_code, target)
    linker = cross_linker(target, cross_compiler, cross_compiler_options)
    if package_path is not None:
        inputs = {"the model": source, "the tuning records file": tuning_records}
        check_output(package_path, PACKAGE_FORMAT, inputs, force)
    passes = list(load_times or [])
    options = CompileOptions(
        target=target,
        mcpu=target_llvm_mcpu,
        mattr=target_llvm_mattr,
        mtriple=target_llvm_mtriple,
        opt_level=opt_level,
        disabled_passes=_names(disabled_passes),
        codegen_jobs=1 if "asm" in dumps else None,  # assembly needs the one in-process module
        tuning_records=os.fspath(tuning_records) if tuning_records is not None else None,
        num_threads=num_threads,
    )
    progress = progress or CompileProgress()
    result = build(graph, options, progress)
    passes += result.passes

    progress.stage("link")
    start = time.perf_counter()
    library = _link(result, linker)
    passes.append(PassTime("link", "link", time.perf_counter() - start))
    seconds = stage_seconds(passes)

    temp_dir = None
    if package_path is None:
        temp_dir = tempfile.mkdtemp(prefix="tvmc-compile-")
        package_path = os.path.join(temp_dir, DEFAULT_PACKAGE)
    path = os.fspath(package_path)
    compiled = CompiledPackage(path, _contents(source, result, options, library, passes), {},
                               temp_dir)  # fmt: skip
    try:
        write_package(path, compiled.contents)
        for fmt in dumps:
            text = result.graph.dump() if fmt == "graph" else result.artifact.dump(fmt)
            compiled.dumps[fmt] = _write_dump(f"{path}.{fmt}", text)
    except BaseException:
        if temp_dir is not None:  # no package object owns it yet
            shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    logger.info("wrote %s (%s)", path, ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()))
    return compiled


def cross_linker(
    target: str, cross_compiler: str | None, options: str | None
) -> tuple[str, tuple[str, ...]] | None:
    """(compiler, options) for `--cross-compiler`/`--cross-compiler-options`, checked before
    compiling: a CPU target, a compiler on PATH, options that split like a shell's."""
    if cross_compiler is None:
        if options:
            raise UsageError("--cross-compiler-options needs --cross-compiler")
        return None
    if target_kind(target) != "llvm":
        raise UsageError(f"--cross-compiler links CPU code; {target!r} packages hold PTX, "
                         "which the driver compiles when loading")  # fmt: skip
    if shutil.which(cross_compiler) is None:
        raise UsageError(f"--cross-compiler {cross_compiler!r} is not a program on PATH; install "
                         "the target's toolchain (e.g. gcc-aarch64-linux-gnu) or give its "
                         "path")  # fmt: skip
    try:
        return cross_compiler, tuple(shlex.split(options or ""))
    except ValueError as exc:
        raise UsageError(f"--cross-compiler-options {options!r}: {exc}") from None


def suggested_cross_compiler(triple: str) -> str | None:
    """A `<triple>-gcc` on PATH that would link mod.so for `triple` (vendor part dropped too)."""
    parts = triple.split("-")
    names = [f"{triple}-gcc"]
    if len(parts) == 4:  # aarch64-unknown-linux-gnu: Debian's compiler is aarch64-linux-gnu-gcc
        names.append(f"{parts[0]}-{'-'.join(parts[2:])}-gcc")
    return next((name for name in names if shutil.which(name)), None)


def _link(result: BuildResult, linker: tuple[str, tuple[str, ...]] | None) -> bytes | None:
    """mod.so for a CPU build: by the cross compiler when given, else by this machine's C
    compiler when the code is for this machine; None otherwise (mod.o only)."""
    target, artifact = result.target, result.artifact
    if not isinstance(target, CPUTarget) or not isinstance(artifact, CPUArtifact):
        return None
    if linker is None:
        if target.is_native:
            return link_shared_library(artifact.object_code)
        logger.info("no mod.so for %s without --cross-compiler: the package holds mod.o, which "
                    "tvmc run loads via LLVM on such a machine", target.triple)  # fmt: skip
        return None
    try:
        return link_shared_library(artifact.object_code, *linker)
    except RuntimeError as exc:
        raise UsageError(f"--cross-compiler {linker[0]} could not link mod.so for "
                         f"{target.triple}: {exc}") from None  # fmt: skip


def _write_dump(path: str, text: str) -> str:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {path!r}: {exc.strerror or exc}") from None
    return path


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
    source: str | None,
    result: BuildResult,
    options: CompileOptions,
    library: bytes | None,
    passes: list[PassTime],
) -> PackageContents:
    """The members of the package for a build."""
    program, graph = result.lowered.program, result.graph
    info = ProgramInfo.of(program)

    def entries(names: list[str], buffers: list[str]) -> list[dict[str, Any]]:
        return [
            {
                "name": n,
                "buffer": b,
                "shape": list(info.caller_shape(b)),
                "dtype": graph.types[n].dtype,
            }
            for n, b in zip(names, buffers)
        ]

    params = dict(result.lowered.param_values)
    metadata = {
        "format": PACKAGE_FORMAT,
        "format_version": PACKAGE_FORMAT_VERSION,
        "tvmc_version": __version__,
        "model": source or graph.name,
        "target": _target_string(options),
        **_code_metadata(result),
        "opt_level": options.opt_level,
        "disabled_passes": list(options.disabled_passes),
        "inputs": entries(graph.inputs, program.inputs),
        "outputs": entries(graph.outputs, program.outputs),
        "configs": _kernel_configs(result),
        "tuning": result.tuning.to_json() if result.tuning else None,
        "workspace_bytes": info.all_workspace_bytes,
        "naive_bytes": program.naive_bytes * program.images,
        **_heap_scratch(result),
        "param_bytes": sum(int(v.nbytes) for v in params.values()),
        "nodes": len(graph.nodes),
        "kernels": len(program.kernels),
        "calls": len(program.calls),
        "uses_threads": getattr(result.artifact, "uses_threads", False),
        "compile_seconds": stage_seconds(passes),
        "pass_seconds": [t.to_json() for t in passes],
    }
    artifact = result.artifact
    if isinstance(artifact, CUDAArtifact):
        return PackageContents(metadata, info, artifact.kernels, params, b"", None,
                               artifact.ptx, artifact.launches)  # fmt: skip
    return PackageContents(metadata, info, artifact.kernels, params, artifact.object_code, library)


def _heap_scratch(result: BuildResult) -> dict[str, int]:
    """The kernels' heap scratch beside the workspace, on the threads runs use by default (a
    CUDA program's scratch is registers and shared memory)."""
    if not isinstance(result.artifact, CPUArtifact):
        return {}
    threads = result.threads
    scratch = heap_scratch_bytes(result.lowered.program, threads)
    return {"heap_scratch_bytes": scratch, "heap_scratch_threads": threads}


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


__all__ = [
    "DEFAULT_PACKAGE",
    "DUMP_FORMATS",
    "TARGET_KINDS",
    "CompiledPackage",
    "compile_graph",
    "cross_linker",
    "suggested_cross_compiler",
]
