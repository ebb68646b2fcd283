"""Compiling a graph: check the options, then run the compile pipeline (tvmc.driver.pipeline)."""

from __future__ import annotations

import logging
import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from tvmc.autotune import best_records, extract_tasks
from tvmc.codegen import CPUArtifact, CPUTarget, num_threads
from tvmc.codegen.cuda_program import CUDAArtifact
from tvmc.codegen.target import CUDATarget, target_kind
from tvmc.driver.pipeline import (
    OPTIONAL_PASSES,
    CompileProgress,
    CompileState,
    PassTime,
    run_pipeline,
    stage_seconds,
)
from tvmc.driver.records import check_target_kind, load_records
from tvmc.errors import UsageError, did_you_mean
from tvmc.graph import Graph, graph_from_json, graph_to_json
from tvmc.lower import LoweredModel
from tvmc.ops.lowering import LoweringTarget
from tvmc.passes import ALL_PASSES
from tvmc.runtime.cuda_driver import present_arch

logger = logging.getLogger("tvmc")

TARGET_KINDS = ("llvm", "cuda")


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
    tuning_records: str | None = None  # --tuning-records: apply the best record per workload
    num_threads: int | None = None  # --num-threads: what runs use (default: this machine's)


@dataclass
class AppliedTuning:
    """What a records file changed: the config of each tuned node, and how many tasks it covered."""

    records_path: str
    configs: dict[str, dict[str, Any]]  # node name -> knob values (what templates read)
    tasks: int  # tunable workloads in the model
    tuned: int  # of them, the ones a usable record covers
    stale: int  # workloads whose only records were made for another version of the template

    @property
    def untuned(self) -> int:
        return self.tasks - self.tuned

    def to_json(self) -> dict[str, Any]:
        return {"records": self.records_path, "tasks": self.tasks, "tuned": self.tuned,
                "untuned": self.untuned, "stale": self.stale}  # fmt: skip


@dataclass
class BuildResult:
    """The products of compilation, before packaging."""

    graph: Graph
    lowered: LoweredModel
    artifact: CPUArtifact | CUDAArtifact
    target: CPUTarget | CUDATarget
    seconds: dict[str, float] = field(default_factory=dict)  # per stage
    tuning: AppliedTuning | None = None  # set when compiled with tuning records
    passes: list[PassTime] = field(default_factory=list)  # every pass, in order
    threads: int = 1  # the threads the code was planned for (CompileOptions.num_threads)


def checked_kind(target: str) -> str:
    """The target's kind (`llvm`, `cuda`); a UsageError naming the valid targets otherwise."""
    kind = target_kind(target)
    if kind not in TARGET_KINDS:
        hint = did_you_mean(kind, TARGET_KINDS)
        raise UsageError(
            f"unknown target {kind!r}; valid: 'llvm', 'llvm -mcpu=CPU', 'cuda', "
            f"'cuda -arch=sm_XX'.{hint}"
        )
    return kind


def parse_target(options: CompileOptions) -> CPUTarget | CUDATarget:
    """The target from `--target` (and for llvm the `--target-llvm-*` refinements).

    `cuda` without `-arch` is the present GPU's arch, else DEFAULT_CUDA_ARCH (sm_90).
    """
    words = options.target.split()
    kind = checked_kind(options.target)
    if kind == "cuda":
        given = [f"--target-llvm-{k}" for k in ("mcpu", "mattr", "mtriple")
                 if getattr(options, k)]  # fmt: skip
        if given:
            raise UsageError(f"{', '.join(given)} refine llvm targets, not {options.target!r}")
        if options.num_threads is not None:
            raise UsageError(f"--num-threads plans CPU code, not {options.target!r}")
        has_arch = any(w.startswith("-arch") for w in words[1:])
        return CUDATarget.parse(options.target, None if has_arch else present_arch())
    flags = {"-mtriple": options.mtriple, "-mcpu": options.mcpu, "-mattr": options.mattr}
    words += [f"{key}={value}" for key, value in flags.items() if value]  # flags refine the string
    target = CPUTarget.parse(" ".join(shlex.quote(w) for w in words))
    return target


def check_options(options: CompileOptions) -> CPUTarget | CUDATarget:
    """The target, after checking the options a user may get wrong (pass names, opt level)."""
    known = set(ALL_PASSES) | set(OPTIONAL_PASSES)
    for name in options.disabled_passes:
        if name not in known:
            raise UsageError(f"unknown pass {name!r} in --disabled-pass; valid: "
                             f"{', '.join(sorted(known))}.{did_you_mean(name, known)}")  # fmt: skip
    if not 0 <= options.opt_level <= 3:
        raise UsageError(f"--opt-level must be 0 to 3, got {options.opt_level}")
    threads = options.num_threads
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):  # fmt: skip
        raise UsageError(f"--num-threads must be a whole number of at least 1, got {threads!r}")
    return parse_target(options)


def planned_threads(options: CompileOptions) -> int:
    """The threads the runs of the code use, which its plan is chosen for: --num-threads,
    else this machine's (`num_threads`)."""
    return options.num_threads or num_threads()


def compile_state(
    graph: Graph, options: CompileOptions, progress: CompileProgress | None = None
) -> CompileState:
    """The pipeline's starting state: a copy of `graph` (the input is kept), the target."""
    target = check_options(options)
    if isinstance(target, CUDATarget):
        lowering_target = LoweringTarget(kind="cuda")
    else:
        lowering_target = LoweringTarget.of_cpu(target, planned_threads(options))
    records = options.tuning_records

    def apply(state: CompileState) -> AppliedTuning:
        assert records is not None
        return apply_records(state.graph, records, options.target, state.lowering_target,
                             image_threads(state))  # fmt: skip

    return CompileState(
        _copy(graph), target, lowering_target, options.opt_level, options.codegen_jobs,
        apply if records is not None else None, progress=progress or CompileProgress(),
    )  # fmt: skip


def optimize(
    graph: Graph, options: CompileOptions
) -> tuple[Graph, CPUTarget | CUDATarget, LoweringTarget, int]:
    """A copy of `graph` through the pipeline's optimize stage (what tuning extracts tasks
    from), the target, what templates see, and the threads its kernels run on where that is
    fixed (`image_threads`)."""
    state = run_pipeline(compile_state(graph, options), options.disabled_passes, ["optimize"])
    return state.graph, state.target, state.lowering_target, image_threads(state)


def image_threads(state: CompileState) -> int:
    """1 where the images of a batch run side by side, one a thread (each image's kernels on
    its thread alone), else 0: the kernels run on the machine's threads."""
    return 1 if state.images > 1 else 0


def build(
    graph: Graph, options: CompileOptions, progress: CompileProgress | None = None
) -> BuildResult:
    """`graph` (a copy: the input is kept) through COMPILE_PIPELINE, every pass timed and
    reported to `progress`."""
    state = run_pipeline(compile_state(graph, options, progress), options.disabled_passes)
    assert state.lowered is not None and state.artifact is not None
    seconds = stage_seconds(state.times)
    logger.info("compiled %d kernels in %s", len(state.lowered.program.kernels),
                ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()))  # fmt: skip
    return BuildResult(state.graph, state.lowered, state.artifact, state.target, seconds,
                       state.tuning, list(state.times), planned_threads(options))  # fmt: skip


def apply_records(
    graph: Graph, path: str, target: str, lowering_target: LoweringTarget, threads: int = 0
) -> AppliedTuning:
    """Per task of the optimized `graph`, the config `best_records` picks in `path`: the last
    paired check's verdict, else the best error-free record; `threads` > 0: the graph's
    kernels run on that many threads (an image's of a batch side by side)."""
    path = os.fspath(path)
    tasks = {t.workload: t for t in extract_tasks(graph, target, lowering_target, threads)}
    usable, stale, unknown = [], set(), set()
    records = load_records(path)  # a missing file, or one without a record, is an error
    check_target_kind(records, target, path)
    for record in records:
        task = tasks.get(record.workload)
        if task is None:
            continue
        if record.config.get("code_hash") not in (None, task.space.code_hash()):
            stale.add(record.workload)  # made for another version of the template
            continue
        usable.append(record)
    configs: dict[str, dict[str, Any]] = {}
    tuned = 0
    best = best_records(usable, target_kind(target))
    unclear = sum(1 for r in best.values() if r.verdict and r.verdict.kept and not r.won_clearly)
    if unclear:
        logger.warning("%s: the paired checks of %d task(s) kept a config on too few won rounds "
                       "to tell it from chance (an older tvmc's rule): their default schedules "
                       "are used", path, unclear)  # fmt: skip
    for workload, record in best.items():
        try:
            # a verdict the default won: its schedule, checked to be at least as fast
            values = (
                {}
                if record.applies_default
                else (tasks[workload].space.from_entity(record.config["entity"]).values)
            )
        except (ValueError, TypeError):
            unknown.add(workload)  # a config the space does not offer
            continue
        tuned += 1
        stale.discard(workload)
        configs.update({node: values for node in tasks[workload].nodes})
    stale -= unknown
    if stale:
        logger.warning("%s: the records of %d task(s) were made for another version of their "
                       "template and are ignored; tune them again", path, len(stale))  # fmt: skip
    if unknown:
        logger.warning("%s: the best records of %d task(s) name a config their template does "
                       "not offer (another tool's or version's records, or an edited file) and "
                       "are ignored", path, len(unknown))  # fmt: skip
    if tuned < len(tasks):
        logger.warning("%d of %d tasks have no usable record in %s and use default schedules",
                       len(tasks) - tuned, len(tasks), path)  # fmt: skip
    return AppliedTuning(path, configs, len(tasks), tuned, len(stale) + len(unknown))


def _copy(graph: Graph) -> Graph:
    """A graph whose node list and dicts can be rewritten without touching the original."""
    return graph_from_json(graph_to_json(graph), dict(graph.params))
