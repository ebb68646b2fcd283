"""`make bench-tune`: best GFLOP/s of light_resnet50's heaviest conv tasks after N trials, for
the xgb and random tuners, beside the default schedule and the machine's peak.

    .venv/bin/python benchmarks/tune.py [--tasks 4] [--checkpoints 64,128,256]

Each (task, tuner) pair starts from nothing (no records), so the numbers compare search
strategies. Tuning measures 2-thread kernels: run it on an idle machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import onnx

import tvmc
from tvmc.autotune.local import LocalMeasurer
from tvmc.autotune.measure import MeasureOptions, measure_default
from tvmc.autotune.tuners import TUNERS
from tvmc.driver.tuning_report import peak_gflops
from tvmc.models import randomized_light_model


def gflops(flops: int, cost: float | None) -> float:
    return flops / cost / 1e9 if cost and cost < 1e8 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="light_resnet50")
    parser.add_argument("--tasks", type=int, default=4, help="the N heaviest tasks")
    parser.add_argument("--checkpoints", default="64,128,256")
    parser.add_argument("--tuners", default="xgb,random")
    args = parser.parse_args()
    checkpoints = [int(c) for c in args.checkpoints.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/{args.model}.onnx"
        onnx.save(randomized_light_model(args.model), path)
        tasks = tvmc.extract_tasks(tvmc.load(path), "llvm")[: args.tasks]
    peak, _ = peak_gflops()
    header = " ".join(f"{'@' + str(c):>7}" for c in checkpoints)
    print(f"peak {peak:.0f} GFLOP/s; GFLOP/s of the best config after N trials")
    print(f"{'task':36} {'tuner':7} {'default':>8} {header} {'cfg/min':>8}")
    with LocalMeasurer(MeasureOptions()) as measurer:
        for task in tasks:
            default = measure_default(task, measurer)
            base = gflops(task.flops, min(default.costs) if default.error_no == 0 else None)
            tensors = [a[1] for a in task.args if a[0] == "TENSOR"][:2]  # input, weights
            shapes = ", ".join("x".join(str(d) for d in shape) for shape in tensors)
            for name in args.tuners.split(","):
                tuner = TUNERS[name](task, seed=0)
                row, start, done = [], time.perf_counter(), 0
                for checkpoint in checkpoints:
                    tuner.tune(checkpoint - done, measurer)
                    done = checkpoint
                    row.append(gflops(task.flops, tuner.best_cost))
                rate = tuner.trials_done / (time.perf_counter() - start) * 60
                cells = " ".join(f"{g:7.1f}" for g in row)
                print(f"{task.op + ' ' + shapes:36} {name:7} {base:8.1f} {cells} {rate:8.0f}")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
