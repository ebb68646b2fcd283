"""`make bench`: tvmc beside onnxruntime on the ONNX light models (randomized weights).

One process, same inputs, same thread count (2 by default, TVMC_NUM_THREADS to change), timed in
alternating blocks. Per
model: tvmc load time, compile time, median latency of tvmc (default schedules, no tuning) and
onnxruntime, the ratio, GFLOP/s reached, and workspace bytes against the naive sum. Medians of
`--repeat` timed runs after warm-up; the machine is shared, so compare ratios, not lone times.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx

import tvmc
from tvmc.codegen import load_shared, num_threads
from tvmc.driver.compiler import CompileOptions, build
from tvmc.models import LIGHT_MODELS, light_model_inputs, randomized_light_model
from tvmc.runtime import Executor, ProgramInfo


def blocked_median_ms(first, second, repeat: int, rounds: int = 3) -> tuple[float, float]:
    """Median milliseconds of each: alternating blocks of runs (one runtime's thread pool never
    spins while the other one runs) so that slow drifts of the machine hit both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, bucket in ((first, times[0]), (second, times[1])):
            fn()  # warm-up after the other runtime had the cores
            for _ in range(max(repeat // rounds, 1)):
                start = time.perf_counter()
                fn()
                bucket.append(time.perf_counter() - start)
    return statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3


def bench_model(name: str, tmp: str, repeat: int, threads: int) -> dict:
    import onnxruntime as ort

    path = f"{tmp}/{name}.onnx"
    onnx_model = randomized_light_model(name)
    onnx.save(onnx_model, path)
    inputs = light_model_inputs(onnx_model)

    start = time.perf_counter()
    model = tvmc.load(path)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    result = build(model.graph, CompileOptions())
    compile_s = time.perf_counter() - start
    p = result.lowered.program
    info = ProgramInfo(p.entry, p.inputs, p.outputs, p.params, p.buffers, p.calls,
                       p.workspace_bytes)  # fmt: skip
    executor = Executor(load_shared(result.artifact), info, result.lowered.param_values)
    executor.set_inputs([inputs[n] for n in model.graph.inputs])
    ours = executor.run()[0]

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    theirs = session.run(None, inputs)[0]
    error = float(np.abs(ours.reshape(theirs.shape) - theirs).max() / np.abs(theirs).max())

    tvmc_ms, ort_ms = blocked_median_ms(executor.call, lambda: session.run(None, inputs), repeat)
    session = None  # free its thread pool before the next model runs
    flops = sum(c.flops for c in p.calls)
    return {
        "model": name, "load_s": load_s, "compile_s": compile_s, "tvmc_ms": tvmc_ms,
        "ort_ms": ort_ms, "ratio": tvmc_ms / ort_ms, "gflops": flops / tvmc_ms / 1e6,
        "workspace_mb": p.workspace_bytes / 1e6, "naive_mb": p.naive_bytes / 1e6, "error": error,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT_MODELS))
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    threads = num_threads()
    print(f"threads: {threads}; times are medians of {args.repeat} runs")
    header = (
        f"{'model':20} {'load s':>7} {'compile s':>9} {'tvmc ms':>8} {'ort ms':>8} "
        f"{'ratio':>6} {'GFLOP/s':>8} {'ws MB':>6} {'naive MB':>8} {'max err':>8}"
    )
    print(header)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            r = bench_model(name, tmp, args.repeat, threads)
            ratios.append(r["ratio"])
            print(f"{r['model']:20} {r['load_s']:7.2f} {r['compile_s']:9.2f} {r['tvmc_ms']:8.2f} "
                  f"{r['ort_ms']:8.2f} {r['ratio']:6.2f} {r['gflops']:8.1f} "
                  f"{r['workspace_mb']:6.1f} {r['naive_mb']:8.1f} {r['error']:8.1e}")  # fmt: skip
            sys.stdout.flush()
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"geometric-mean ratio tvmc/onnxruntime: {geomean:.2f} (max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
