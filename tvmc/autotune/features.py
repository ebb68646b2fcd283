"""Features of a config for the tuners' cost model.

Three groups, each a fixed list of named columns (NaN where unknown, which XGBoost handles):

- knob features: per knob, the chosen candidate's index and its numeric value (each factor of a
  split as log2). Vectorised over many configs at once through per-knob lookup tables, so
  simulated annealing can score tens of thousands of configs a second.
- workload features: log2 of each tensor's size and its dims, and the numeric attributes. Constant
  within a task; they let one model separate the records of several workloads (transfer).
- loop features: the kernels the op's template builds for the config (kernel IR only, no code
  generation), walked for loop counts by kind, vector lanes, unrolled and parallel extents, the
  register tile and the arithmetic of the hottest innermost loop. A build costs milliseconds, so
  they are cached per config and computed only for configs the model shortlists.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tvmc.autotune.measure import PastEndGrant, task_types
from tvmc.autotune.task import Task
from tvmc.codegen import num_threads
from tvmc.codegen.target import CPUTarget
from tvmc.graph import Node
from tvmc.kernel import (
    Add,
    Allocate,
    Buffer,
    Call,
    Div,
    Expr,
    For,
    IntImm,
    Kernel,
    Load,
    Max,
    Min,
    Mul,
    Stmt,
    Store,
    Sub,
    is_float,
    kernel_str,
)
from tvmc.kernel.transform import children
from tvmc.kernel.visitor import post_order
from tvmc.ops import OPS
from tvmc.ops.lowering import LowerContext, LoweringTarget, buffer_shape, ref_of_buffer
from tvmc.ops.space import ConfigSpace, Knob

NAN = float("nan")


# ---- knob and workload features -----------------------------------------------------------------
def _value_width(knob: Knob) -> int:
    """How many numeric columns a knob's value gives: its factors, one number, or none."""
    cands = knob.candidates
    if all(isinstance(c, tuple) and all(_is_number(v) for v in c) for c in cands):
        return max(len(c) for c in cands)
    if all(_is_number(c) or c is None for c in cands) and any(_is_number(c) for c in cands):
        return 1
    return 0  # names (strings) and mixed values: the candidate index alone


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float)  # bools included (0/1)


def _value_row(knob: Knob, value: Any, width: int) -> list[float]:
    """The numeric columns of one value of `knob`: log2 of a split's factors, a reorder's axis
    positions, a number itself; NaN where a value is not a number."""
    if width == 0:
        return []
    if isinstance(value, tuple):
        log = knob.kind == "split"
        nums = [_number(v, log) for v in value[:width]]
        return nums + [NAN] * (width - len(nums))
    return [_number(value, False)] + [NAN] * (width - 1)


def _number(value: Any, log: bool) -> float:
    if not _is_number(value):
        return NAN
    if not log:
        return float(value)
    return math.log2(value) if value > 0 else -1.0


def workload_features(args: Sequence[Any]) -> dict[str, float]:
    """Log2 sizes and dims of the tensors, and the numeric attributes of a workload's args."""
    out: dict[str, float] = {}
    tensor = 0
    for arg in args:
        if isinstance(arg, list | tuple) and arg and arg[0] == "TENSOR":
            shape = [int(d) for d in arg[1]]
            out[f"arg{tensor}.log2size"] = math.log2(max(1, math.prod(shape)))
            for j, d in enumerate(shape):
                out[f"arg{tensor}.dim{j}"] = math.log2(max(1, d))
            tensor += 1
        elif isinstance(arg, list | tuple) and arg and arg[0] == "ATTRS":
            for key, value in sorted(dict(arg[1]).items()):
                values = value if isinstance(value, list | tuple) else [value]
                for j, v in enumerate(values):
                    if _is_number(v):
                        out[f"attr.{key}.{j}"] = float(v)
    return out


class KnobFeatures:
    """Knob and workload features of the configs of one task, as rows of a fixed column list."""

    def __init__(self, space: ConfigSpace, args: Sequence[Any]) -> None:
        self.space = space
        self.names: list[str] = []
        self._tables: list[np.ndarray] = []
        for knob in space.knobs:
            width = _value_width(knob)
            self.names += [f"{knob.name}.choice"] + [f"{knob.name}.v{j}" for j in range(width)]
            rows = [[float(i), *_value_row(knob, c, width)] for i, c in enumerate(knob.candidates)]
            self._tables.append(np.array(rows, dtype=np.float32).reshape(len(rows), 1 + width))
        self._workload_names = sorted(workload_features(args))
        self.names += self._workload_names
        self._workload = self._workload_row(args)

    def _workload_row(self, args: Sequence[Any]) -> np.ndarray:
        wl = workload_features(args)
        return np.array([wl.get(n, NAN) for n in self._workload_names], dtype=np.float32)

    def of_choices(self, choices: np.ndarray) -> np.ndarray:
        """Rows for configs given as an int array [configs, knobs] of candidate indices."""
        choices = np.asarray(choices, dtype=np.int64).reshape(-1, len(self._tables))
        parts = [table[choices[:, k]] for k, table in enumerate(self._tables)]
        parts.append(np.broadcast_to(self._workload, (len(choices), len(self._workload))))
        return np.concatenate(parts, axis=1)

    def of_entity(self, entity: Sequence[Sequence[Any]], args: Sequence[Any]) -> np.ndarray:
        """The row of a config of another workload (transfer): knobs matched by name and value."""
        values = {name: _tuples(value) for name, _kind, value in entity}
        row: list[float] = []
        for knob, table in zip(self.space.knobs, self._tables):
            width = table.shape[1] - 1
            if knob.name not in values:
                row += [NAN] * (1 + width)
                continue
            value = values[knob.name]
            index = knob.candidates.index(value) if value in knob.candidates else NAN
            row += [float(index), *_value_row(knob, value, width)]
        return np.concatenate([np.array(row, np.float32), self._workload_row(args)])


def _tuples(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_tuples(v) for v in value)
    return value


# ---- loop-nest features -------------------------------------------------------------------------
LOOP_FEATURES = (
    "kernels", "loops", "serial", "parallel", "vectorized", "unrolled", "depth",
    "log2_parallel_extent", "log2_unrolled_extent", "lanes", "local_elements",
    "inner_log2_extent", "inner_flops", "inner_loads", "inner_stores", "register_tile",
    "inner_intensity", "log2_flops", "log2_loads", "log2_stores", "intensity",
)  # fmt: skip
_ARITH = (Add, Sub, Mul, Div, Max, Min)


def lowering_target(target: str, threads: int = 0) -> LoweringTarget:
    """What templates are told of `target` when tuning (its vector width, the runtime threads,
    or `threads` where the task fixes them)."""
    return dataclasses.replace(_cpu_lowering(target), num_threads=threads or num_threads())


@functools.lru_cache(maxsize=8)
def _cpu_lowering(target: str) -> LoweringTarget:
    """`LoweringTarget.of_cpu` of a CPU target string (on one thread)."""
    try:
        return LoweringTarget.of_cpu(CPUTarget.parse(target), 1)
    except Exception:  # an unparsable target still gets knob features
        return LoweringTarget()


def task_kernels(task: Task, config: Mapping[str, Any]) -> list[Kernel]:
    """The kernels the task's template builds for `config` as when measured: weights constant
    (zeros: the code does not depend on their values), reads past the data inputs' ends granted."""
    types, attrs = task_types(task)
    node = Node(task.op, [f"in{i}" for i in range(len(types))], ["out"], attrs)
    opdef = OPS[task.op]
    out_types = opdef.infer(node.attrs, types)
    grant = PastEndGrant.of(task)  # the measured kernels' lowering (a 1x1 conv in place)
    ctx = LowerContext(lowering_target(task.target, task.threads), dict(config),
                       may_read_past_end=grant)  # fmt: skip
    refs = [
        ref_of_buffer(f"in{i}", t, Buffer(f"in{i}", buffer_shape(t.shape), t.dtype),
                      np.zeros(t.shape, t.dtype) if i in opdef.weights else None)
        for i, t in enumerate(types)
    ]  # fmt: skip
    outs = [Buffer(f"out{i}", buffer_shape(t.shape), t.dtype) for i, t in enumerate(out_types)]
    return list(opdef.build(ctx, node.attrs, refs, outs, None))


class _Stats:
    """Counts gathered over one kernel."""

    def __init__(self) -> None:
        self.kinds = {"serial": 0, "parallel": 0, "vectorized": 0, "unrolled": 0}
        self.depth = 0
        self.parallel_extent = 1
        self.unrolled_extent = 1
        self.lanes = 1
        self.local_elements = 0
        self.flops = self.loads = self.stores = 0.0
        self.body = _Body()  # one pass over the body of the loop being visited
        self.inner: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # the hot loop's


class _Body:
    """flops, distinct memory loads, stores and local (register) stores of one loop body.

    Loads are counted once per distinct address expression: repeated reads of one element in an
    unrolled body stay in a register, which is what a register tile buys.
    """

    def __init__(self) -> None:
        self.flops = self.stores = self.local = 0.0
        self.loads: set[Load] = set()


def _extent(loop: For) -> int:
    return loop.extent.value if isinstance(loop.extent, IntImm) else 1


def _expr_counts(expr: Expr, body: _Body) -> tuple[float, float, int]:
    """(float ops, elements loaded from memory, widest lanes) of an expression; its memory loads
    join `body`'s. Loads of local scratch (register accumulators) are not memory traffic."""
    flops = loads = 0.0
    lanes = 1
    for e, times in _occurrences(expr):
        if not isinstance(e, Expr):
            continue
        if isinstance(e, Load):
            if e.buffer.scope != "local":
                loads += times * e.lanes
                body.loads.add(e)
        elif isinstance(e, Call) and e.name == "fma":
            flops += times * 2 * e.lanes
        elif isinstance(e, _ARITH) and is_float(e.dtype):
            flops += times * e.lanes
        if is_float(e.dtype):
            lanes = max(lanes, e.lanes)
    return flops, loads, lanes


def _occurrences(expr: Expr) -> list[tuple[Expr | Stmt, int]]:
    """Each distinct node under `expr` with how often a tree walk would meet it, in linear time
    (a shared subexpression counts once per use, as in the expression tree)."""
    nodes = post_order(expr)  # children before parents
    times: dict[int, int] = {id(expr): 1}
    for n in reversed(nodes):
        for c in children(n):
            times[id(c)] = times.get(id(c), 0) + times[id(n)]
    return [(n, times[id(n)]) for n in nodes]


def _visit(stmt: Stmt | Expr, trips: int, depth: int, st: _Stats) -> bool:
    """Accumulate `stmt`'s counts into `st`; whether it contains a loop."""
    if isinstance(stmt, For):
        n = _extent(stmt)
        kind = stmt.kind if stmt.kind in st.kinds else "parallel"  # GPU axes run in parallel
        st.kinds[kind] += 1
        st.depth = max(st.depth, depth + 1)
        if kind == "parallel":
            st.parallel_extent *= n
        elif kind == "unrolled":
            st.unrolled_extent *= n
        elif kind == "vectorized":
            st.lanes = max(st.lanes, n)
        outer, st.body = st.body, _Body()
        if not _visit(stmt.body, trips * n, depth + 1, st):
            _inner(stmt, trips * n, st)
        st.body = outer
        return True
    if isinstance(stmt, Store):
        f, ld, ln = _expr_counts(stmt.value, st.body)
        local = stmt.buffer.scope == "local"
        st.flops += trips * f
        st.loads += trips * ld
        st.stores += 0 if local else trips * stmt.value.lanes
        st.lanes = max(st.lanes, ln)
        st.body.flops += f
        st.body.local += local
        st.body.stores += 0 if local else stmt.value.lanes
        return False
    if isinstance(stmt, Allocate) and stmt.buffer.scope != "global":
        st.local_elements += stmt.buffer.size
    loops = False  # Let, Allocate, SeqStmt, IfThenElse: recurse into statements
    for child in children(stmt):
        if isinstance(child, Stmt):
            loops = _visit(child, trips, depth, st) or loops
    return loops


def _inner(loop: For, iterations: int, st: _Stats) -> None:
    """Keep the innermost loop doing the most arithmetic in all (the hot loop)."""
    b = st.body
    if iterations * b.flops >= st.inner[5]:
        loads = float(sum(e.lanes for e in b.loads))
        st.inner = (math.log2(max(1, _extent(loop))), b.flops, loads, b.stores, b.local,
                    iterations * b.flops)  # fmt: skip


def kernel_features(kernels: Sequence[Kernel]) -> np.ndarray:
    """The LOOP_FEATURES row of an op's kernels: the main (most arithmetic) one, and totals."""
    stats = []
    for k in kernels:
        st = _Stats()
        _visit(k.body, 1, 0, st)
        stats.append(st)
    if not stats:
        return np.full(len(LOOP_FEATURES), NAN, np.float32)
    main = max(stats, key=lambda s: s.flops)
    flops, loads, stores = (sum(getattr(s, a) for s in stats) for a in ("flops", "loads", "stores"))
    ext, i_flops, i_loads, i_stores, i_local, _ = main.inner
    row = [
        len(stats), sum(main.kinds.values()), *main.kinds.values(), main.depth,
        math.log2(main.parallel_extent), math.log2(main.unrolled_extent), main.lanes,
        math.log2(1 + main.local_elements), ext, i_flops, i_loads, i_stores, i_local,
        i_flops / max(1.0, i_loads), math.log2(1 + flops), math.log2(1 + loads),
        math.log2(1 + stores), flops / max(1.0, loads),
    ]  # fmt: skip
    return np.array(row, np.float32)


class LoopFeatures:
    """Cached loop features of one task's configs; turns itself off when builds fail or are slow.

    `max_seconds` bounds the mean build-and-walk time per config; after `probe` builds above it
    (or all failing) the task is marked `enabled = False` and every row is NaN. Each built
    config also gets a `signatures[index]`: a hash of its kernels' text, equal for configs that
    generate the same code (knobs the chosen schedule does not read), so a tuner can skip them.
    """

    def __init__(self, task: Task, max_seconds: float = 0.1, probe: int = 8) -> None:
        self.task = task
        self.enabled = task.op in OPS and OPS[task.op].is_template
        self.max_seconds = max_seconds
        self.probe = probe
        self.seconds = 0.0
        self.built = 0
        self.failed = 0
        self._cache: dict[int, np.ndarray] = {}
        self.signatures: dict[int, str] = {}

    def of(self, index: int, values: Mapping[str, Any]) -> np.ndarray:
        """The LOOP_FEATURES row of config `index` (NaN when the template rejects it)."""
        row = self._cache.get(index)
        if row is not None:
            return row
        if not self.enabled:
            return np.full(len(LOOP_FEATURES), NAN, np.float32)
        start = time.perf_counter()
        try:
            kernels = task_kernels(self.task, values)
            row = kernel_features(kernels)
            text = "\n".join(kernel_str(k) for k in kernels)
            self.signatures[index] = hashlib.sha1(text.encode()).hexdigest()
        except Exception:  # an invalid config (the measurer reports it as an error)
            row = np.full(len(LOOP_FEATURES), NAN, np.float32)
            self.failed += 1
        self.seconds += time.perf_counter() - start
        self.built += 1
        self._cache[index] = row
        if self.built >= self.probe and (
            self.failed == self.built or self.seconds / self.built > self.max_seconds
        ):
            self.enabled = False
        return row
