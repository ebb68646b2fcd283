"""Measuring configs on this machine's CPU: `build` compiles a config to an object file (no
linker), `run` loads it, checks the outputs against the reference and times it as TVM's
time_evaluator does (a warm-up, then means of `number`+ runs), repeated until the fastest
`repeat` of them agree (`measure.stable_costs`)."""

from __future__ import annotations

import ctypes
import time
import traceback

import numpy as np

from tvmc.autotune.measure import (
    MESSAGE_CHARS,
    BuildResult,
    MeasureBackend,
    MeasureInput,
    MeasureOptions,
    MeasureResult,
    PastEndGrant,
    TaskOp,
    output_mismatch,
    random_inputs,
    stable_costs,
)
from tvmc.autotune.records import FAILED_COST
from tvmc.codegen import CPUTarget, emit_cpu, load_object, num_threads, set_num_threads
from tvmc.dtypes import numpy_dtype
from tvmc.errors import UsageError
from tvmc.graph import TensorType
from tvmc.ops.lowering import LowerContext, LoweringTarget
from tvmc.runtime.executor import aligned_empty
from tvmc.runtime.timing import mean_seconds

FLUSH_BYTES = 64 << 20  # written between repeats with flush_cache: more than the caches


def build(
    inp: MeasureInput, check_correctness: bool = True, threads: int | None = None
) -> BuildResult:
    """Lower the task's op alone with the config's knobs and compile it for the task's target.

    `threads`: what the code will run with (default: this process's `num_threads()`), unless
    the task's kernels run on a fixed count (`Task.threads`: an image's of a batch side by side).
    """
    start = time.perf_counter()
    task = inp.task
    threads = task.threads or threads or num_threads()
    target = CPUTarget.parse(task.target)
    op = TaskOp.of(task)

    def failed(error_no: int) -> BuildResult:
        text = traceback.format_exc()[-MESSAGE_CHARS:]
        return BuildResult(seconds=time.perf_counter() - start, error_no=error_no, error_msg=text)

    lowering = LoweringTarget.of_cpu(target, threads)
    grant = PastEndGrant.of(task)  # as compile lowers a conv reading an intermediate
    ctx = LowerContext(lowering, inp.config.values, "k", may_read_past_end=grant)
    try:
        kernels = op.lower(ctx)
    except Exception:
        return failed(1)
    try:
        if not target.is_native:
            raise RuntimeError(f"cannot run code for {target.triple} on this machine")
        artifact = emit_cpu(kernels, target)
    except Exception:
        return failed(2)
    try:
        reference = op.reference() if check_correctness else None
    except Exception:
        return failed(8)
    return BuildResult(
        artifact.object_code, artifact.kernels, tuple((t.shape, t.dtype) for t in op.types),
        tuple(t.shape for t in op.out_types), {b.name: v for b, v in ctx.params}, reference,
        time.perf_counter() - start, num_threads=threads, read_slack=grant.nbytes,
    )  # fmt: skip


_flush_buffer: np.ndarray | None = None


def run(built: BuildResult, options: MeasureOptions) -> MeasureResult:
    """Load, check and time one build: a warm-up, then means of `number`+ runs until the
    fastest `repeat` agree (`stable_costs`)."""
    start = time.perf_counter()
    if built.num_threads:
        set_num_threads(built.num_threads)
    module = load_object(built.object_code, built.kernels)
    arrays = allocate_buffers(built)
    calls = [(module[k.name], [ctypes.c_void_p(arrays[p[0]].ctypes.data) for p in k.params])
             for k in built.kernels]  # fmt: skip

    def once() -> None:
        for fn, pointers in calls:
            fn(*pointers)

    once()  # warm-up: page in code and buffers, start the thread pool
    if module.scratch_failed():  # the kernels skipped work: no time of theirs means anything
        return MeasureResult([FAILED_COST], 4, time.perf_counter() - start, time.time(),
                             "no memory for the kernels' heap scratch")  # fmt: skip
    if built.reference is not None:
        wrong = output_mismatch(built, arrays)
        if wrong:
            return MeasureResult([FAILED_COST], 5, time.perf_counter() - start, time.time(), wrong)

    def measure_once() -> float:
        if options.flush_cache:
            _flush()
        return mean_seconds(once, options.number, options.min_repeat_ms)

    costs = stable_costs(measure_once, options)
    return MeasureResult(costs, 0, time.perf_counter() - start, time.time())


def allocate_buffers(built: BuildResult) -> dict[str, np.ndarray]:
    """Every buffer the kernels take, by name: inputs (followed by `read_slack` poisoned bytes
    the kernels may read and drop), NaN-poisoned outputs and scratch, params."""
    inputs = random_inputs([TensorType(s, d) for s, d in built.inputs])
    arrays: dict[str, np.ndarray] = {}
    for kernel in built.kernels:
        for name, shape, dtype in kernel.params:
            if name in arrays:
                continue
            if name in built.params:
                a = aligned_empty(shape, dtype)
                a[...] = built.params[name].reshape(shape)
            elif name.startswith("in") and name[2:].isdigit():
                a = _padded_empty(shape, dtype, max(built.read_slack, 0))
                a[...] = inputs[int(name[2:])].reshape(shape)
            else:
                a = aligned_empty(shape, dtype)
                _poison(a)
            arrays[name] = a
    return arrays


def _padded_empty(shape: tuple[int, ...], dtype: str, slack: int) -> np.ndarray:
    """An aligned array followed by at least `slack` poisoned bytes: values a kernel granted
    `read_slack` loads and drops (NaN: a kernel that kept one fails `output_mismatch`)."""
    size = int(np.prod(shape, dtype=np.int64))
    extra = -(-slack // numpy_dtype(dtype).itemsize)
    flat = aligned_empty((size + extra,), dtype)
    _poison(flat)
    return flat[:size].reshape(shape)


def _poison(a: np.ndarray) -> None:
    """Fill `a` with a value that shows where nothing was written (or what was read past)."""
    a[...] = np.nan if a.dtype.kind == "f" else 77


def _flush() -> None:
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.zeros(FLUSH_BYTES // 8)
    _flush_buffer += 1.0


def check_target(target: str, here: bool) -> None:
    """A UsageError when `target` is no CPU target, or (measured here) not this machine's."""
    if not CPUTarget.parse(target).is_native and here:
        raise UsageError(
            f"tuning measures kernels on this machine, and target {target!r} "
            "cannot run here; tune on a machine of that architecture"
        )


BACKEND = MeasureBackend("llvm", build, run, check_target, ("tvmc.autotune.measure_cpu",))
