"""Measuring configs, the part every backend shares: what goes in and comes out, the options, the
inputs and the reference a build is checked against, and the `MeasureBackend` a target kind has.

A backend is a pair of plain picklable functions: `build(input) -> BuildResult` lowers the task's
op alone through its template with the config's knobs and compiles it for the task's target;
`run(build_result, options) -> MeasureResult` loads it, fills the inputs from a fixed seed,
checks the output against the op's numpy reference and times it. `measure_cpu` and
`measure_cuda` hold the two backends (each imports only this module), `backends.BACKENDS` maps a
target kind to its backend, and a measurer (`local.LocalMeasurer` on this machine,
`dask_engine.DaskMeasurer` on a cluster) only chooses where the functions execute.

Error codes as `records.ERROR_NAMES`: a template rejecting the config 1, a compile failure (or a
crashed build) 2, a compile failure for the device 3, a crash or error while running 4, a wrong
output 5, build timeout 6, run timeout 7. A failed measurement costs `[FAILED_COST]`. Times are
seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from tvmc.autotune.records import FAILED_COST
from tvmc.autotune.task import Task
from tvmc.codegen import KernelSignature
from tvmc.dtypes import FLOATS, NARROW_FLOATS
from tvmc.graph import Node, TensorType
from tvmc.kernel import Buffer, Kernel
from tvmc.ops import OPS, evaluate_node
from tvmc.ops.lowering import LowerContext, buffer_shape, ref_of_buffer
from tvmc.ops.space import ConfigEntity, ConfigSpace

# Inputs from this position on are constants (weights, bias) in the models these ops come from:
# the template packs them at build time, as compile does.
SEED = 0  # inputs are the same for every config of a task
# (rtol, atol) by dtype; others (1e-3, 1e-4). bfloat16: its ulp is 2**-8 relative
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}
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
    repeat: int = 3  # results per config: the fastest `repeat` of the measurements taken
    max_repeat: int = 12  # measurements per config at most while the fastest `repeat` disagree
    stable_spread: float = 0.03  # they agree when (slowest - fastest) / fastest is at most this
    min_repeat_ms: float = 0.0
    timeout: float = 10.0  # seconds for one config's run (load, check, warm-up, timing)
    build_timeout: float = 10.0  # seconds for one config's build
    n_parallel: int | None = None  # builds at once (default: the physical cores)
    flush_cache: bool = False  # write a 64 MiB buffer before each repeat
    check_correctness: bool = True  # compare with the numpy reference (error 5 when wrong)


class Measurer(Protocol):
    """Measures configs: `local.LocalMeasurer` here, `dask_engine.DaskMeasurer` on a cluster."""

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
    read_slack: int = 0  # bytes the kernels may read past each data input's end (`PastEndGrant`)


def same_options(options: MeasureOptions) -> MeasureOptions:
    """A backend's options as given (the CPU's: TVMC's defaults need no change)."""
    return options


@dataclass(frozen=True)
class MeasureBackend:
    """How configs for one target kind are built and run; the functions are module-level, so
    they pickle into worker processes by name."""

    kind: str  # the target kind (`target_kind`) it measures
    build: Callable[..., BuildResult]  # (input, check_correctness, threads) -> BuildResult
    run: Callable[[Any, MeasureOptions], MeasureResult]  # (its BuildResult, options)
    check: Callable[[str, bool], None]  # (target, measured here?): UsageError when it cannot be
    preload: tuple[str, ...]  # modules a fresh worker process imports for these functions
    options: Callable[[MeasureOptions], MeasureOptions] = same_options  # the kind's defaults
    device_problem: Callable[[], str | None] | None = None  # in the runner: why no device
    exclusive_runs: bool = True  # a run needs the host's cores alone (no builds beside it)


def stable_costs(measure_once: Callable[[], float], options: MeasureOptions) -> list[float]:
    """`repeat` measurements that agree, in the order taken: measure until some `repeat` of
    them lie within `stable_spread` of each other (the fastest such group), or `max_repeat`
    were taken (then the fastest `repeat`). A measurement hit by a neighbour's burst is taken
    again instead of deciding between configs, and one lucky run decides nothing alone."""
    keep = max(options.repeat, 1)
    costs: list[float] = []
    while True:
        costs.append(measure_once())
        order = sorted(range(len(costs)), key=costs.__getitem__)
        for first in range(len(costs) - keep + 1):
            group = order[first : first + keep]
            low, high = costs[group[0]], costs[group[-1]]
            if high - low <= options.stable_spread * low:
                return [costs[i] for i in sorted(group)]
        if len(costs) >= max(options.max_repeat, keep):
            return [costs[i] for i in sorted(order[:keep])]


# ---- what every backend builds and checks against ------------------------------------------------
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
        if t.dtype in FLOATS:  # bfloat16 and float8 too (numpy calls them void)
            a = rng.uniform(-1.0, 1.0, t.shape)
        elif kind == "b":
            a = rng.integers(0, 2, t.shape)
        else:
            a = rng.integers(0 if kind == "u" else -3, 4, t.shape)
        arrays.append(np.ascontiguousarray(a.astype(t.dtype)))
    return arrays


@dataclass
class TaskOp:
    """A task's op alone, as a build lowers it: its node, types, seeded inputs and buffers
    (the op's weight inputs are constants, packed at build time as compile does)."""

    task: Task
    node: Node
    types: list[TensorType]
    out_types: list[TensorType]
    arrays: list[np.ndarray]

    @classmethod
    def of(cls, task: Task) -> TaskOp:
        """The task's op with its types and seeded inputs."""
        types, attrs = task_types(task)
        node = Node(task.op, [f"in{i}" for i in range(len(types))], [], attrs, task.name)
        out_types = OPS[task.op].infer(node.attrs, types)
        return cls(task, node, types, out_types, random_inputs(types))

    def lower(self, ctx: LowerContext) -> list[Kernel]:
        """The op's template with `ctx`'s target and config (raises when it rejects them)."""
        weights = OPS[self.task.op].weights
        in_bufs = [Buffer(f"in{i}", buffer_shape(t.shape), t.dtype)
                   for i, t in enumerate(self.types)]  # fmt: skip
        out_bufs = [Buffer(f"out{i}", buffer_shape(t.shape), t.dtype)
                    for i, t in enumerate(self.out_types)]  # fmt: skip
        refs = [ref_of_buffer(f"in{i}", t, b, self.arrays[i] if i in weights else None)
                for i, (t, b) in enumerate(zip(self.types, in_bufs))]  # fmt: skip
        return OPS[self.task.op].build(ctx, self.node.attrs, refs, out_bufs, None)

    def reference(self) -> list[np.ndarray]:
        """The op's numpy outputs on the task's inputs (the same for every config: cached)."""
        key = (self.task.op, repr(self.task.args))
        if key not in _references:
            if len(_references) >= 4:
                _references.pop(next(iter(_references)))
            _references[key] = evaluate_node(self.node, self.arrays)
        return _references[key]


_references: dict[tuple[str, str], list[np.ndarray]] = {}  # per process: the last few tasks'


@dataclass
class PastEndGrant:
    """`LowerContext.may_read_past_end` for a task built alone: yes for its data inputs (not the
    constant weights, not the outputs), as compile grants a workspace intermediate, so that the
    measured kernels are the compiled ones (a 1x1 conv reads its input in place, no copy).
    `nbytes` is the most granted: the measurer allocates each data input padded by that much,
    so the grant is exactly what the lowering asked and the allocation follows it.

    Granted whether or not the convs sharing the workload read a model input (which compile
    does not grant): a task is a workload without that knowledge, and the usual 1x1 conv reads
    an intermediate (a model's first conv reads the image through a kxk window)."""

    data_inputs: frozenset[str]
    nbytes: int = 0

    @classmethod
    def of(cls, task: Task) -> PastEndGrant:
        """The grant for `task`'s buffers as `TaskOp.lower` names them (in0, in1, ...)."""
        weights = OPS[task.op].weights
        count = len(task_types(task)[0])
        return cls(frozenset(f"in{i}" for i in range(count) if i not in weights))

    def __call__(self, buf: Buffer, nbytes: int) -> bool:
        if buf.name not in self.data_inputs:
            return False
        self.nbytes = max(self.nbytes, nbytes)
        return True


def output_mismatch(built: BuildResult, arrays: dict[str, np.ndarray]) -> str:
    """'' when every output in `arrays` (by buffer name) matches the reference, else how not."""
    assert built.reference is not None
    for i, (shape, want) in enumerate(zip(built.outputs, built.reference)):
        if want.size == 0:
            continue
        if f"out{i}" not in arrays:
            return f"output {i} is written by no kernel"
        got = arrays[f"out{i}"].reshape(shape)
        rtol, atol = TOLERANCE.get(str(want.dtype), (1e-3, 1e-4))
        if want.dtype.name in NARROW_FLOATS:  # compared as the float32 values they are
            got, want = got.astype(np.float32), want.astype(np.float32)
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


def failed_result(error_no: int, seconds: float, message: str) -> MeasureResult:
    """A failed measurement: cost [FAILED_COST], the error code and the end of the message."""
    return MeasureResult([FAILED_COST], error_no, seconds, time.time(), message[-MESSAGE_CHARS:])


def task_imports(task: Task) -> tuple[str, ...]:
    """Modules a fresh process imports to know the task's op (tvmc's own are preloaded)."""
    opdef = OPS[task.op]
    functions = [getattr(low, "build", None) for low in opdef.lowerings.values()]
    names = {getattr(f, "__module__", None) for f in (*functions, opdef.reference)}
    return tuple(sorted(n for n in names if n and not n.startswith("tvmc.")))


# ---- the untuned baseline ------------------------------------------------------------------------
def default_config(task: Task) -> dict[str, Any]:
    """The knobs of the untuned schedule: none, so the template uses its own defaults."""
    return {}


def default_entity() -> ConfigEntity:
    """A config with no knobs (values == {}): what `measure_default` measures."""
    return ConfigEntity(ConfigSpace(), 0, ())


def measure_default(task: Task, measurer: Measurer) -> MeasureResult:
    """The untuned baseline: the task with the template's default knobs."""
    return measurer.measure([MeasureInput(task, default_entity())])[0]
