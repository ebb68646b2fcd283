"""The four steps as functions (`tvmc.load/tune/compile/run`, and `extract_tasks`): each takes an
object or a file path, as TVMC's Python API does, and returns the next object.

A path is loaded (or read) first; the step itself is the object's method or the step module's
function. Never prints. Each function imports its step when called, so `run` (`tvmc run`) loads
neither the ONNX frontend, the compile pipeline nor the tuner.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tvmc.config import REMOTE_RUN_TIMEOUT
from tvmc.driver.objects import TVMCModel, TVMCPackage, TVMCResult
from tvmc.driver.runner import check_run_options
from tvmc.errors import UsageError

if TYPE_CHECKING:
    from tvmc.autotune import Task
    from tvmc.driver.pipeline import CompileProgress
    from tvmc.driver.tune_options import TuneOptions
    from tvmc.driver.tuning_report import TuningProgress


def load(
    path: str,
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    model_format: str | None = None,
    dtype_dict: Mapping[str, str] | None = None,
) -> TVMCModel:
    """Load an ONNX model (or a saved `.tvmc` model) into a `TVMCModel`, constants folded."""
    from tvmc.driver.model import load_graph

    start, times = time.perf_counter(), []
    graph = load_graph(path, shape_dict, model_format, dtype_dict, times)
    return TVMCModel(graph, path, time.perf_counter() - start, times)


def _model(
    model: TVMCModel | str | os.PathLike[str],
    shape_dict: Mapping[str, tuple[int, ...]] | None,
    dtype_dict: Mapping[str, str] | None,
    model_format: str | None,
) -> TVMCModel:
    """`model`, or the model file it names, loaded."""
    if isinstance(model, TVMCModel):
        return model
    return load(os.fspath(model), shape_dict, model_format, dtype_dict)


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
    force: bool = False,
    progress: CompileProgress | None = None,
    cross_compiler: str | None = None,
    cross_compiler_options: str | None = None,
    num_threads: int | None = None,
) -> TVMCPackage:
    """Compile a model (a TVMCModel or a model file) into a package; None path: a temp file.

    `tuning_records`: a records file (`tvmc tune`) whose best config per workload is applied;
    tasks without one keep the default schedule (one warning says how many). An existing file
    at `package_path` is replaced only if it is a tvmc package (not the model), or if `force`.
    `progress`: told as stages begin (import, optimize, records, lower, codegen, link) and as
    kernels' code is done (`tvmc compile` draws it on a terminal).
    `cross_compiler` (and `cross_compiler_options`, one string): the C compiler that links
    mod.so for a cross target, e.g. "aarch64-linux-gnu-gcc" (TVMC's names).
    `num_threads`: the threads runs of the package use, on the machine that runs it; the plan
    (kernels' default schedules, a batch's images side by side) is chosen for them (default:
    $TVMC_NUM_THREADS, else this machine's physical cores).
    """
    from tvmc.driver.package import compile_graph, cross_linker, dump_formats
    from tvmc.driver.pipeline import CompileProgress

    dump_formats(dump_code, target)  # bad options fail before the model loads
    cross_linker(target, cross_compiler, cross_compiler_options)
    if isinstance(model, TVMCModel) and (shape_dict or dtype_dict or model_format):
        raise UsageError(
            "shape_dict, dtype_dict and model_format apply to model files; "
            "this model is loaded already"
        )
    loaded = not isinstance(model, TVMCModel)
    if loaded:
        (progress or CompileProgress()).stage("import")
    model = _model(model, shape_dict, dtype_dict, model_format)
    compiled = compile_graph(
        model.graph, model.source, target, package_path, opt_level, disabled_passes, dump_code,
        target_llvm_mcpu, target_llvm_mattr, target_llvm_mtriple, tuning_records=tuning_records,
        load_times=model.load_times if loaded else None, force=force, progress=progress,
        cross_compiler=cross_compiler, cross_compiler_options=cross_compiler_options,
        num_threads=num_threads,
    )  # fmt: skip
    return TVMCPackage._compiled(compiled)


def run(
    package: TVMCPackage | str | os.PathLike[str],
    device: str = "cpu",
    inputs: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    fill_mode: str = "random",
    benchmark: bool = False,
    repeat: int = 10,
    number: int = 1,
    min_repeat_ms: float = 0.0,
    profile: bool = False,
    num_threads: int | None = None,
    end_to_end: bool = False,
    *,
    warmup: int = 1,
    duration: float = 0.0,
    scheduler: str | None = None,
    device_key: str | None = None,
    remote_timeout: float = REMOTE_RUN_TIMEOUT,
) -> TVMCResult:
    """Run a compiled package (or its path) once; optionally time it and profile its kernels.

    `device` must be the one the package was compiled for ("cuda" for `--target cuda`).
    `end_to_end`: on cuda, timings include copying inputs in and outputs out (by default they
    time the GPU work alone); on the CPU inputs and outputs are not copied, so it changes nothing.
    `warmup`: untimed runs before the measurements; `duration` > 0: measure until that many
    seconds have passed, and at least `repeat` times.
    `scheduler` and `device_key`: run on a Dask worker of that scheduler advertising that key
    (`tvmc worker --device-key`), stopped past `remote_timeout` seconds there; the result is
    the same, its `worker` names where it ran.
    """
    if isinstance(package, TVMCModel):
        raise UsageError("this model is not compiled yet: run tvmc.compile(model) first")
    check_run_options(device, repeat, number, min_repeat_ms, num_threads, warmup, duration)
    remote = scheduler is not None or device_key is not None
    if remote:  # Dask and the tuner's worker code only for a remote run
        from tvmc.driver.remote import Remote, check_remote, run_remote

        check_remote(scheduler, device_key)
    if not isinstance(package, TVMCPackage):
        package = TVMCPackage(package)
    options = dict(device=device, inputs=inputs, fill_mode=fill_mode, benchmark=benchmark,
                   repeat=repeat, number=number, min_repeat_ms=min_repeat_ms, profile=profile,
                   num_threads=num_threads, end_to_end=end_to_end, warmup=warmup,
                   duration=duration)  # fmt: skip
    if remote and scheduler is not None and device_key is not None:
        if not remote_timeout > 0:
            raise UsageError(f"remote_timeout must be positive, got {remote_timeout}")
        return run_remote(package, Remote(scheduler, device_key, remote_timeout), **options)
    return package.run(**options)


def tune(
    model: TVMCModel | str | os.PathLike[str],
    target: str | None = None,
    tuning_records: str | os.PathLike[str] | None = None,
    trials: int | None = None,
    *,
    options: TuneOptions | None = None,
    progress: TuningProgress | None = None,
    measurer: Any = None,
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    dtype_dict: Mapping[str, str] | None = None,
    model_format: str | None = None,
    **keywords: Any,
) -> str:
    """Tune a model's kernels and return the records path (`tvmc tune`); compile with it.

    The options come as a `TuneOptions`, as keywords (`trials=200, tuner="ga"`: its field
    names), or both (keywords override `options`; a keyword left None keeps the option).
    `tuning_records`: appended to, and resumed from when it exists (None: a temporary file).
    `measurer`: measure with this instead (e.g. a `DaskMeasurer` the caller keeps).
    """
    from tvmc.driver.tune_options import tune_options

    chosen = tune_options(options, target=target, trials=trials, **keywords)
    return _model(model, shape_dict, dtype_dict, model_format).tune(
        tuning_records=tuning_records, options=chosen, progress=progress, measurer=measurer
    )


def extract_tasks(
    model: TVMCModel | str | os.PathLike[str],
    target: str = "llvm",
    *,
    target_llvm_mcpu: str | None = None,
    target_llvm_mattr: str | None = None,
    opt_level: int = 3,
    disabled_passes: Sequence[str] = (),
    shape_dict: Mapping[str, tuple[int, ...]] | None = None,
    dtype_dict: Mapping[str, str] | None = None,
    model_format: str | None = None,
) -> list[Task]:
    """The tunable kernels of a model for a target, deduplicated and heaviest first."""
    from tvmc.driver.tuning import graph_tasks

    graph = _model(model, shape_dict, dtype_dict, model_format).graph
    return graph_tasks(graph, target, target_llvm_mcpu, target_llvm_mattr, opt_level,
                       disabled_passes)  # fmt: skip
