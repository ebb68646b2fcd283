"""Tune models of the bench suite (benchmarks/suite.py: the light models with randomized weights,
the zoo) for `benchmarks/models.py --tuned DIR` (`make bench-tuned`): one records file per
model, DIR/<model>.json, resumed when it exists.

    .venv/bin/python benchmarks/tune_models.py DIR [--trials-per-task 24] [models...]

Each model gets `trials-per-task x tasks` trials in total, shared by weight x FLOPs as `tvmc
tune` shares them (heavy tasks get more). Prints tasks, trials, minutes and configs per minute
per model. Tuning measures 2-thread kernels: run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from suite import by_names, suite

import tvmc
from tvmc.autotune.records import read_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("models", nargs="*", help="by name (default: the light models)")
    parser.add_argument("--trials-per-task", type=int, default=24)
    parser.add_argument("--tuner", default="xgb")
    args = parser.parse_args()
    os.makedirs(args.directory, exist_ok=True)
    print(f"{'model':20} {'tasks':>5} {'trials':>6} {'minutes':>7} {'cfg/min':>7} {'errors':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for bench_model in by_names(args.models) if args.models else suite("light"):
            name = bench_model.name
            model = tvmc.load(bench_model.onnx_path(tmp))
            tasks = tvmc.extract_tasks(model, "llvm")
            records = os.path.join(args.directory, f"{name}.json")
            before = len(list(read_records(records, must_exist=False)))
            trials = args.trials_per_task * len(tasks)
            start = time.perf_counter()
            tvmc.tune(model, "llvm", records, trials=trials, tuner=args.tuner, seed=0)
            minutes = (time.perf_counter() - start) / 60
            new = list(read_records(records))[before:]
            errors = sum(1 for r in new if r.error_no)
            rate = len(new) / minutes if minutes > 0 else 0.0
            print(f"{name:20} {len(tasks):5d} {len(new):6d} {minutes:7.1f} {rate:7.0f} {errors:6d}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
