"""`make demo`: a model that ships with the onnx wheel, from ONNX to tuned, timed native code.

Steps, through the public Python API as a user would call it: write light_squeezenet with seeded
random weights, load it, tune its heaviest tasks briefly, compile it untuned and tuned, run both
with timing, and check the result against onnxruntime on the same input.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from dataclasses import replace

import numpy as np
import onnx

import tvmc
from tvmc.driver import TuningProgress
from tvmc.driver.tuning_report import TaskStats, args_summary
from tvmc.models import light_model_inputs, randomized_light_model
from tvmc.runtime.timing import Timings

MODEL = "light_squeezenet"
TUNED_TASKS = 3  # the heaviest by weight x FLOPs: most of the model's time, seconds to tune
TRIALS_PER_TASK = 12  # a brief search; `tvmc tune` defaults to 1000 in total
REPEAT = 30  # timed runs of each package: enough for a stable median on a quiet machine
ROUNDS = 5  # the packages alternate in rounds of REPEAT // ROUNDS runs, the order flipped each
ROUND_SECONDS = 0.5  # and of this long at least: 30 runs of 5 ms moved a median 8% (same code)


class DemoProgress(TuningProgress):
    """One line per tuned task: trials, best and default GFLOP/s, what compile applies."""

    def __init__(self) -> None:
        self.kept = 0  # tasks whose tuned config compile applies

    def task_end(self, stats: TaskStats) -> None:
        self.kept += bool(stats.check is not None and stats.check.kept)
        best = f"{stats.best_gflops:.1f}" if stats.best_gflops else "-"
        default = f"{stats.default_gflops:.1f}" if stats.default_gflops else "-"
        task = stats.task
        print(f"      #{stats.index} {task.op} {args_summary(task.op, task.args)}: "
              f"{stats.done} trials, {default} -> {best} GFLOP/s, applied: "
              f"{stats.verdict_text()}", flush=True)  # fmt: skip


def seconds_since(start: float) -> str:
    """Elapsed wall time, for the step lines."""
    return f"{time.perf_counter() - start:.1f} s"


def tune_briefly(model: tvmc.TVMCModel, records: str) -> tuple[int, int]:
    """Tune the heaviest tasks a few trials each into a fresh `records`; returns the task count
    and how many of them compile applies a tuned config to."""
    if os.path.exists(records):
        os.unlink(records)  # a fresh search each time: an old file would resume, measuring nothing
    tasks = tvmc.extract_tasks(model, "llvm")  # heaviest first (weight x FLOPs)
    chosen = tasks[:TUNED_TASKS]
    print(f"[3/5] tvmc.tune_tasks: {len(chosen)} heaviest of {len(tasks)} tasks, "
          f"{TRIALS_PER_TASK} trials each (xgb) -> {records}", flush=True)  # fmt: skip
    start = time.perf_counter()
    progress = DemoProgress()
    tvmc.tune_tasks(chosen, records, "xgb", [TRIALS_PER_TASK] * len(chosen),
                    progress=progress, seed=0)  # fmt: skip
    print(f"      tuned in {seconds_since(start)}")
    return len(chosen), progress.kept


def run_alternating(
    packages: list[tvmc.TVMCPackage], inputs: dict[str, np.ndarray]
) -> list[tvmc.TVMCResult]:
    """Each package timed in ROUNDS rounds that alternate with the other's, first one then the
    other first: a slow spell of a shared machine then hits both (timed one after the other, a
    tuned package read 0.79x to 0.99x the untuned one on the same code). Each result's timings
    are its rounds' runs together."""
    rounds: list[list[tvmc.TVMCResult]] = [[] for _ in packages]
    for r in range(ROUNDS):
        order = range(len(packages)) if r % 2 == 0 else reversed(range(len(packages)))
        for i in order:
            rounds[i].append(tvmc.run(packages[i], inputs=inputs, benchmark=True,
                                      repeat=max(REPEAT // ROUNDS, 1),
                                      duration=ROUND_SECONDS))  # fmt: skip
    merged = []
    for results in rounds:
        last = results[-1]  # its outputs; the timings of all its rounds
        last.times = merged_timings([r.times for r in results if r.times is not None])
        merged.append(last)
    return merged


def merged_timings(timings: list[Timings]) -> Timings:
    """Rounds of one package's timings as one: every measurement, runs, warm-ups, threads."""
    threads: Counter[int] = Counter()
    for timing in timings:
        for count, runs in timing.thread_runs:
            threads[count] += runs
    return replace(
        timings[-1],
        results=tuple(t for timing in timings for t in timing.results),
        runs=sum(timing.runs for timing in timings),
        seconds=sum(timing.seconds for timing in timings),
        warmup=sum(timing.warmup for timing in timings),
        thread_runs=tuple(sorted(threads.items(), reverse=True)),  # the full count first
    )


def onnxruntime_median(onnx_path: str, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, float]:
    """onnxruntime's first output and its median latency (ms) over REPEAT runs."""
    import onnxruntime as ort  # only the demo and the tests compare with it

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    output = session.run(None, inputs)[0]
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        session.run(None, inputs)
        times.append((time.perf_counter() - start) * 1e3)
    return output, float(np.median(times))


def main(out_dir: str) -> None:
    """The five steps, printing one line (or table) per step."""
    os.makedirs(out_dir, exist_ok=True)
    onnx_path = os.path.join(out_dir, f"{MODEL}.onnx")
    onnx_model = randomized_light_model(MODEL)
    onnx.save(onnx_model, onnx_path)
    print(f"[1/5] wrote {onnx_path} ({MODEL} from the onnx wheel, seeded random weights)")

    start = time.perf_counter()
    model = tvmc.load(onnx_path)
    print(f"[2/5] tvmc.load: {len(model.graph.nodes)} nodes, {len(model.params)} params "
          f"in {time.perf_counter() - start:.2f} s")  # fmt: skip

    records = os.path.join(out_dir, "tuning.json")
    tuned_tasks, kept = tune_briefly(model, records)

    start = time.perf_counter()
    untuned = tvmc.compile(model, package_path=os.path.join(out_dir, f"{MODEL}.tar"))
    tuned = tvmc.compile(model, package_path=os.path.join(out_dir, f"{MODEL}-tuned.tar"),
                         tuning_records=records)  # fmt: skip
    kernels = untuned.metadata.get("kernels", "?")
    print(f"[4/5] tvmc.compile: {untuned.package_path} and {tuned.package_path} "
          f"({kernels} kernels each), both in {seconds_since(start)}")  # fmt: skip

    inputs = light_model_inputs(onnx_model)
    plain, best = run_alternating([untuned, tuned], inputs)
    print(f"[5/5] tvmc.run, untuned and tuned in {ROUNDS} alternating rounds of "
          f"{ROUND_SECONDS} s or more; untuned:")  # fmt: skip
    print(plain.format_times())
    print("      tuned:")
    print(best.format_times())
    before, after = plain.times.median, best.times.median
    print(f"tuned vs untuned: {before / after:.2f}x (median {before:.2f} -> {after:.2f} ms; "
          f"{TRIALS_PER_TASK} trials on each of {tuned_tasks} tasks, {kept} applied)")  # fmt: skip
    if not kept:
        print("      (every task kept its default schedule: the two packages run the same code, "
              "and the ratio is the machine's noise)")  # fmt: skip

    theirs, ort_ms = onnxruntime_median(onnx_path, inputs)
    print(f"onnxruntime: {ort_ms:.2f} ms median; tvmc/onnxruntime: untuned {before / ort_ms:.2f}, "
          f"tuned {after / ort_ms:.2f}")  # fmt: skip
    worst = 0.0
    for result in (plain, best):
        ours = result.get_output(model.graph.outputs[0]).reshape(theirs.shape)
        worst = max(worst, float(np.abs(ours - theirs).max() / np.abs(theirs).max()))
    top = int(best.get_output(best.output_names[0]).argmax())
    print(f"max error vs onnxruntime: {worst:.1e} of the largest logit; top-1 class {top} vs "
          f"{int(theirs.argmax())}")  # fmt: skip
    if worst > 1e-4:
        sys.exit("demo failed: tvmc and onnxruntime disagree")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo-out")
