"""`tvmc tune`: a model in, tuning records appended; the settings, progress per task, a summary."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tvmc.cli.common import err, out, print_json, wants_json
from tvmc.cli.types import (
    FileWithExt,
    FiniteFloatRange,
    SuggestChoice,
    TargetType,
    format_option,
    model_options,
)
from tvmc.driver import TARGET_KINDS, TuneOptions, extract_tasks, load, tune
from tvmc.driver.tune_options import (
    MEASURE_DEFAULTS,
    MIN_PAIRED_ROUNDS,
    PAIRED_MARGIN,
    TUNER_NAMES,
    select_tasks,
    wins_needed,
)
from tvmc.driver.tuning_report import (
    TaskStats,
    TuningInterrupted,
    TuningPlan,
    TuningProgress,
    TuningSummary,
    gbps,
    task_rows,
)
from tvmc.errors import UsageError

DEFAULTS = TuneOptions()
IN_FLIGHT_SECONDS = 1.0  # at most one question to the Dask scheduler this often
PLAIN_UPDATE_SECONDS = 5.0  # at most one progress line per task this often when not a terminal


def _rate(value: float | None, digits: int = 1) -> str:
    return f"{value:.{digits}f}" if value is not None else "-"


def _rates(stats: TaskStats) -> str:
    """Current and best rate: GFLOP/s, or GB/s of its tensors for a task of no FLOPs."""
    if stats.task.flops or not stats.task.bytes:
        return f"{_rate(stats.current_gflops)} now, best {_rate(stats.best_gflops)} GFLOP/s"
    now = gbps(stats.task.bytes, stats.last_cost)
    return f"{_rate(now)} now, best {_rate(stats.best_gbps)} GB/s"


class RichTuningProgress(TuningProgress):
    """Settings and summary tables on stdout; a progress bar per task on stderr (a terminal)."""

    def __init__(self, show_tables: bool = True):
        self.show_tables = show_tables
        self.engine: Any = None  # a DaskMeasurer: its rows in the table, measurements in flight
        self.cluster: dict[str, Any] | None = None  # the cluster as the table showed it
        self.in_flight_row: Any = None
        self.in_flight_at = 0.0
        self.bars: Progress | None = None
        self.rows: dict[int, Any] = {}
        self.summary: TuningSummary | None = None

    def start(self, plan: TuningPlan) -> None:
        self.engine, self.cluster = plan.cluster, cluster_json(plan)
        if self.show_tables and plan.tasks:
            out.print(settings_table(plan, self.engine))
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rates]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=err,
        )

    def task_start(self, stats: TaskStats) -> None:
        assert self.bars is not None
        if not self.bars.live.is_started:
            self.bars.start()
        label = f"#{stats.index} {stats.task.label}"
        self.rows[stats.position] = self.bars.add_task(
            label, total=stats.planned, rates="measuring the default", eta=""
        )
        self.update(stats)

    def update(self, stats: TaskStats) -> None:
        assert self.bars is not None
        left = stats.remaining
        self.bars.update(
            self.rows[stats.position],
            completed=stats.done,
            rates=_rates(stats),
            eta=f"~{left:.0f} s left" if left else "",
        )
        if self.engine is not None and time.monotonic() - self.in_flight_at >= IN_FLIGHT_SECONDS:
            self.in_flight_at = time.monotonic()
            if self.in_flight_row is None:
                self.in_flight_row = self.bars.add_task("devices", total=None, rates="", eta="")
            self.bars.update(self.in_flight_row, rates=in_flight_text(self.engine).lstrip("; "))

    def task_end(self, stats: TaskStats) -> None:
        self.update(stats)

    def finish(self, summary: TuningSummary) -> None:
        self.summary = summary
        if self.bars is not None and self.bars.live.is_started:
            self.bars.stop()
        if self.show_tables and summary.tasks:
            print_summary(summary, out)


class PlainTuningProgress(TuningProgress):
    """Parseable log lines on stderr (not a terminal, or --format json)."""

    def __init__(self, show_tables: bool = True):
        self.show_tables = show_tables
        self.engine: Any = None
        self.cluster: dict[str, Any] | None = None
        self.last = 0.0
        self.summary: TuningSummary | None = None

    def start(self, plan: TuningPlan) -> None:
        self.engine, self.cluster = plan.cluster, cluster_json(plan)
        if self.show_tables and plan.tasks:
            out.print(settings_table(plan, self.engine))

    def task_start(self, stats: TaskStats) -> None:
        err.print(
            f"task {stats.position + 1}/{stats.count} #{stats.index} {stats.task.label}: "
            f"{stats.planned} trials (resumed {stats.resumed})",
            markup=False,
        )
        self.last = time.monotonic()

    def update(self, stats: TaskStats) -> None:
        if time.monotonic() - self.last >= PLAIN_UPDATE_SECONDS:
            err.print(stats.line() + in_flight_text(self.engine), markup=False)
            self.last = time.monotonic()

    def task_end(self, stats: TaskStats) -> None:
        err.print(stats.line(), markup=False)

    def finish(self, summary: TuningSummary) -> None:
        self.summary = summary
        if self.show_tables and summary.tasks:
            print_summary(summary, out)


def cluster_json(plan: TuningPlan) -> dict[str, Any] | None:
    """The Dask cluster measuring, as the settings table shows it (None: this machine)."""
    return plan.cluster.to_json() if plan.cluster is not None else None


def in_flight_text(engine: Any) -> str:
    """'; in flight: dev0 1, dev1 0' for a Dask engine, '' without one."""
    if engine is None:
        return ""
    counts = engine.in_flight()
    return "; in flight: " + (", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "none")


def settings_table(plan: TuningPlan, engine: Any = None) -> Table:
    """Every setting in force, defaults included (and the Dask cluster's, with an engine)."""
    table = Table(title="tuning settings", title_justify="left")
    table.add_column("setting")
    table.add_column("value")
    for name, value in plan.settings():
        table.add_row(name, value)
    for name, value in engine.describe() if engine is not None else ():
        table.add_row(name, value)
    return table


def print_summary(summary: TuningSummary, console: Console) -> None:
    """Per task: trials, best GFLOP/s (and GB/s when some task does no FLOPs: pools,
    reductions), speedup, what compile applies (the paired check's verdict), share of peak;
    then where it went."""
    table = Table(title="tuning summary", title_justify="left")
    memory = any(not s.task.flops for s in summary.tasks)
    headers = ["#", "task", "trials", "best\nGFLOP/s", *(["best\nGB/s"] if memory else []),
               "speedup", "applied", "of\npeak", "errors", "state"]  # fmt: skip
    for column in headers:
        left = column in ("task", "errors", "state")
        # on a narrow terminal the task's label wraps; numbers and the state stay whole
        table.add_column(column, justify="left" if left else "right",
                         no_wrap=column not in ("task", "errors"))  # fmt: skip
    for s in summary.tasks:
        errors = ", ".join(
            f"{name.replace(' error', '')} {n}" for name, n in s.error_counts().items()
        )
        share = s.peak_share
        table.add_row(
            str(s.index),
            s.task.label,
            f"{s.done}/{s.planned}" + (f" +{s.resumed}" if s.resumed else ""),
            _rate(s.best_gflops),
            *([_rate(s.best_gbps)] if memory else []),
            f"{s.speedup:.2f}x" if s.speedup else "-",
            s.verdict_text(),
            f"{100 * share:.{0 if share >= 0.1 else 1}f}%" if share else "-",
            errors or "-",
            s.state,
        )
    console.print(table)
    plan = summary.plan
    peak = f"{plan.peak_gflops:g} GFLOP/s, " if plan.peak_gflops else ""
    console.print(
        f"{summary.new_records} new record(s) in {summary.records_path}, {summary.seconds:.1f} s"
        f" (#: as in --tasks list; trials: this run/planned +resumed; "
        + ("GB/s: of the task's tensors, for tasks of no FLOPs; " if memory else "")
        + "speedup: over the default schedule, as searched; applied: what compile uses, with "
        "the best config's speedup over the default timed in alternation (kept: it won by "
        f"{1 - PAIRED_MARGIN:.0%} in too many rounds for chance); peak: {peak}{plan.peak_source})",
        markup=False,
    )


def print_task_list(rows: list[dict[str, Any]], model_file: str) -> None:
    """The `--tasks list` table."""
    table = Table(title=f"tasks of {model_file}", title_justify="left")
    memory = any(not row["flops"] for row in rows)  # pools, reductions: their bytes instead
    columns = ("#", "task", "op", "args", "weight", "MFLOP", *(["MB"] if memory else []), "configs")
    for column in columns:
        table.add_column(column, justify="left" if column in ("task", "op", "args") else "right")
    for row in rows:
        table.add_row(
            str(row["index"]),
            row["name"],
            row["op"],
            row["args_summary"],
            str(row["weight"]),
            f"{row['flops'] / 1e6:.2f}" if row["flops"] else "-",
            *([f"{row['bytes'] / 1e6:.2f}"] if memory else []),
            str(row["configs"]),
        )
    out.print(table)


@click.command("tune")
@click.argument("model_file", type=FileWithExt((".onnx", ".tvmc"), dir_okay=True))
@click.option(
    "-o",
    "--output",
    type=FileWithExt((".json", ".log"), dir_okay=False),
    help="Records file (AutoTVM v0.2 lines): appended to as results arrive; an existing one "
    "resumes (its configs are not measured again). Required unless --tasks list.",
)
@click.option(
    "--tuning-records",
    type=FileWithExt((".json", ".log"), dir_okay=False),
    help="Without -o: the records file, as -o. With -o (as TVMC): prior records, only read: "
    "their configs are not measured again and seed the tuners.",
)
@click.option(
    "--target",
    type=TargetType(TARGET_KINDS),
    default="llvm",
    show_default=True,
    metavar="TARGET",
    help="Target string: 'llvm' (this CPU), 'llvm -mcpu=skylake-avx512'.",
)
@click.option("--target-llvm-mcpu", metavar="CPU", help="LLVM CPU name (default: this CPU).")
@click.option("--target-llvm-mattr", metavar="ATTRS", help="LLVM features, e.g. '+avx2,-avx512f'.")
@model_options
@click.option(
    "--trials",
    type=click.IntRange(min=0),
    default=DEFAULTS.trials,
    show_default=True,
    help="Configs to measure in total, shared among the tasks by weight x FLOPs "
    "(resumed records count toward it).",
)
@click.option(
    "--tuner",
    type=SuggestChoice(TUNER_NAMES),
    default="xgb",
    show_default=True,
    help="Search: xgb (a cost model), ga (genetic), random, gridsearch.",
)
@click.option(
    "--early-stopping",
    type=click.IntRange(min=1),
    metavar="N",
    help="Stop a task after N trials without a better config (default: off).",
)
@click.option(
    "--number",
    type=click.IntRange(min=1),
    default=DEFAULTS.number,
    show_default=True,
    help="Runs per measurement (their mean is one cost).",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=DEFAULTS.repeat,
    show_default=True,
    help="Measurements per config that must agree: taken until this many lie within "
    f"{MEASURE_DEFAULTS.stable_spread:.0%} of each other (at most {MEASURE_DEFAULTS.max_repeat}), "
    "those kept.",
)
@click.option(
    "--min-repeat-ms",
    type=FiniteFloatRange(min=0),
    default=DEFAULTS.min_repeat_ms,
    show_default=True,
    help="Raise --number until one measurement lasts this long.",
)
@click.option(
    "--timeout",
    type=FiniteFloatRange(min=0, min_open=True),
    default=DEFAULTS.timeout,
    show_default=True,
    help="Seconds one config may run before it counts as a run timeout.",
)
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    metavar="N",
    help="Builds at once (default: the physical cores); runs are one at a time.",
)
@click.option("--flush-cache", is_flag=True, help="Flush the CPU caches before each run.")
@click.option(
    "--paired-rounds",
    type=click.IntRange(min=0),
    default=DEFAULTS.paired_rounds,
    show_default=True,
    metavar="N",
    help="After each task's search, time its best config and the default schedule alternately "
    f"N times (0 or at least {MIN_PAIRED_ROUNDS}); compile keeps the config only if it wins by "
    f"{1 - PAIRED_MARGIN:.0%} (median) in too many rounds for chance: {wins_needed(8)} of 8 "
    "(0: no check, the lowest cost wins).",
)
@click.option(
    "--tasks",
    "tasks_spec",
    default="all",
    show_default=True,
    metavar="SPEC",
    help="Tasks to tune, as TVMC: '0', '0,2', '3-5', '-5' (0 to 5), '6-' (6 on), 'all'; "
    "'list' prints the tasks and tunes nothing.",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Measure on a Dask cluster: its scheduler, e.g. tcp://host:8786 (needs tvmc[dist]; "
    "see docs/distributed.md). Records stay on this machine.",
)
@click.option(
    "--device-key",
    metavar="KEY",
    help="With --scheduler: the device resource to measure on (tvmc worker --device-key KEY).",
)
@click.option(
    "--priority",
    type=int,
    default=0,
    show_default=True,
    help="With --scheduler: runs of a higher priority go first on shared workers.",
)
@format_option
def tune_command(
    model_file: str,
    output: str | None,
    tuning_records: str | None,
    target: str,
    target_llvm_mcpu: str | None,
    target_llvm_mattr: str | None,
    input_shapes: dict[str, tuple[int, ...]] | None,
    input_dtypes: dict[str, str] | None,
    model_format: str | None,
    trials: int,
    tuner: str,
    early_stopping: int | None,
    number: int,
    repeat: int,
    min_repeat_ms: float,
    timeout: float,
    parallel: int | None,
    flush_cache: bool,
    paired_rounds: int,
    tasks_spec: str,
    scheduler: str | None,
    device_key: str | None,
    priority: int,
    output_format: str,
    json_flag: bool,
) -> None:
    """Tune the kernels of MODEL_FILE (ONNX or .tvmc), appending records for `tvmc compile`."""
    as_json = wants_json(output_format, json_flag)
    prior = tuning_records if output is not None else None
    tuning_records = output or tuning_records
    model = load(model_file, input_shapes, model_format, input_dtypes)
    options = TuneOptions(
        target=target,
        target_llvm_mcpu=target_llvm_mcpu,
        target_llvm_mattr=target_llvm_mattr,
        trials=trials,
        tuner=tuner,
        early_stopping=early_stopping,
        number=number,
        repeat=repeat,
        min_repeat_ms=min_repeat_ms,
        timeout=timeout,
        parallel=parallel,
        flush_cache=flush_cache,
        paired_rounds=paired_rounds,
        tasks=tasks_spec,
        scheduler=scheduler,
        device_key=device_key,
        priority=priority,
        prior_records=prior,
    )
    if options.lists_tasks:
        print_tasks(model, model_file, options, as_json)
        return
    if tuning_records is None:
        raise UsageError("tvmc tune needs -o PATH (or --tuning-records PATH): the file records "
                         "are appended to")  # fmt: skip
    show_tables = not as_json
    progress = (
        RichTuningProgress(show_tables) if err.is_terminal else PlainTuningProgress(show_tables)
    )
    try:
        tune(model, tuning_records=tuning_records, options=options, progress=progress)
    except TuningInterrupted as stop:
        if as_json:
            print_json({"model": model_file, **stop.summary.to_json(), "cluster": progress.cluster})
        click.echo(
            f"Interrupted: {stop.summary.new_records} record(s) of this run are in "
            f"{tuning_records}; run the same command again to resume.",
            err=True,
        )
        click.get_current_context().exit(130)
    summary = progress.summary
    if summary is None or not summary.tasks:
        if as_json:
            empty = dict(settings=None, tasks=[], new_records=0, seconds=0.0, interrupted=False,
                         cluster=None)  # fmt: skip
            print_json({"model": model_file, **empty})  # the shape of tune.schema.json
        err.print(
            f"{model_file} has no tunable kernels for {target}: nothing to tune", markup=False
        )
    elif as_json:
        print_json({"model": model_file, **summary.to_json(), "cluster": progress.cluster})
    elif summary.new_records:
        err.print(
            f"next: tvmc compile {model_file} --tuning-records {tuning_records} -o model.tar",
            markup=False,
        )


def print_tasks(model: Any, model_file: str, options: TuneOptions, as_json: bool) -> None:
    """`--tasks list`: the selected tasks of the model, as a table or JSON; nothing is tuned."""
    tasks = extract_tasks(
        model,
        options.target,
        target_llvm_mcpu=options.target_llvm_mcpu,
        target_llvm_mattr=options.target_llvm_mattr,
    )
    chosen, _ = select_tasks(options.tasks, len(tasks))
    rows = task_rows([tasks[i] for i in chosen], chosen)
    if as_json:
        print_json({"model": model_file, "target": options.target, "tasks": rows})
    else:
        print_task_list(rows, model_file)
