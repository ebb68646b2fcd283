"""Pictures of tuning and of a run: best GFLOP/s against trials per task (`tvmc records plot`),
and where a run's time goes (`tvmc run --profile-out chart.svg`), as SVG files.

In: records files (tvmc.driver.records), profile node rows (tvmc.driver.profile). Never prints.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tvmc.driver.outputs import write_text
from tvmc.driver.profile import chrome_trace, op_totals
from tvmc.driver.svg import bar_charts, line_chart
from tvmc.errors import UsageError

MAX_BARS = 30  # nodes drawn in a profile chart; the rest are summed into one bar
PROFILE_FORMATS = {".json": "a Chrome trace", ".svg": "a bar chart"}


def check_extension(path: str | os.PathLike[str], formats: dict[str, str], option: str) -> str:
    """The extension of `path`, one of `formats`, else a UsageError saying which are."""
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension not in formats:
        valid = ", ".join(f"{ext} ({what})" for ext, what in formats.items())
        raise UsageError(f"{option} {os.fspath(path)!r}: give a file ending in {valid}")
    return extension


@dataclass
class Convergence:
    """One workload's tuning: (trial number, best GFLOP/s so far) at each improvement."""

    label: str
    name: str
    target: str
    trials: int = 0
    points: list[tuple[int, float]] = field(default_factory=list)

    @property
    def best_gflops(self) -> float | None:
        return self.points[-1][1] if self.points else None


def convergence(path: str | os.PathLike[str]) -> tuple[list[Convergence], list[str]]:
    """Per workload and target in file order, the best GFLOP/s after each trial; and the labels
    of workloads that cannot be drawn (no FLOP count: pools, reductions; or no good record)."""
    # the tuner's modules only here: `tvmc run --profile-out` loads this file too
    from tvmc.autotune.task import describe_workload
    from tvmc.driver.records import load_records
    from tvmc.driver.tuning_report import gflops, task_op, workload_flops

    curves: dict[tuple[str, str, str], Convergence] = {}
    flops: dict[tuple[str, str, str], int | None] = {}
    for record in load_records(path):
        if record.verdict is not None:  # a paired check's re-timing, not a trial
            continue
        key = (record.target, *record.workload)
        if key not in curves:
            label = describe_workload(task_op(record.task_name), record.args, record.task_name)
            curves[key] = Convergence(label, record.task_name, record.target)
            flops[key] = workload_flops(record.task_name, record.args)
        curve = curves[key]
        curve.trials += 1
        rate = None if record.error_no else gflops(flops[key], record.mean_cost)
        if rate is not None and (curve.best_gflops is None or rate > curve.best_gflops):
            curve.points.append((curve.trials, rate))
    drawn = [c for c in curves.values() if c.points]
    for curve in drawn:
        curve.points.append((curve.trials, curve.points[-1][1]))  # hold the line to the end
    left_out = [c.label for c in curves.values() if not c.points]
    return drawn, left_out


def series_names(curves: Sequence[Convergence]) -> list[str]:
    """Legend entries: each task's label (with its target when the file holds several), and
    `(2)`, `(3)`... on a label already taken."""
    targets = {c.target for c in curves}
    names: list[str] = []
    for curve in curves:
        name = f"{curve.label} ({curve.target})" if len(targets) > 1 else curve.label
        n, unique = 1, name
        while unique in names:
            n += 1
            unique = f"{name} ({n})"
        names.append(unique)
    return names


def plot_records(path: str | os.PathLike[str], output: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the convergence chart of a records file as SVG; returns what was drawn."""
    check_extension(output, {".svg": "an SVG chart"}, "-o/--output")
    curves, left_out = convergence(path)
    if not curves:
        raise UsageError(
            f"nothing to draw in {os.fspath(path)!r}: no workload has both a FLOP count and an "
            f"error-free record (not drawable: {', '.join(left_out)})"
        )
    series = {name: [(float(x), y) for x, y in c.points]
              for name, c in zip(series_names(curves), curves)}  # fmt: skip
    title = f"tuning: best GFLOP/s so far, {os.path.basename(os.fspath(path))}"
    svg = line_chart(title, "trial (per task)", "best GFLOP/s", series)
    write_text(output, svg, "<svg", {"the records file": path})
    return {
        "records": os.fspath(path),
        "output": os.fspath(output),
        "tasks": [
            {
                "label": c.label,
                "name": c.name,
                "target": c.target,
                "trials": c.trials,
                "best_gflops": c.best_gflops,
            }
            for c in curves
        ],  # fmt: skip
        "left_out": left_out,
    }


def profile_chart(nodes: Sequence[dict[str, Any]], title: str) -> str:
    """Two panels: milliseconds per model node (the MAX_BARS largest, the rest summed) and per
    op type."""
    ranked = sorted(nodes, key=lambda n: -n["time_ms"])
    bars = [(f"{n['name']} ({n['op']})" if n["op"] else n["name"], n["time_ms"])
            for n in ranked[:MAX_BARS]]  # fmt: skip
    if len(ranked) > MAX_BARS:
        rest = ranked[MAX_BARS:]
        bars.append((f"{len(rest)} other nodes", sum(n["time_ms"] for n in rest)))
    ops = list(op_totals(nodes).items())
    return bar_charts(title, [
        ("time per node (median per call)", "milliseconds", bars),
        ("time per op type", "milliseconds", ops),
    ])  # fmt: skip


def write_profile(
    path: str | os.PathLike[str], nodes: Sequence[dict[str, Any]], device: str, package: str
) -> str:
    """A profile's node rows as a Chrome trace (`.json`) or a bar chart (`.svg`)."""
    path = os.fspath(path)
    inputs = {"the package": package}
    if check_extension(path, PROFILE_FORMATS, "--profile-out") == ".svg":
        title = f"profile of {os.path.basename(package)} on {device}"
        return write_text(path, profile_chart(nodes, title), "<svg", inputs)
    trace = json.dumps(chrome_trace(nodes, device), separators=(",", ":"))
    return write_text(path, trace + "\n", '"traceEvents"', inputs)
