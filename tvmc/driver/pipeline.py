"""The compile pipeline as one list of named passes, from the loaded graph to native code.

`COMPILE_PIPELINE` reads top to bottom: the graph passes that change arithmetic (not meaning),
applying tuning records, fusion, lowering to kernels, memory planning and code generation. Each
pass has a one-line why, belongs to a stage (the summary line groups by stage), and is timed:
`tvmc compile --print-pass-times` shows the table. Loading (ONNX import and its passes) and
linking the package are timed the same way around it, in `tvmc.driver.model` and `package`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tvmc.codegen import CodegenOptions, CPUArtifact, CPUTarget
from tvmc.codegen.cuda_program import CUDAArtifact, emit_cuda_program
from tvmc.codegen.program import emit_program
from tvmc.codegen.target import CUDATarget
from tvmc.graph import Graph
from tvmc.lower import (
    FusionPlan,
    KernelLowering,
    LoweredModel,
    lower_kernels,
    plan_fusion,
    plan_memory,
)
from tvmc.ops import infer_node
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import OPTIMIZE_PIPELINE, Pass
from tvmc.passes.per_image import per_image_graph


@dataclass(frozen=True)
class PassTime:
    """How long one named pass took."""

    name: str
    stage: str  # load, optimize, records, lower, codegen, link
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.name, "stage": self.stage, "seconds": self.seconds}


class CompileProgress:
    """What compiling reports as it goes (the CLI draws it); every method may be left as is.
    Stages, in order: import (loading a model file), optimize, records, lower, codegen, link."""

    def stage(self, name: str) -> None:
        """A stage begins."""

    def kernels(self, done: int, total: int) -> None:
        """Code generation has finished `done` of the program's `total` kernels."""


@dataclass
class CompileState:
    """What the passes read and write, in pipeline order."""

    graph: Graph
    target: CPUTarget | CUDATarget
    lowering_target: LoweringTarget
    opt_level: int = 3
    codegen_jobs: int | None = None
    apply_records: Callable[[CompileState], Any] | None = None  # None: no --tuning-records
    tuning: Any = None  # AppliedTuning when records were applied
    fusion: FusionPlan | None = None
    kernels: KernelLowering | None = None
    lowered: LoweredModel | None = None
    artifact: CPUArtifact | CUDAArtifact | None = None
    times: list[PassTime] = field(default_factory=list)
    progress: CompileProgress = field(default_factory=CompileProgress)
    images: int = 1  # the batch the program runs image by image (`per-image`), else 1
    slots: int = 1  # image workspaces: the most images that run at once (the threads)


@dataclass(frozen=True)
class CompilePass:
    """One named step of compilation; `optional` passes may be named in --disabled-pass."""

    name: str
    stage: str
    why: str
    run: Callable[[CompileState], None]
    optional: bool = False
    applies: Callable[[CompileState], bool] = lambda state: True  # else skipped, not timed


def _graph_pass(graph_pass: Pass) -> CompilePass:
    def run(state: CompileState) -> None:
        state.graph = graph_pass.run(state.graph)

    return CompilePass(graph_pass.name, "optimize", graph_pass.why, run, optional=True)


def _verify(state: CompileState) -> None:
    state.graph.verify(infer_node)


def _per_image(state: CompileState) -> None:
    found = per_image_graph(state.graph)
    if found is not None and found[1] >= state.lowering_target.num_threads:
        state.graph, state.images = found  # (fewer images than threads: batched kernels use all)
        state.slots = state.lowering_target.num_threads  # at most one image a thread at once
        # each image's kernels run on one thread: their defaults are chosen for that
        state.lowering_target = dataclasses.replace(state.lowering_target, num_threads=1)


def _apply_records(state: CompileState) -> None:
    assert state.apply_records is not None
    state.tuning = state.apply_records(state)


def _fuse(state: CompileState) -> None:
    state.fusion = plan_fusion(state.graph, enabled=state.opt_level >= 1)


def _no_fusion(state: CompileState) -> None:
    state.fusion = plan_fusion(state.graph, enabled=False)


def _lower(state: CompileState) -> None:
    configs = state.tuning.configs if state.tuning is not None else None
    state.kernels = lower_kernels(state.graph, state.lowering_target, configs, state.fusion)


def _plan_memory(state: CompileState) -> None:
    assert state.kernels is not None
    state.lowered = plan_memory(state.kernels, state.images, state.slots)


def _codegen(state: CompileState) -> None:
    assert state.lowered is not None
    program = state.lowered.program
    if isinstance(state.target, CUDATarget):
        state.progress.kernels(0, len(program.kernels))
        state.artifact = emit_cuda_program(program, state.target)
        state.progress.kernels(len(program.kernels), len(program.kernels))
    else:
        options = CodegenOptions(opt_level=max(state.opt_level, 1))
        state.artifact = emit_program(program, state.target, options, jobs=state.codegen_jobs,
                                      on_kernels=state.progress.kernels)  # fmt: skip


COMPILE_PIPELINE: list[CompilePass] = [
    *(_graph_pass(p) for p in OPTIMIZE_PIPELINE),
    CompilePass("verify", "optimize", "every tensor's type is what its op's rule gives", _verify),
    CompilePass(
        "per-image",
        "optimize",
        "a batch whose images are computed apart runs them side by side, one a thread",
        _per_image,
        optional=True,
        applies=lambda state: not isinstance(state.target, CUDATarget),
    ),  # fmt: skip
    CompilePass(
        "apply-records",
        "records",
        "the best tuned config per task (--tuning-records)",
        _apply_records,
        applies=lambda state: state.apply_records is not None,
    ),  # fmt: skip
    CompilePass(
        "fuse",
        "lower",
        "elementwise chains become epilogues, cheap producers inline",
        _fuse,
        optional=True,
    ),  # fmt: skip
    CompilePass("lower", "lower", "kernels from each op's compute or template", _lower),
    CompilePass(
        "plan-memory", "lower", "intermediates share one workspace by lifetime", _plan_memory
    ),  # fmt: skip
    CompilePass(
        "codegen", "codegen", "kernel IR to LLVM IR (or NVPTX), optimized, to object code", _codegen
    ),  # fmt: skip
]
DISABLED_INSTEAD = {"fuse": _no_fusion}  # what a disabled pass does in its place
OPTIONAL_PASSES = tuple(dict.fromkeys(p.name for p in COMPILE_PIPELINE if p.optional))


def run_pipeline(
    state: CompileState, disabled: Iterable[str] = (), stages: Iterable[str] | None = None
) -> CompileState:
    """Run the passes of COMPILE_PIPELINE (those of `stages`, default all) on `state` in order,
    timing each; a disabled pass does what DISABLED_INSTEAD says, or nothing."""
    skip, wanted = set(disabled), None if stages is None else set(stages)
    stage = None
    for step in COMPILE_PIPELINE:
        if (wanted is not None and step.stage not in wanted) or not step.applies(state):
            continue
        if step.stage != stage:
            stage = step.stage
            state.progress.stage(stage)
        if step.name in skip:
            if step.name in DISABLED_INSTEAD:
                DISABLED_INSTEAD[step.name](state)
            continue
        start = time.perf_counter()
        step.run(state)
        state.times.append(PassTime(step.name, step.stage, time.perf_counter() - start))
    return state


def stage_seconds(times: Iterable[PassTime]) -> dict[str, float]:
    """Seconds per stage, in the order stages first appear."""
    totals: dict[str, float] = {}
    for t in times:
        totals[t.stage] = totals.get(t.stage, 0.0) + t.seconds
    return totals
