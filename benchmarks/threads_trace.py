"""Where a 2-thread inference's time goes on a loaded machine: per-thread scheduler statistics.

Runs one light model (tvmc, 2 threads) `--runs` times beside a load (benchmarks/load.py) and
reads /proc/self/task/*/schedstat and status around the runs: per inference, the wall time, the
CPU time of the calling thread and of the pool's workers, the time they sat runnable but not
running (run-queue wait), their context switches, and the pool's own counters (chunks each
side ran, time the caller waited at joins). Run it once per pool setting, e.g.
`TVMC_THREAD_POOL=gomp GOMP_SPINCOUNT=0 python benchmarks/threads_trace.py --load all-cores`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import Load, parse_spec  # noqa: E402
from models import compiled_executor  # noqa: E402

import tvmc  # noqa: E402
from tvmc.codegen import pool, set_num_threads  # noqa: E402
from tvmc.driver.compiler import CompileOptions  # noqa: E402
from tvmc.models import light_model_inputs, randomized_light_model  # noqa: E402


def thread_stats() -> dict[int, tuple[float, float, int, int]]:
    """tid -> (run ms, run-queue wait ms, voluntary, involuntary context switches)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run_ns, wait_ns, _ = (int(v) for v in f.read().split())
            with open(f"/proc/self/task/{tid}/status") as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines())
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(tid)] = (run_ns / 1e6, wait_ns / 1e6, int(fields["voluntary_ctxt_switches"]),
                         int(fields["nonvoluntary_ctxt_switches"]))  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="light_squeezenet")
    parser.add_argument("--load", default="all-cores")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/{args.model}.onnx"
        onnx_model = randomized_light_model(args.model)
        onnx.save(onnx_model, path)
        inputs = light_model_inputs(onnx_model)
        model = tvmc.load(path)
        bound = [inputs[n] for n in model.graph.inputs]
        executor, result = compiled_executor(model.graph, CompileOptions(), bound)
    set_num_threads(args.threads)
    loops = sum(1 for _ in result.artifact.llvm_ir.split("call void @tvmc_parallel_for")) - 1
    for _ in range(3):
        executor.call()
    me = threading.get_native_id()
    with Load(parse_spec(args.load)):
        time.sleep(1)
        before, stats0 = thread_stats(), pool.stats()
        walls = []
        for _ in range(args.runs):
            start = time.perf_counter()
            executor.call()
            walls.append((time.perf_counter() - start) * 1e3)
        after, stats1 = thread_stats(), pool.stats()
        load_average = os.getloadavg()[0]
    n = args.runs

    def delta(tids: list[int], k: int) -> float:
        return sum(after[t][k] - before.get(t, (0, 0, 0, 0))[k] for t in tids) / n

    workers = [t for t in after if t != me and delta([t], 0) > 0.05]  # threads that ran
    setting = os.environ.get("TVMC_THREAD_POOL", "pool")
    if setting == "gomp":
        setting += f" GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT')}"
    print(
        f"{args.model} {args.threads} threads, {setting}, load '{args.load}' "
        f"(load average {load_average:.1f}), {loops} parallel loops in the code, per inference:"
    )
    print(f"  wall ms: median {statistics.median(walls):.1f}, mean {statistics.fmean(walls):.1f}")
    for name, tids in (("caller", [me]), ("workers", workers)):
        print(
            f"  {name:8} cpu {delta(tids, 0):7.1f} ms  run-queue wait {delta(tids, 1):7.1f} ms  "
            f"voluntary switches {delta(tids, 2):6.1f}  involuntary {delta(tids, 3):6.1f}"
        )
    if stats1.loops > stats0.loops:
        loops_run = stats1.loops - stats0.loops
        print(
            f"  pool: {loops_run / n:.0f} loops, caller ran "
            f"{(stats1.caller_chunks - stats0.caller_chunks) / n:.0f} chunks, workers "
            f"{(stats1.worker_chunks - stats0.worker_chunks) / n:.0f}; join wait "
            f"{(stats1.join_ns - stats0.join_ns) / n / 1e6:.2f} ms"
        )


if __name__ == "__main__":
    main()
