"""`tvmc records show|best`: a tuning records file at a glance, or reduced to its best lines."""

from __future__ import annotations

import click
from rich.table import Table

from tvmc.cli.common import err, out, print_json, wants_json
from tvmc.cli.groups import CommandGroup
from tvmc.cli.types import FileWithExt, format_option
from tvmc.driver.plots import plot_records
from tvmc.driver.records import summarize_records, write_best_records
from tvmc.driver.tuning_report import args_summary, task_op

RECORDS_FILE = FileWithExt((".json", ".log"), dir_okay=False)


@click.group("records", cls=CommandGroup)
def records_group() -> None:
    """Inspect and reduce tuning records files (AutoTVM v0.2 lines, as `tvmc tune` writes)."""


@records_group.command("show")
@click.argument("records_file", type=RECORDS_FILE)
@format_option
def show_command(records_file: str, output_format: str, json_flag: bool) -> None:
    """Per workload of RECORDS_FILE: trials, the best time and GFLOP/s, what compile applies,
    errors by kind."""
    groups = summarize_records(records_file)
    if wants_json(output_format, json_flag):
        print_json({"records": records_file, "workloads": [g.to_json() for g in groups]})
        return
    targets = {g.target for g in groups}
    table = Table(title=f"{records_file}", title_justify="left")
    columns = [
        "#",
        "task",
        *(["target"] if len(targets) > 1 else []),
        "args",
        "trials",
        "best (ms)",
        "best GFLOP/s",
        "applied",
        "errors",
    ]
    for column in columns:
        right = column in ("#", "trials", "best (ms)", "best GFLOP/s")
        # on a narrow terminal the args and errors wrap; names and numbers stay whole
        table.add_column(column, justify="right" if right else "left",
                         no_wrap=column not in ("args", "errors"))  # fmt: skip
    for number, group in enumerate(groups):
        data = group.to_json()
        best = f"{1e3 * data['best_seconds']:.4f}" if data["best_seconds"] is not None else "-"
        rate = f"{data['best_gflops']:.1f}" if data["best_gflops"] is not None else "-"
        errors = ", ".join(f"{name} x{n}" for name, n in data["errors"].items()) or "-"
        verdict = data["verdict"]
        applied = (
            "-"
            if verdict is None
            else (f"{'kept' if verdict['kept'] else 'default'} {verdict['speedup']:.2f}x")
        )
        cells = [
            str(number),
            group.name,
            *([group.target] if len(targets) > 1 else []),
            args_summary(task_op(group.name), group.args),
            str(group.trials),
            best,
            rate,
            applied,
            errors,
        ]
        table.add_row(*cells)
    out.print(table)
    total = sum(g.trials for g in groups)
    out.print(f"{total} record(s), {len(groups)} workload(s)", markup=False)


@records_group.command("best")
@click.argument("records_file", type=RECORDS_FILE)
@click.option(
    "-o",
    "--output",
    type=RECORDS_FILE,
    required=True,
    help="The file to write (replaced; it may be RECORDS_FILE itself).",
)
@format_option
def best_command(records_file: str, output: str, output_format: str, json_flag: bool) -> None:
    """Keep only the best error-free record per workload and target of RECORDS_FILE."""
    kept, read = write_best_records(records_file, output)
    if wants_json(output_format, json_flag):
        print_json({"records": records_file, "output": output, "read": read, "kept": kept})
        return
    out.print(f"kept {kept} of {read} record(s), the best per workload -> {output}", markup=False)
    if not kept:
        err.print(f"{records_file} has no error-free record", markup=False)


@records_group.command("plot")
@click.argument("records_file", type=RECORDS_FILE)
@click.option(
    "-o",
    "--output",
    type=FileWithExt((".svg",), dir_okay=False),
    required=True,
    help="The SVG file to write (replaces only an SVG).",
)
@format_option
def plot_command(records_file: str, output: str, output_format: str, json_flag: bool) -> None:
    """Draw best GFLOP/s so far against trials, one line per task of RECORDS_FILE, as SVG.

    \b
    tvmc records plot log.json -o tuning.svg
    """
    drawn = plot_records(records_file, output)
    if wants_json(output_format, json_flag):
        print_json(drawn)
        return
    tasks = drawn["tasks"]
    out.print(f"{len(tasks)} task(s) over {sum(t['trials'] for t in tasks)} trial(s) -> {output}",
              markup=False)  # fmt: skip
    if drawn["left_out"]:
        err.print(f"not drawn (no FLOP count or no error-free record): "
                  f"{', '.join(drawn['left_out'])}", markup=False)  # fmt: skip
