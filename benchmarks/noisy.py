"""`make bench-noisy`: each light model alone and beside noisy neighbours (benchmarks/load.py):
one busy core, every core busy, and the mixed load that made libgomp-based tvmc collapse.

Per model and neighbour, in alternating blocks in one process: tvmc on 2 threads as it runs by
default, choosing one thread while that has lately been faster (tvmc/runtime/thread_choice.py),
on 2 threads always ("fixed", TVMC_ADAPTIVE_THREADS=0) and on 1 thread (the same package),
onnxruntime and OpenVINO on 2 threads (benchmarks/baselines.py), after tvmc's default has run
untimed beside the neighbour for a while (`settle`: the thread count it learns). Printed:
median milliseconds (each runtime for at least --seconds, in blocks of at most 0.1 s, as
`make bench` times them) and the slowdown against the same runtime alone, timed before and
after the neighbours ("alone again"), the faster of the two. A summary checks what the thread
pool promises: tvmc slows down no more than onnxruntime, and 2 threads never take longer than 1.
`TVMC_THREAD_POOL=gomp` measures libgomp instead of tvmc's pool. The alone rows also give the
round trip of a cache line between the first two CPUs before and after their timing
(benchmarks/core_latency.py): where the host ran the vCPUs apart then (hundreds of ns, not
tens), every runtime's alone time is slow, most for those a second core speeds most, and their
slowdowns read low; timing alone twice keeps one such stretch from setting the baseline.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from typing import NamedTuple

import onnx
from baselines import onnxruntime_session, openvino_session
from core_latency import APART, describe, far_apart, fastest_seen
from load import PRESETS, Load
from models import blocked_median_ms, compiled_executor, geomean, quiet_round_trip_ns

import tvmc
from tvmc.codegen import set_num_threads
from tvmc.driver.compiler import CompileOptions
from tvmc.models import LIGHT_MODELS, light_model_inputs, randomized_light_model

NEIGHBOURS = ("alone", "one-core", "all-cores", "mixed")
# Before the timed blocks under each neighbour, tvmc's default (it learns the thread count from
# its own runs: 10 to 40 runs to see the machine change, then a trial of up to 13 runs, of about
# 1.3 s where runs are short) runs untimed at least this many times and this long, or until the
# most: the table compares each runtime as it runs beside that neighbour for a while; `bursty`
# (a neighbour that comes and goes) measures the learning itself.
SETTLE_RUNS, SETTLE_LEAST_SECONDS, SETTLE_SECONDS = 60, 2.0, 10.0
DEFAULT_MODELS = ("light_squeezenet", "light_shufflenet", "light_inception_v1", "light_resnet50")


def runners(name: str, tmp: str, threads: int) -> dict:
    """name -> a callable running one inference: tvmc at `threads` and 1, ort, OpenVINO."""
    path = f"{tmp}/{name}.onnx"
    onnx_model = randomized_light_model(name)
    onnx.save(onnx_model, path)
    inputs = light_model_inputs(onnx_model)
    model = tvmc.load(path)
    executor, _ = compiled_executor(
        model.graph, CompileOptions(), [inputs[n] for n in model.graph.inputs]
    )

    def on(n: int, adaptive: bool = False):
        def run() -> None:
            set_num_threads(n)
            executor.adaptive_threads = adaptive
            executor.call()

        return run

    out = {f"tvmc {threads}t": on(threads, True), f"tvmc {threads}t fixed": on(threads),
           "tvmc 1t": on(1)}  # fmt: skip
    out["executor"] = executor
    out["onnxruntime"] = onnxruntime_session(path, inputs, threads)
    openvino = openvino_session(path, inputs, threads)
    if openvino is not None:
        out["openvino"] = openvino
    return out


def cell_failures(
    cell: str, keys: list[str], ms: dict[str, float], alone: dict[str, float], apart: bool
) -> list[str]:  # fmt: skip
    """What one loaded cell misses of the pool's promises, each line with both runtimes' times:
    tvmc's default (keys[0]) or its fixed thread count (keys[1]) slowed over 1.1x onnxruntime's
    slowdown, or took over 1.1x the one-thread time. `apart`: the alone times were taken with the
    cores apart, when every runtime runs slow and a fast one's slowdowns read high."""
    theirs = ms["onnxruntime"] / alone["onnxruntime"]
    note = "; alone timed with the cores apart" if apart else ""
    failures = []
    for k in keys[:2]:
        ours = ms[k] / alone[k]
        if ours > theirs * 1.1:
            who = "tvmc" if k == keys[0] else k
            failures.append(f"{cell}: {who} slowed x{ours:.2f}, ort x{theirs:.2f} ({ms[k]:.1f} "
                            f"against {ms['onnxruntime']:.1f} ms{note})")  # fmt: skip
    for k in keys[:2]:
        if ms[k] > ms["tvmc 1t"] * 1.1:
            failures.append(f"{cell}: {k} {ms[k]:.1f} ms > 1 thread {ms['tvmc 1t']:.1f} ms")
    return failures


class Cell(NamedTuple):
    """One model beside one neighbour, as timed."""

    neighbour: str
    ms: dict[str, float]  # median per runtime
    load_average: float
    note: str  # how tvmc's default ran (and the cores' round trip, alone)
    apart: bool  # timed alone with the cores apart


def alone_baseline(cells: list[Cell]) -> tuple[dict[str, float], bool]:
    """Each runtime's alone time, the faster of its alone cells (timed before and after the
    neighbours: a host that runs the cores apart for a while slows one of them, the runtimes
    that gain most from a second core most), or the first cell's without one; and whether every
    alone cell was timed with the cores apart."""
    alone = [c for c in cells if c.neighbour == "alone"]
    if not alone:
        return cells[0].ms, False
    best = {k: min(c.ms[k] for c in alone) for k in alone[0].ms}
    return best, all(c.apart for c in alone)


def settle(run) -> int:
    """`run` untimed SETTLE_RUNS times and for SETTLE_LEAST_SECONDS, or for SETTLE_SECONDS where
    that comes first: how many."""
    start, runs = time.perf_counter(), 0
    while True:
        spent = time.perf_counter() - start
        if spent >= SETTLE_SECONDS or (runs >= SETTLE_RUNS and spent >= SETTLE_LEAST_SECONDS):
            return runs
        run()
        runs += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    models = f"default: {' '.join(DEFAULT_MODELS)}; any of {' '.join(LIGHT_MODELS)}"
    parser.add_argument("models", nargs="*", default=list(DEFAULT_MODELS), help=models)
    parser.add_argument("--repeat", type=int, default=12, help="timed runs per runtime and load")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="and timed for at least this long per runtime and load")  # fmt: skip
    parser.add_argument("--neighbours", default=",".join(NEIGHBOURS),
                        help=f"comma-separated, of {', '.join(PRESETS)}")  # fmt: skip
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    neighbours = args.neighbours.split(",")
    unknown = [n for n in neighbours if n not in PRESETS] + [
        m for m in args.models if m not in LIGHT_MODELS
    ]
    if unknown:
        parser.error(f"unknown neighbour or model: {', '.join(unknown)}")
    pool = os.environ.get("TVMC_THREAD_POOL") or "tvmc pool"
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} before; tvmc on {pool}")
    for n in neighbours:
        print(f"  {n}: {PRESETS[n].describe()}")
    slowdowns: dict[str, dict[str, list[float]]] = {n: {} for n in neighbours}
    failures: list[str] = []
    apart_alone: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            fns = runners(name, tmp, args.threads)
            executor = fns.pop("executor")
            keys = list(fns)
            print(f"\n{name}: median ms (slowdown against alone)")
            print(f"{'neighbours':10} {'load avg':>8} " + " ".join(f"{k:>18}" for k in keys))
            # alone again after the neighbours: slowdowns are against each runtime's faster alone
            order = neighbours + (
                ["alone"] if "alone" in neighbours and len(neighbours) > 1 else []
            )
            cells: list[Cell] = []
            for n in order:
                set_num_threads(args.threads)
                with Load(PRESETS[n]):
                    settled = settle(fns[keys[0]])
                    before = executor.thread_runs
                    sample = n == "alone"  # under a neighbour the probe times its share
                    cores = [quiet_round_trip_ns()] if sample else []
                    times = blocked_median_ms(*fns.values(), repeat=args.repeat,
                                              seconds=args.seconds)  # fmt: skip
                    cores += [quiet_round_trip_ns()] if sample else []
                    load_average = os.getloadavg()[0]
                set_num_threads(args.threads)
                runs = {k: v - before.get(k, 0) for k, v in executor.thread_runs.items()}
                trip = f"; cores' round trip {describe(cores)} ns" if cores else ""
                one = (f"  ({keys[0]} on 1 thread: {runs.get(1, 0)} of {sum(runs.values())} runs,"
                       f" after {settled} untimed{trip})")  # fmt: skip
                apart = bool(cores) and far_apart(cores, fastest_seen(cores) or math.inf)
                cells.append(Cell(n, dict(zip(keys, times)), load_average, one, apart))
                print(f"  {name} {n}: timed", file=sys.stderr, flush=True)
            alone, apart = alone_baseline(cells)
            alone_cells = 0
            for n, ms, load_average, one, _ in cells:
                row = []
                for k in keys:
                    factor = ms[k] / alone[k]
                    slowdowns[n].setdefault(k, []).append(1.0 if n == "alone" else factor)
                    row.append(f"{ms[k]:9.2f} (x{factor:5.2f})")
                label = "alone again" if n == "alone" and alone_cells else n
                alone_cells += n == "alone"
                print(f"{label:10} {load_average:8.1f} " + " ".join(f"{c:>18}" for c in row) + one)
                # an alone cell checks two threads against one only (against itself, no slowdown)
                baseline = ms if n == "alone" else alone
                failures += cell_failures(f"{name} {label}", keys, ms, baseline, apart)
            apart_alone += [name] if apart else []
            sys.stdout.flush()
            set_num_threads(None)
            fns = None  # free the baselines' thread pools
    print("\ngeometric-mean slowdown against alone, per neighbour")
    keys = list(next(iter(slowdowns.values())))
    print(f"{'neighbours':10} " + " ".join(f"{k:>12}" for k in keys))
    for n, per in slowdowns.items():
        print(f"{n:10} " + " ".join(f"{geomean(per.get(k, [math.nan])):12.2f}" for k in keys))
    verdict = "tvmc slowed no more than onnxruntime, and 2 threads took no longer than 1"
    print("\n" + ("\n".join(f"above 1.1x: {f}" for f in failures) or f"{verdict} (within 10%)"))
    if apart_alone:
        print(
            f"alone timed with the cores apart (a round trip over {APART:g}x the fastest seen on "
            f"this CPU; every runtime slow, slowdowns read low): {', '.join(apart_alone)}"
        )


if __name__ == "__main__":
    main()
