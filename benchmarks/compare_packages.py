"""Two tvmc packages of one model (say, compiled at two commits) timed in one process beside
onnxruntime and OpenVINO: `make bench`'s alternating blocks, so that the machine's drift hits all
alike and a before/after speedup is measured on a shared, noisy machine. The blocks run twice,
the packages in both orders: on the loaded machine the position in the block order alone moved
one package's median by 5-20%; each figure is the mean of the two orders' medians.

    git archive BASE | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base .venv/bin/tvmc compile model.onnx -o before.tar
    .venv/bin/tvmc compile model.onnx -o after.tar
    .venv/bin/python benchmarks/compare_packages.py model.onnx before.tar after.tar inputs.npz

Inputs: an .npz by input name. Prints the medians (ms), each package's ratio to the faster
baseline, the speedup of the second package over the first and the load average.

`--cpu-time` times the two packages only, on one thread, each run by the thread's CPU time (time
off the core does not count, so a loaded machine's neighbours barely move it), alternating in
`--rounds` rounds of 5 runs each; prints the medians and the median of the per-round speedups.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from models import baseline_sessions, blocked_median_ms

from tvmc.codegen import num_threads, set_num_threads
from tvmc.driver.objects import TVMCPackage


def cpu_time_speedup(model: str, runs: list, rounds: int, block: int = 5) -> None:
    """One-thread CPU time of the two packages, alternating blocks; prints medians and speedup."""
    times: list[list[float]] = [[], []]
    speedups = []
    for _ in range(rounds):
        medians = []
        for run, out in zip(runs, times):
            run()  # warm-up after the other package
            spent = []
            for _ in range(block):
                start = time.thread_time()
                run()
                spent.append(time.thread_time() - start)
            out += spent
            medians.append(statistics.median(spent))
        speedups.append(medians[0] / medians[1])
    first, second = (statistics.median(t) * 1e3 for t in times)
    print(f"{os.path.basename(model)}: 1 thread, CPU time: first {first:.3f} ms, second "
          f"{second:.3f} ms; per-round speedup {statistics.median(speedups):.3f} over {rounds} "
          f"rounds; load average {os.getloadavg()[0]:.1f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the ONNX file both packages were compiled from")
    parser.add_argument("packages", nargs=2, metavar="PACKAGE")
    parser.add_argument("inputs", help=".npz of the inputs by name")
    parser.add_argument("--repeat", type=int, default=90, help="timed runs per runtime, in all")
    parser.add_argument("--rounds", type=int, default=3, help="blocks per runtime, per order")
    parser.add_argument("--cpu-time", action="store_true", help="1 thread, timed by CPU time")
    args = parser.parse_args()
    if args.cpu_time:
        set_num_threads(1)
    threads = num_threads()
    feed = dict(np.load(args.inputs))
    runs = []
    for path in args.packages:
        package = TVMCPackage(path)
        executor = package.executor()
        executor.set_inputs([feed[name] for name in package.inputs])
        runs.append(executor.call)
    if args.cpu_time:
        cpu_time_speedup(args.model, runs, args.rounds)
        return
    sessions, gaps = baseline_sessions(args.model, feed, threads)  # a baseline may refuse it
    for gap in gaps:
        print(gap)
    runs += sessions.values()
    load = os.getloadavg()[0]
    half = max(args.repeat // 2, 1)
    forward = blocked_median_ms(*runs, repeat=half, rounds=args.rounds)
    backward = blocked_median_ms(runs[1], runs[0], *runs[2:], repeat=half, rounds=args.rounds)
    backward[0], backward[1] = backward[1], backward[0]
    times = [(f + b) / 2 for f, b in zip(forward, backward)]
    best = min(times[2:])
    baselines = ", ".join(f"{name} {ms:.3f}" for name, ms in zip(sessions, times[2:]))
    print(f"{os.path.basename(args.model)}: first {times[0]:.3f} ms (ratio {times[0] / best:.2f}), "
          f"second {times[1]:.3f} ms (ratio {times[1] / best:.2f}), {baselines}; "
          f"speedup {times[0] / times[1]:.2f}x (by order: "
          f"{forward[0] / forward[1]:.2f}, {backward[0] / backward[1]:.2f}); {threads} threads; "
          f"load average {load:.1f} to {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
