"""`make bench`: tvmc beside onnxruntime and OpenVINO on the ONNX light models (random weights).

One process, same inputs, same thread count (2 by default, TVMC_NUM_THREADS to change), timed in
alternating blocks. Per model: tvmc load time, compile time, median latency of tvmc (default
schedules, no tuning), onnxruntime and OpenVINO (fp32, latency hint; left out when not
installed), the ratio to the faster of the two, GFLOP/s reached and its share of the measured
peak (tvmc.runtime.peak), and workspace bytes against the naive sum. With `--tuned DIR` (records
from benchmarks/tune_models.py, DIR/<model>.json) tvmc also runs compiled with those records, in
the same alternation: the tuned latency, its ratio to the faster baseline and its speedup over
untuned.
Medians of `--repeat` timed runs after warm-up; the machine is shared, so compare ratios, not
lone times.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
from baselines import onnxruntime_session, openvino_session, openvino_version

import tvmc
from tvmc.codegen import load_shared, num_threads
from tvmc.driver.compiler import CompileOptions, build
from tvmc.models import LIGHT_MODELS, light_model_inputs, randomized_light_model
from tvmc.runtime import Executor, ProgramInfo
from tvmc.runtime.peak import peak_gflops


def blocked_median_ms(*fns, repeat: int, rounds: int = 3) -> list[float]:
    """Median milliseconds of each: alternating blocks of runs (one runtime's thread pool never
    spins while the other one runs) so that slow drifts of the machine hit all alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, bucket in zip(fns, times):
            fn()  # warm-up after the other runtime had the cores
            for _ in range(max(repeat // rounds, 1)):
                start = time.perf_counter()
                fn()
                bucket.append(time.perf_counter() - start)
    return [statistics.median(t) * 1e3 for t in times]


def compiled_executor(graph, options: CompileOptions, inputs: list[np.ndarray]):
    """The model built with `options`, loaded, with `inputs` bound: (executor, result)."""
    result = build(graph, options)
    p = result.lowered.program
    info = ProgramInfo(p.entry, p.inputs, p.outputs, p.params, p.buffers, p.calls,
                       p.workspace_bytes)  # fmt: skip
    executor = Executor(load_shared(result.artifact), info, result.lowered.param_values)
    executor.set_inputs(inputs)
    return executor, result


def bench_model(name: str, tmp: str, repeat: int, threads: int, tuned: str | None) -> dict:
    path = f"{tmp}/{name}.onnx"
    onnx_model = randomized_light_model(name)
    onnx.save(onnx_model, path)
    inputs = light_model_inputs(onnx_model)

    start = time.perf_counter()
    model = tvmc.load(path)
    load_s = time.perf_counter() - start
    bound = [inputs[n] for n in model.graph.inputs]
    start = time.perf_counter()
    executor, result = compiled_executor(model.graph, CompileOptions(), bound)
    compile_s = time.perf_counter() - start
    p = result.lowered.program
    ours = executor.run()[0]
    runs = [executor.call]
    if tuned is not None:
        records = os.path.join(tuned, f"{name}.json")
        tuned_executor, _ = compiled_executor(
            model.graph, CompileOptions(tuning_records=records), bound
        )
        tuned_out = tuned_executor.run()[0]
        runs.append(tuned_executor.call)

    baselines = [onnxruntime_session(path, inputs, threads)]
    openvino = openvino_session(path, inputs, threads)
    if openvino is not None:
        baselines.append(openvino)
    theirs = baselines[0]()[0]
    scale = np.abs(theirs).max()
    outputs = [ours] + ([tuned_out] if tuned is not None else []) + [b()[0] for b in baselines[1:]]
    error = max(float(np.abs(o.reshape(theirs.shape) - theirs).max() / scale) for o in outputs)

    times = blocked_median_ms(*runs, *baselines, repeat=repeat)
    tvmc_ms, ort_ms = times[: len(runs)], times[len(runs)]
    ov_ms = times[len(runs) + 1] if openvino is not None else None
    baselines = openvino = None  # free their thread pools before the next model runs
    best = min(ort_ms, ov_ms or ort_ms)
    flops = sum(c.flops for c in p.calls)
    row = {
        "model": name, "load_s": load_s, "compile_s": compile_s, "tvmc_ms": tvmc_ms[0],
        "ort_ms": ort_ms, "ov_ms": ov_ms, "ratio": tvmc_ms[0] / best,
        "gflops": flops / tvmc_ms[0] / 1e6, "workspace_mb": p.workspace_bytes / 1e6,
        "naive_mb": p.naive_bytes / 1e6, "error": error,
    }  # fmt: skip
    if tuned is not None:
        row.update(tuned_ms=tvmc_ms[1], tuned_ratio=tvmc_ms[1] / best,
                   speedup=tvmc_ms[0] / tvmc_ms[1])  # fmt: skip
    return row


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT_MODELS))
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--tuned", metavar="DIR", help="records DIR/<model>.json to compare")
    args = parser.parse_args()
    threads = num_threads()
    peak, source = peak_gflops(threads)
    ov = openvino_version()
    print(f"threads: {threads}; times are medians of {args.repeat} runs; "
          f"peak {peak:.0f} GFLOP/s ({source}); OpenVINO {ov or 'not installed'}; "
          "ratio: tvmc / the faster of onnxruntime and OpenVINO")  # fmt: skip
    header = (
        f"{'model':20} {'load s':>7} {'compile s':>9} {'tvmc ms':>8} {'ort ms':>8} {'ov ms':>8} "
        f"{'ratio':>6} {'GFLOP/s':>8} {'peak':>5} {'ws MB':>6} {'naive MB':>8} {'max err':>8}"
    )
    if args.tuned:
        header += f" {'tuned ms':>8} {'t.ratio':>7} {'speedup':>7}"
    print(header)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            r = bench_model(name, tmp, args.repeat, threads, args.tuned)
            rows.append(r)
            line = (f"{r['model']:20} {r['load_s']:7.2f} {r['compile_s']:9.2f} "
                    f"{r['tvmc_ms']:8.2f} {r['ort_ms']:8.2f} {r['ov_ms'] or math.nan:8.2f} "
                    f"{r['ratio']:6.2f} {r['gflops']:8.1f} "
                    f"{r['gflops'] / peak:5.0%} {r['workspace_mb']:6.1f} {r['naive_mb']:8.1f} "
                    f"{r['error']:8.1e}")  # fmt: skip
            if args.tuned:
                line += f" {r['tuned_ms']:8.2f} {r['tuned_ratio']:7.2f} {r['speedup']:6.2f}x"
            print(line)
            sys.stdout.flush()
    ratios = [r["ratio"] for r in rows]
    print(f"geometric-mean ratio tvmc / faster baseline: {geomean(ratios):.2f} "
          f"(max {max(ratios):.2f})")  # fmt: skip
    if args.tuned:
        tuned = [r["tuned_ratio"] for r in rows]
        speedups = [r["speedup"] for r in rows]
        print(f"tuned: geometric-mean ratio tvmc / faster baseline {geomean(tuned):.2f} "
              f"(max {max(tuned):.2f}); speedup over untuned {geomean(speedups):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
