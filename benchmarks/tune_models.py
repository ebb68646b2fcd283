"""Tune models of the bench suite (benchmarks/suite.py: the light models with randomized weights,
the zoo) for `benchmarks/models.py --tuned DIR` (`make bench-tuned`): one records file per
model, DIR/<model>.json, resumed when it exists.

    .venv/bin/python benchmarks/tune_models.py DIR [--trials-per-task 24] [--models all] [models...]

Each model gets `trials-per-task x tasks` trials in total, shared by weight x FLOPs as `tvmc
tune` shares them (heavy tasks get more). Prints tasks, trials, minutes and configs per minute
per model, then per task the paired check's verdict (the best config kept, or the default won,
or the default was the best found) with the searched and the paired speedup over the default,
and a count of each verdict. Tuning measures 2-thread kernels: run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from suite import by_names, suite

import tvmc
from tvmc.autotune.records import read_records
from tvmc.driver.tuning_report import TuningProgress


class Summary(TuningProgress):
    """Keeps the run's summary."""

    def finish(self, summary):
        self.summary = summary


def print_verdicts(summary) -> None:
    """Per task: searched speedup, the paired check's verdict and speedup; then the counts."""
    counts: dict[str, int] = {}
    for s in summary.tasks:
        verdict = s.verdict or "not checked"
        counts[verdict] = counts.get(verdict, 0) + 1
        searched = f"{s.speedup:.2f}x" if s.speedup else "-"
        paired = f"{s.paired_speedup:.2f}x" if s.paired_speedup else "-"
        wins = f"{s.check.wins}/{len(s.check.costs)}" if s.check else "-"
        print(f"    #{s.index:<3} {s.task.label[:44]:44} searched {searched:>7}  "
              f"{verdict:12} paired {paired:>6} wins {wins}")  # fmt: skip
    print("    verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    # what the kept configs should save per model run: each checked task's median paired
    # costs times the nodes that run it
    checked = [s for s in summary.tasks if s.check]
    default_us = sum(s.task.weight * statistics.median(s.check.default_costs) for s in checked)
    applied_us = sum(
        s.task.weight * statistics.median(s.check.costs if s.check.kept else s.check.default_costs)
        for s in checked
    )
    if default_us:
        print(f"    checked tasks per model run: {default_us * 1e6:.0f} us on defaults, "
              f"{applied_us * 1e6:.0f} us as applied ({default_us / applied_us:.3f}x)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("models", nargs="*", help="by name (default: --models)")
    parser.add_argument("--models", dest="group", choices=("light", "zoo", "all"), default="light",
                        help="light: the ONNX light models; zoo: tests/models/zoo")  # fmt: skip
    parser.add_argument("--trials-per-task", type=int, default=24)
    parser.add_argument("--tuner", default="xgb")
    args = parser.parse_args()
    os.makedirs(args.directory, exist_ok=True)
    print(f"{'model':20} {'tasks':>5} {'trials':>6} {'minutes':>7} {'cfg/min':>7} {'errors':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for bench_model in by_names(args.models) if args.models else suite(args.group):
            name = bench_model.name
            model = tvmc.load(bench_model.onnx_path(tmp))
            tasks = tvmc.extract_tasks(model, "llvm")
            records = os.path.join(args.directory, f"{name}.json")
            before = len(list(read_records(records, must_exist=False)))  # verdicts too
            trials = args.trials_per_task * len(tasks)
            start = time.perf_counter()
            progress = Summary()
            tvmc.tune(model, "llvm", records, trials=trials, tuner=args.tuner, seed=0,
                      progress=progress)  # fmt: skip
            minutes = (time.perf_counter() - start) / 60
            new = [r for r in list(read_records(records))[before:] if r.verdict is None]
            errors = sum(1 for r in new if r.error_no)
            rate = len(new) / minutes if minutes > 0 else 0.0
            print(f"{name:20} {len(tasks):5d} {len(new):6d} {minutes:7.1f} {rate:7.0f} {errors:6d}")
            print_verdicts(progress.summary)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
