"""Compiling a TVMCModel: optimize the graph, lower it to kernels, generate native code."""

from __future__ import annotations

import logging
import shlex
import time
from dataclasses import dataclass, field

from tvmc.codegen import CodegenOptions, CPUArtifact, CPUTarget, num_threads
from tvmc.codegen.program import emit_program
from tvmc.errors import UsageError, did_you_mean
from tvmc.graph import Graph, graph_from_json, graph_to_json
from tvmc.lower import LoweredModel, lower_graph
from tvmc.ops import infer_node
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import ALL_PASSES, OPTIMIZE_PIPELINE, run_passes

logger = logging.getLogger("tvmc")

TARGET_KINDS = ("llvm",)  # "cuda" arrives with the CUDA backend
LOWERING_PASSES = ("fuse",)  # named steps of lowering that --disabled-pass may name too


@dataclass(frozen=True)
class CompileOptions:
    """Everything `tvmc compile` takes besides the model and the output path."""

    target: str = "llvm"
    mcpu: str | None = None  # --target-llvm-mcpu
    mattr: str | None = None  # --target-llvm-mattr
    mtriple: str | None = None  # --target-llvm-mtriple
    opt_level: int = 3
    disabled_passes: tuple[str, ...] = ()
    codegen_jobs: int | None = None  # processes generating code (default: the physical cores)


@dataclass
class BuildResult:
    """The products of compilation, before packaging."""

    graph: Graph
    lowered: LoweredModel
    artifact: CPUArtifact
    target: CPUTarget
    seconds: dict[str, float] = field(default_factory=dict)


def parse_target(options: CompileOptions) -> CPUTarget:
    """The CPU target from `--target` and the `--target-llvm-*` refinements."""
    words = options.target.split()
    kind = words[0] if words else ""
    if kind not in TARGET_KINDS:
        hint = did_you_mean(kind, TARGET_KINDS)
        extra = " (the CUDA backend is not built yet)" if kind == "cuda" else ""
        raise UsageError(f"unknown target {kind!r}{extra}; valid: {', '.join(TARGET_KINDS)}.{hint}")
    flags = {"-mtriple": options.mtriple, "-mcpu": options.mcpu, "-mattr": options.mattr}
    words += [f"{key}={value}" for key, value in flags.items() if value]  # flags refine the string
    target = CPUTarget.parse(" ".join(shlex.quote(w) for w in words))
    return target


def build(graph: Graph, options: CompileOptions) -> BuildResult:
    """Optimize, lower and generate code for `graph` (a copy is optimized; the input is kept)."""
    known = set(ALL_PASSES) | set(LOWERING_PASSES)
    for name in options.disabled_passes:
        if name not in known:
            raise UsageError(f"unknown pass {name!r} in --disabled-pass; valid: "
                             f"{', '.join(sorted(known))}.{did_you_mean(name, known)}")  # fmt: skip
    if not 0 <= options.opt_level <= 3:
        raise UsageError(f"--opt-level must be 0 to 3, got {options.opt_level}")
    target = parse_target(options)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    graph = _copy(graph)
    graph = run_passes(graph, OPTIMIZE_PIPELINE, options.disabled_passes)
    graph.verify(infer_node)
    seconds["optimize"] = time.perf_counter() - start

    start = time.perf_counter()
    lowering_target = LoweringTarget("cpu", target.vector_bits, num_threads())
    fuse = options.opt_level >= 1 and "fuse" not in options.disabled_passes
    lowered = lower_graph(graph, lowering_target, fuse=fuse)
    seconds["lower"] = time.perf_counter() - start

    start = time.perf_counter()
    codegen = CodegenOptions(opt_level=max(options.opt_level, 1))
    artifact = emit_program(lowered.program, target, codegen, jobs=options.codegen_jobs)
    seconds["codegen"] = time.perf_counter() - start
    logger.info("compiled %d kernels in %s", len(lowered.program.kernels),
                ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()))  # fmt: skip
    return BuildResult(graph, lowered, artifact, target, seconds)


def _copy(graph: Graph) -> Graph:
    """A graph whose node list and dicts can be rewritten without touching the original."""
    return graph_from_json(graph_to_json(graph), dict(graph.params))
