"""Measuring configs: build each in a worker process, run them one at a time in another.

`build(input) -> BuildResult` lowers the task's op alone through its template with the config's
knobs and compiles it for the task's target; `run(build_result, options) -> MeasureResult`
loads the object (no linker), fills the inputs from a fixed seed, checks the output against the
op's numpy reference, and times it as TVM's time_evaluator. Both are plain picklable functions:
`LocalMeasurer` runs builds in parallel worker processes and runs serialized in one more, and
another engine (Dask) only changes where they execute.

Error codes as `records.ERROR_NAMES`: a template rejecting the config 1, a compile failure (or a
crashed build) 2, a crash or error while running 4, a wrong output 5, build timeout 6, run
timeout 7. A failed measurement costs `[FAILED_COST]`. Times are seconds.
"""

from __future__ import annotations

import ctypes
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from tvmc.autotune.records import FAILED_COST
from tvmc.autotune.task import Task
from tvmc.autotune.worker import Job, Outcome, Worker, run_parallel
from tvmc.codegen import (
    CPUTarget,
    KernelSignature,
    emit_cpu,
    load_object,
    num_threads,
    set_num_threads,
)
from tvmc.codegen import physical_cores as _physical_cores
from tvmc.errors import UsageError
from tvmc.graph import Node, TensorType
from tvmc.kernel import Buffer, Kernel
from tvmc.ops import OPS, evaluate_node
from tvmc.ops.lowering import LowerContext, LoweringTarget, buffer_shape, ref_of_buffer
from tvmc.ops.space import ConfigEntity, ConfigSpace
from tvmc.runtime.executor import aligned_empty, mean_seconds

# Inputs from this position on are constants (weights, bias) in the models these ops come from:
# the template packs them at build time, as compile does.
CONSTANTS_FROM = {"Conv": 1, "ConvTranspose": 1, "MatMul": 1, "Gemm": 1}
SEED = 0  # inputs are the same for every config of a task
TOLERANCE = {"float16": (1e-2, 1e-2)}  # (rtol, atol) by dtype; others (1e-3, 1e-4)
FLUSH_BYTES = 64 << 20  # written between repeats with flush_cache: more than the caches
MESSAGE_CHARS = 1000  # the end of an error text kept in a result


@dataclass(frozen=True)
class MeasureInput:
    """One config of one task to measure."""

    task: Task
    config: ConfigEntity


@dataclass
class MeasureResult:
    """Seconds per run (`repeat` of them), the error code, total seconds spent, when."""

    costs: list[float]
    error_no: int
    all_cost: float
    timestamp: float
    error_msg: str = ""


@dataclass(frozen=True)
class MeasureOptions:
    """How to measure (TVMC's defaults): runs, repeats, timeouts, parallel builds."""

    number: int = 1  # runs per repeat (grown until min_repeat_ms)
    repeat: int = 3  # results per config
    min_repeat_ms: float = 0.0
    timeout: float = 10.0  # seconds for one config's run (load, check, warm-up, timing)
    build_timeout: float = 10.0  # seconds for one config's build
    n_parallel: int | None = None  # builds at once (default: the physical cores)
    flush_cache: bool = False  # write a 64 MiB buffer before each repeat
    check_correctness: bool = True  # compare with the numpy reference (error 5 when wrong)


class Measurer(Protocol):
    """Measures configs: `LocalMeasurer` here, `dask_engine.DaskMeasurer` on a Dask cluster."""

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]: ...

    def close(self) -> None: ...


@dataclass
class BuildResult:
    """A compiled config, everything `run` needs (picklable), or why there is none."""

    object_code: bytes = b""
    kernels: tuple[KernelSignature, ...] = ()  # in call order
    inputs: tuple[tuple[tuple[int, ...], str], ...] = ()  # (shape, dtype): filled from SEED
    outputs: tuple[tuple[int, ...], ...] = ()  # logical shapes of out0, out1, ...
    params: dict[str, np.ndarray] = field(default_factory=dict)  # packed constants
    reference: list[np.ndarray] | None = None  # expected outputs, when checked
    seconds: float = 0.0
    error_no: int = 0
    error_msg: str = ""
    num_threads: int = 0  # threads the code was scheduled for and runs with (0: the default)


# ---- build ---------------------------------------------------------------------------------------
def task_types(task: Task) -> tuple[list[TensorType], dict[str, Any]]:
    """(input types, attributes) of a task's serialised args."""
    types = [TensorType(tuple(a[1]), a[2]) for a in task.args if a[0] == "TENSOR"]
    attrs = next((a[1] for a in task.args if a[0] == "ATTRS"), {})
    return types, attrs


def random_inputs(types: Sequence[TensorType], seed: int = SEED) -> list[np.ndarray]:
    """The inputs every measurement of a task uses: uniform in [-1, 1) (small ints, booleans)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for t in types:
        kind = np.dtype(t.dtype).kind
        if kind == "f":
            a = rng.uniform(-1.0, 1.0, t.shape)
        elif kind == "b":
            a = rng.integers(0, 2, t.shape)
        else:
            a = rng.integers(0 if kind == "u" else -3, 4, t.shape)
        arrays.append(np.ascontiguousarray(a.astype(t.dtype)))
    return arrays


def build(
    inp: MeasureInput, check_correctness: bool = True, threads: int | None = None
) -> BuildResult:
    """Lower the task's op alone with the config's knobs and compile it for the task's target.

    `threads`: what the code will run with (default: this process's `num_threads()`).
    """
    start = time.perf_counter()
    threads = threads or num_threads()
    task = inp.task
    target = CPUTarget.parse(task.target)
    op = TaskOp.of(task)

    def failed(error_no: int) -> BuildResult:
        text = traceback.format_exc()[-MESSAGE_CHARS:]
        return BuildResult(seconds=time.perf_counter() - start, error_no=error_no, error_msg=text)

    ctx = LowerContext(LoweringTarget("cpu", target.vector_bits, threads), inp.config.values, "k")
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
        reference = _reference(task, op.node, op.arrays) if check_correctness else None
    except Exception:
        return failed(8)
    return BuildResult(
        artifact.object_code, artifact.kernels, tuple((t.shape, t.dtype) for t in op.types),
        tuple(t.shape for t in op.out_types), {b.name: v for b, v in ctx.params}, reference,
        time.perf_counter() - start, num_threads=threads,
    )  # fmt: skip


@dataclass
class TaskOp:
    """A task's op alone, as `build` lowers it: its node, types, seeded inputs and buffers
    (the inputs from CONSTANTS_FROM on are constants, packed at build time as compile does)."""

    task: Task
    node: Node
    types: list[TensorType]
    out_types: list[TensorType]
    arrays: list[np.ndarray]

    @classmethod
    def of(cls, task: Task) -> TaskOp:
        types, attrs = task_types(task)
        node = Node(task.op, [f"in{i}" for i in range(len(types))], [], attrs, task.name)
        out_types = OPS[task.op].infer(node.attrs, types)
        return cls(task, node, types, out_types, random_inputs(types))

    def lower(self, ctx: LowerContext) -> list[Kernel]:
        """The op's template with `ctx`'s target and config (raises when it rejects them)."""
        first_constant = CONSTANTS_FROM.get(self.task.op, len(self.types))
        in_bufs = [Buffer(f"in{i}", buffer_shape(t.shape), t.dtype)
                   for i, t in enumerate(self.types)]  # fmt: skip
        out_bufs = [Buffer(f"out{i}", buffer_shape(t.shape), t.dtype)
                    for i, t in enumerate(self.out_types)]  # fmt: skip
        refs = [ref_of_buffer(f"in{i}", t, b, self.arrays[i] if i >= first_constant else None)
                for i, (t, b) in enumerate(zip(self.types, in_bufs))]  # fmt: skip
        return OPS[self.task.op].build(ctx, self.node.attrs, refs, out_bufs, None)


_references: dict[tuple[str, str], list[np.ndarray]] = {}  # per process: the last few tasks'


def _reference(task: Task, node: Node, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The op's numpy outputs on the task's inputs (the same for every config: cached)."""
    key = (task.op, repr(task.args))
    if key not in _references:
        if len(_references) >= 4:
            _references.pop(next(iter(_references)))
        _references[key] = evaluate_node(node, arrays)
    return _references[key]


# ---- run -----------------------------------------------------------------------------------------
_flush_buffer: np.ndarray | None = None


def run(built: BuildResult, options: MeasureOptions) -> MeasureResult:
    """Load, check and time one build: a warm-up, then `repeat` means of `number`+ runs."""
    start = time.perf_counter()
    if built.num_threads:
        set_num_threads(built.num_threads)
    module = load_object(built.object_code, built.kernels)
    arrays = _allocate(built)
    calls = [(module[k.name], [ctypes.c_void_p(arrays[p[0]].ctypes.data) for p in k.params])
             for k in built.kernels]  # fmt: skip

    def once() -> None:
        for fn, pointers in calls:
            fn(*pointers)

    once()  # warm-up: page in code and buffers, start the thread pool
    if built.reference is not None:
        wrong = _mismatch(built, arrays)
        if wrong:
            return MeasureResult([FAILED_COST], 5, time.perf_counter() - start, time.time(), wrong)
    costs = []
    for _ in range(options.repeat):
        if options.flush_cache:
            _flush()
        costs.append(mean_seconds(once, options.number, options.min_repeat_ms))
    return MeasureResult(costs, 0, time.perf_counter() - start, time.time())


def _allocate(built: BuildResult) -> dict[str, np.ndarray]:
    """Every buffer the kernels take, by name: inputs, NaN-poisoned outputs and scratch, params."""
    inputs = random_inputs([TensorType(s, d) for s, d in built.inputs])
    arrays: dict[str, np.ndarray] = {}
    for kernel in built.kernels:
        for name, shape, dtype in kernel.params:
            if name in arrays:
                continue
            a = aligned_empty(shape, dtype)
            if name in built.params:
                a[...] = built.params[name].reshape(shape)
            elif name.startswith("in") and name[2:].isdigit():
                a[...] = inputs[int(name[2:])].reshape(shape)
            else:  # outputs and scratch: a value that shows where nothing was written
                a[...] = np.nan if a.dtype.kind == "f" else 77
            arrays[name] = a
    return arrays


def _mismatch(built: BuildResult, arrays: dict[str, np.ndarray]) -> str:
    """'' when every output matches the reference, else what differs."""
    assert built.reference is not None
    for i, (shape, want) in enumerate(zip(built.outputs, built.reference)):
        if want.size == 0:
            continue
        if f"out{i}" not in arrays:
            return f"output {i} is written by no kernel"
        got = arrays[f"out{i}"].reshape(shape)
        rtol, atol = TOLERANCE.get(str(want.dtype), (1e-3, 1e-4))
        if want.dtype.kind in "fc":
            # long sums (a 18432-deep dense) leave rounding error near zero-valued outputs:
            # absolute tolerance relative to the output's scale, as the model tests compare
            atol = max(atol, atol * float(np.abs(want).max()))
            bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
        else:
            bad = got != want
        if bad.any():
            at = tuple(int(j) for j in np.argwhere(bad)[0])
            return (
                f"output {i}: {int(bad.sum())} of {bad.size} elements differ from the reference, "
                f"e.g. at {list(at)}: {got[at]!r} != {want[at]!r}"
            )
    return ""


def _flush() -> None:
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.zeros(FLUSH_BYTES // 8)
    _flush_buffer += 1.0


# ---- the local measurer --------------------------------------------------------------------------
class LocalMeasurer:
    """Builds in `n_parallel` worker processes, runs one at a time in another (this machine)."""

    def __init__(self, options: MeasureOptions | None = None, target: str = "llvm") -> None:
        self._build_fn, self._run_fn, options, preload = _measure_functions(target, options)
        self.options = options
        self.target = target
        count = options.n_parallel or _physical_cores()
        self._builders = [Worker(preload) for _ in range(max(1, count))]
        self._runner = Worker(preload)

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        """One result per input, in order; each config alone, on fresh buffers."""
        if not inputs:
            return []
        opts = self.options
        if self._runner.stale:
            self._runner.start()  # imports while the builds run
        threads = num_threads()  # this process's setting (set_num_threads) holds in the workers
        jobs: list[Job] = [(self._build_fn, (inp, opts.check_correctness, threads),
                            _imports(inp.task)) for inp in inputs]  # fmt: skip
        built = run_parallel(self._builders, jobs, opts.build_timeout)
        return [self._run(b) for b in built]

    def _run(self, outcome: Outcome) -> MeasureResult:
        if outcome.status == "timeout":
            return _failed(6, outcome.seconds, outcome.message)
        if outcome.status != "ok":  # a crashed build worker: LLVM itself died
            return _failed(2, outcome.seconds, outcome.message)
        built: BuildResult = outcome.value
        if built.error_no:
            return _failed(built.error_no, built.seconds, built.error_msg)
        ran = self._runner.call((self._run_fn, (built, self.options), ()), self.options.timeout)
        spent = outcome.seconds + ran.seconds
        if ran.status == "ok":
            result: MeasureResult = ran.value
            result.all_cost = spent
            return result
        return _failed(7 if ran.status == "timeout" else 4, spent, ran.message)

    def check_device(self) -> None:
        """Fail now, with the reason, when the runner cannot run this target's code (a CUDA
        target without a usable GPU), rather than recording that error for every config."""
        if self.target.split()[:1] != ["cuda"]:
            return  # a CPU target was checked to be native in __init__
        from tvmc.autotune.measure_cuda import gpu_problem

        probe = self._runner.call((gpu_problem, (), ()), self.options.timeout + 60)
        problem = probe.value if probe.status == "ok" else probe.message
        if problem:
            raise UsageError(f"cannot measure {self.target!r} configs here: {problem}")

    def close(self) -> None:
        """Stop every worker process."""
        for worker in [*self._builders, self._runner]:
            worker.close()

    def __enter__(self) -> LocalMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _measure_functions(
    target: str, options: MeasureOptions | None
) -> tuple[Any, Any, MeasureOptions, tuple[str, ...]]:
    """(build, run, options, worker preloads) for a target: the CPU's, or the GPU's."""
    options = options or MeasureOptions()
    if target.split()[:1] == ["cuda"]:  # PTX built in workers, run on this GPU by the runner
        from tvmc.autotune import measure_cuda  # imports this module: loaded on demand

        measure_cuda.CUDATarget.parse(target)  # a bad arch fails now, not in every build
        preload = ("tvmc.autotune.measure", "tvmc.autotune.measure_cuda")
        return (measure_cuda.build_cuda, measure_cuda.run_cuda,
                measure_cuda.cuda_options(options), preload)  # fmt: skip
    if not CPUTarget.parse(target).is_native:
        raise UsageError(f"cannot measure code for {target!r} on this machine")
    return build, run, options, ("tvmc.autotune.measure",)


def _failed(error_no: int, seconds: float, message: str) -> MeasureResult:
    return MeasureResult([FAILED_COST], error_no, seconds, time.time(), message[-MESSAGE_CHARS:])


def _imports(task: Task) -> tuple[str, ...]:
    """Modules a fresh process imports to know the task's op (tvmc's own are preloaded)."""
    opdef = OPS[task.op]
    functions = [getattr(low, "build", None) for low in opdef.lowerings.values()]
    names = {getattr(f, "__module__", None) for f in (*functions, opdef.reference)}
    return tuple(sorted(n for n in names if n and not n.startswith("tvmc.")))


def default_config(task: Task) -> dict[str, Any]:
    """The knobs of the untuned schedule: none, so the template uses its own defaults."""
    return {}


def default_entity() -> ConfigEntity:
    """A config with no knobs (values == {}): what `measure_default` measures."""
    return ConfigEntity(ConfigSpace(), 0, ())


def measure_default(task: Task, measurer: Measurer) -> MeasureResult:
    """The untuned baseline: the task with the template's default knobs."""
    return measurer.measure([MeasureInput(task, default_entity())])[0]
