"""Tuning, the second step: the tasks of a graph, trials shared among them, one tuner per task,
every result appended to the records file as it arrives, and a summary per task.

In: tvmc.autotune (tasks, records, measurement, tuners), tvmc.driver.compiler (tasks come from
the same optimized graph that `compile` applies records to), tvmc.driver.tune_options (the
options, checked), tvmc.driver.tuning_report (what tuning reports, and the `TuningProgress`
callbacks the CLI draws with). Out: `graph_tasks`, `tune_graph` (what `tvmc.tune` and
`TVMCModel.tune` run), `tune_tasks`, `share_trials`, `connect` and `serve_worker` (a Dask
cluster's measurer and workers). Works on graphs, never on the driver's objects; never prints.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Sequence

from tvmc.autotune import Record, Task, append_records, read_records
from tvmc.autotune import extract_tasks as extract_graph_tasks
from tvmc.autotune.backends import measure_backend
from tvmc.autotune.dask_engine import DaskMeasurer, serve_worker  # noqa: F401  (for `tvmc worker`)
from tvmc.autotune.local import LocalMeasurer
from tvmc.autotune.measure import (
    MeasureInput,
    MeasureOptions,
    Measurer,
    MeasureResult,
    measure_default,
)
from tvmc.autotune.tuner import FAILED, Tuner
from tvmc.autotune.tuners import TUNERS
from tvmc.autotune.verify import PAIRED_ROUNDS, paired_check
from tvmc.codegen import CUDATarget, physical_cores, target_kind
from tvmc.driver.compiler import CompileOptions, optimize, parse_target
from tvmc.driver.outputs import check_records_output
from tvmc.driver.tune_options import (
    DEFAULT_TRIALS,
    TuneOptions,
    check_cluster,
    check_trials,
    check_tuner,
    select_tasks,
)
from tvmc.driver.tuning_report import (
    LogProgress,
    TaskStats,
    TuningInterrupted,
    TuningPlan,
    TuningProgress,
    TuningSummary,
    peak_gflops,
)
from tvmc.errors import UsageError
from tvmc.graph import Graph

logger = logging.getLogger("tvmc")

CHUNK_PER_BUILDER = 2  # configs measured (then recorded) at a time, per parallel build
MIN_TASK_TRIALS = 16  # every task gets this many (or its whole space) before the rest is shared


def graph_tasks(
    graph: Graph,
    target: str = "llvm",
    target_llvm_mcpu: str | None = None,
    target_llvm_mattr: str | None = None,
    opt_level: int = 3,
    disabled_passes: Sequence[str] = (),
) -> list[Task]:
    """The tunable kernels of a graph for a target, deduplicated and heaviest first."""
    options = CompileOptions(
        target=target,
        mcpu=target_llvm_mcpu,
        mattr=target_llvm_mattr,
        opt_level=opt_level,
        disabled_passes=tuple(disabled_passes),
    )
    graph, _, lowering_target, threads = optimize(graph, options)
    parsed = parse_target(options)
    if isinstance(parsed, CUDATarget):  # records name the arch: `cuda -arch=sm_90`
        target_string = str(parsed)
    else:
        refinements = [(target_llvm_mcpu, "mcpu"), (target_llvm_mattr, "mattr")]
        target_string = " ".join([target.strip(), *(f"-{k}={v}" for v, k in refinements if v)])
    return extract_graph_tasks(graph, target_string, lowering_target, threads)


def share_trials(tasks: Sequence[Task], total: int) -> list[int]:
    """`total` trials shared among tasks by weight x FLOPs, each at most its space, at least
    MIN_TASK_TRIALS (or its space) when the total allows."""
    caps = [len(t.space) for t in tasks]
    shares = [0] * len(tasks)
    floor = min(MIN_TASK_TRIALS, total // max(len(tasks), 1))
    for i, cap in enumerate(caps):
        shares[i] = min(cap, floor)
    rest = total - sum(shares)
    weights = [max(t.work, 1) * max(t.weight, 1) for t in tasks]  # FLOPs, or bytes for pools
    while rest > 0:
        open_ = [i for i in range(len(tasks)) if shares[i] < caps[i]]
        if not open_:
            break
        total_weight = sum(weights[i] for i in open_)
        gifts = {i: min(caps[i] - shares[i], rest * weights[i] // total_weight) for i in open_}
        if not any(gifts.values()):  # rounding left a few: one each, heaviest first
            gifts = {i: 1 for i in sorted(open_, key=lambda i: -weights[i])[:rest]}
        for i, gift in gifts.items():
            shares[i] += gift
            rest -= gift
    return shares


class _Recorder:
    """A Measurer that measures a batch in chunks of `chunk` configs (enough to keep the builders
    busy) and appends each chunk's results to the records file as it returns, then reports: a
    Ctrl-C loses at most the chunk in flight, and the progress display moves often."""

    def __init__(self, inner: Measurer, path: str, stats: TaskStats, progress: TuningProgress,
                 chunk: int) -> None:  # fmt: skip
        self.inner, self.path, self.stats, self.progress = inner, path, stats, progress
        self.chunk = max(1, chunk)

    def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        stream = getattr(self.inner, "stream", None)
        if stream is not None:  # e.g. DaskMeasurer: one record per result, as each arrives
            return self._measure_stream(inputs, stream)
        results: list[MeasureResult] = []
        for start in range(0, len(inputs), self.chunk):
            part = inputs[start : start + self.chunk]
            done = self.inner.measure(part)
            append_records(self.path, [_record(i, r) for i, r in zip(part, done)])
            for inp, res in zip(part, done):
                if res.error_no:
                    logger.debug("%s config %d: error %d: %s", inp.task.name, inp.config.index,
                                 res.error_no, res.error_msg)  # fmt: skip
            self.stats.add([r.costs for r in done if r.error_no == 0], [r.error_no for r in done])
            self.progress.update(self.stats)
            results += done
        return results

    def _measure_stream(self, inputs: list[MeasureInput], stream) -> list[MeasureResult]:
        results: list[MeasureResult | None] = [None] * len(inputs)
        for i, res in stream(inputs):
            append_records(self.path, [_record(inputs[i], res)])
            if res.error_no:
                logger.debug("%s config %d: error %d: %s", inputs[i].task.name,
                             inputs[i].config.index, res.error_no, res.error_msg)  # fmt: skip
            self.stats.add([res.costs] if res.error_no == 0 else [], [res.error_no])
            self.progress.update(self.stats)
            results[i] = res
        return [r for r in results if r is not None]

    def close(self) -> None:
        """The caller owns the inner measurer."""


def _record(inp: MeasureInput, res: MeasureResult) -> Record:
    task = inp.task
    return Record(
        task.target,
        task.name,
        task.args,
        inp.config.to_json(),
        list(res.costs),
        res.error_no,
        res.all_cost,
        res.timestamp,
    )


def _tuner_factory(tuner: str | Callable[..., Tuner]) -> tuple[str, Callable[..., Tuner]]:
    check_tuner(tuner)
    if not isinstance(tuner, str):
        return getattr(tuner, "__name__", "custom"), tuner
    return tuner, TUNERS[tuner]


def _check_target(tasks: Sequence[Task], local: bool = True) -> str:
    targets = {t.target for t in tasks}
    if len(targets) > 1:
        raise UsageError(f"tasks of one tuning run share a target; got {sorted(targets)}")
    target = targets.pop() if targets else "llvm"
    measure_backend(target).check(target, local)
    return target


def _check_writable(path: str) -> None:
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write tuning records {path!r}: {exc.strerror or exc}") from None


def tune_tasks(
    tasks: Sequence[Task],
    tuning_records: str | os.PathLike[str],
    tuner: str | Callable[..., Tuner] = "xgb",
    trials: int | Sequence[int] = DEFAULT_TRIALS,
    early_stopping: int | None = None,
    measure_options: MeasureOptions | None = None,
    progress: TuningProgress | None = None,
    *,
    measurer: Measurer | None = None,
    seed: int | None = None,
    task_indices: Sequence[int] | None = None,
    scheduler: str | None = None,
    device_key: str | None = None,
    priority: int = 0,
    prior_records: str | os.PathLike[str] | None = None,
    paired_rounds: int = PAIRED_ROUNDS,
) -> str:
    """Tune `tasks`, appending every measurement to `tuning_records`; returns its path.

    `trials`: in total, shared by weight x FLOPs (or one number per task). Records already in the
    file resume the run: their configs are not measured again, count toward the trials and seed
    the tuners. `prior_records` (TVMC's --tuning-records beside -o): another file, only read:
    its configs are not measured again and seed the tuners (the cost model learns from them, of
    other workloads too), but do not count toward the trials. After a task's search, unless
    `paired_rounds` is 0, its best config is timed against the default schedule in that many
    alternating rounds (`verify.paired_check`) and the verdict appended: compile applies the
    config only if it won. `measurer`: default a
    LocalMeasurer with `measure_options`, or a DaskMeasurer on the Dask `scheduler` measuring on
    the workers that advertise `device_key` (tasks of a higher `priority` run first). Ctrl-C
    raises TuningInterrupted, with every finished measurement on disk.
    """
    path = os.fspath(tuning_records)
    progress = progress or LogProgress()
    options = measure_options or MeasureOptions()
    tuner_name, make_tuner = _tuner_factory(tuner)
    remote = scheduler is not None or isinstance(measurer, DaskMeasurer)
    target = _check_target(tasks, local=not remote)
    shares = _shares(tasks, trials)
    kind = target_kind(target)
    # verdicts are re-timings of configs already recorded: they decide compile, not the search
    known = [r for r in read_records(path, must_exist=False)
             if target_kind(r.target) == kind and r.verdict is None]  # fmt: skip
    prior: list[Record] = []
    prior_path = None if prior_records is None else os.fspath(prior_records)
    if prior_path is not None and os.path.abspath(prior_path) == os.path.abspath(path):
        prior_path = None  # the same file: it resumes
    if prior_path is not None:
        prior = [r for r in read_records(prior_path, must_exist=True)
                 if target_kind(r.target) == kind and r.verdict is None]  # fmt: skip
    _check_writable(path)
    if measurer is None:
        check_cluster(scheduler, device_key)
    owned = measurer is None and scheduler is not None and bool(tasks)  # nothing to measure: stay
    if owned:
        measurer = connect(scheduler, device_key, priority, options, target)
    mine = [_resumable(known, task) for task in tasks]
    seeds = [_resumable(prior, task) for task in tasks]
    peak, peak_source = peak_gflops(target)
    indices = list(task_indices) if task_indices is not None else list(range(len(tasks)))
    resumed = [len({r.config["index"] for r in records}) for records in mine]
    total = trials if isinstance(trials, int) else sum(shares)
    plan = TuningPlan(
        target,
        tuner_name,
        total,
        shares,
        resumed,
        early_stopping,
        options,
        path,
        len(known),
        list(tasks),
        indices,
        peak,
        peak_source,
        measurer if isinstance(measurer, DaskMeasurer) else None,
        prior_path,
        len(prior),
        paired_rounds,
    )
    progress.start(plan)
    # a task on a fixed thread count (an image's kernel of a batch side by side) against those
    fixed = {t.threads for t in tasks if t.threads} if peak else set()  # unknown: unknown too
    peaks = {n: peak_gflops(target, n)[0] for n in fixed}  # once a thread count
    stats = [
        TaskStats.begin(
            t, indices[n], n, len(tasks), resumed[n], peaks.get(t.threads, peak), mine[n]
        )
        for n, t in enumerate(tasks)
    ]
    for s, share in zip(stats, shares):
        s.planned = max(0, share - s.resumed)
    start, inner, interrupted = time.perf_counter(), measurer, False
    chunk = CHUNK_PER_BUILDER * (options.n_parallel or physical_cores())
    try:
        for n, task in enumerate(tasks):
            s = stats[n]
            if s.planned == 0:
                s.state = "done before" if s.resumed else "skipped"
                continue
            if inner is None:
                inner = LocalMeasurer(options, target)
                inner.check_device()  # e.g. no GPU here: one clear error, not one per config
            s.state, s.started = "running", time.perf_counter()
            progress.task_start(s)
            session = make_tuner(task, seed=seed)
            others = [r for r in (*known, *prior) if r.workload != task.workload]
            session.load_history([*seeds[n], *mine[n]], others)
            if task.space.default_index is None:  # the untuned schedule is no config: time it
                default = measure_default(task, inner)
                s.default_cost = _mean(default.costs) if default.error_no == 0 else None
            else:  # the tuner measures that config first (or it was resumed)
                s.default_cost = _default_cost(session)
            recorder = _Recorder(inner, path, s, progress, chunk)

            def note_default(tuner: Tuner, *_: object, s: TaskStats = s) -> None:
                if s.default_cost is None and tuner.space.default_index is not None:
                    s.default_cost = _default_cost(tuner)

            session.tune(s.planned, recorder, early_stopping=early_stopping,
                         callbacks=[note_default])  # fmt: skip
            if s.done < s.planned:
                s.state = "stopped early" if session.has_next() else "space exhausted"
            else:
                s.state = "done"
            if paired_rounds > 0:
                _check_best(task, session, inner, path, paired_rounds, s)
                progress.update(s)
            s.finished = time.perf_counter()
            progress.task_end(s)
    except KeyboardInterrupt:
        interrupted = True
        for s in stats:
            if s.state == "running":
                s.state, s.finished = "interrupted", time.perf_counter()
    finally:
        if (measurer is None or owned) and inner is not None:
            inner.close()  # ours: stops its worker processes (or disconnects)
    summary = TuningSummary(plan, stats, time.perf_counter() - start, interrupted)
    progress.finish(summary)
    if interrupted:
        raise TuningInterrupted(summary)
    return path


def _check_best(task: Task, tuner: Tuner, measurer: Measurer, path: str, rounds: int,
                stats: TaskStats) -> None:  # fmt: skip
    """The paired check of the task's best config against the default, its verdict appended
    to the records and noted in `stats` (nothing to check when the default is the best)."""
    best = tuner.best_config
    if best is None:
        return
    if best.index == task.space.default_index and best.space is task.space:
        stats.verdict = "default best"
        return
    check = paired_check(task, best, measurer, rounds)
    if check is None:
        stats.verdict = "check failed"
        logger.warning("%s: the paired check of config %d against the default ran no round "
                       "without error; compile takes the lowest cost", task.name,
                       best.index)  # fmt: skip
        return
    append_records(path, [check.record(task)])
    stats.check = check
    stats.verdict = "kept" if check.kept else "default won"


def connect(
    scheduler: str,
    device_key: str | None,
    priority: int = 0,
    options: MeasureOptions | None = None,
    target: str = "llvm",
) -> DaskMeasurer:
    """A DaskMeasurer on `scheduler` for the workers advertising `device_key` (UsageError when
    the scheduler is unreachable, the key missing, or no such worker turns up)."""
    check_cluster(scheduler, device_key)
    return DaskMeasurer(options, target, scheduler=scheduler, device_key=device_key,
                        priority=priority)  # fmt: skip


def _shares(tasks: Sequence[Task], trials: int | Sequence[int]) -> list[int]:
    """Trials per task (resumed configs included) from a total or one count per task."""
    if isinstance(trials, int):
        check_trials(trials)
        return share_trials(tasks, trials)
    if len(trials) != len(tasks):
        raise UsageError(f"{len(trials)} trial counts for {len(tasks)} tasks")
    return [max(0, min(int(n), len(t.space))) for n, t in zip(trials, tasks)]


def _resumable(known: Sequence[Record], task: Task) -> list[Record]:
    """The task's records that fit its current space (others were made for another template)."""
    code_hash, fits = task.space.code_hash(), []
    for record in known:
        if record.workload != task.workload or record.config.get("code_hash") not in (
            None,
            code_hash,
        ):
            continue
        try:
            task.space.from_entity(record.config["entity"])
        except (KeyError, TypeError, ValueError):
            continue
        fits.append(record)
    return fits


def tune_graph(
    graph: Graph,
    tuning_records: str | os.PathLike[str] | None,
    options: TuneOptions,
    progress: TuningProgress | None = None,
    measurer: Measurer | None = None,
    source: str | None = None,
) -> str:
    """Tune a graph's kernels as `options` say and return the records path (None: a new
    temporary file); `measurer` replaces the one the options name (local or a Dask cluster).
    Records are appended to an existing records file, never to the model (`source`) or to a
    file that is not one."""
    if tuning_records is not None:
        check_records_output(tuning_records, {"the model": source})
    all_tasks = graph_tasks(graph, options.target, options.target_llvm_mcpu,
                            options.target_llvm_mattr)  # fmt: skip
    chosen, _ = select_tasks(options.tasks, len(all_tasks))
    if tuning_records is None:
        tuning_records = os.path.join(tempfile.mkdtemp(prefix="tvmc-tune-"), "tuning.json")
    return tune_tasks(
        [all_tasks[i] for i in chosen],
        tuning_records,
        options.tuner,
        options.trials,
        options.early_stopping,
        options.measure_options(),
        progress,
        measurer=measurer,
        seed=options.seed,
        task_indices=chosen,
        scheduler=options.scheduler,
        device_key=options.device_key,
        priority=options.priority,
        prior_records=options.prior_records,
        paired_rounds=options.paired_rounds,
    )


def _default_cost(tuner: Tuner) -> float | None:
    """The measured cost of the space's default config, if the tuner has one that succeeded."""
    index = tuner.space.default_index
    costs = [cost for config, cost in tuner.history if config.index == index and cost < FAILED]
    return costs[0] if costs else None


def _mean(costs: Sequence[float]) -> float | None:
    return sum(costs) / len(costs) if costs else None
