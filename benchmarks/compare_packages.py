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
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from baselines import onnxruntime_session, openvino_session
from models import blocked_median_ms

from tvmc.codegen import num_threads
from tvmc.driver.objects import TVMCPackage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the ONNX file both packages were compiled from")
    parser.add_argument("packages", nargs=2, metavar="PACKAGE")
    parser.add_argument("inputs", help=".npz of the inputs by name")
    parser.add_argument("--repeat", type=int, default=90, help="timed runs per runtime, in all")
    parser.add_argument("--rounds", type=int, default=3, help="blocks per runtime, per order")
    args = parser.parse_args()
    threads = num_threads()
    feed = dict(np.load(args.inputs))
    runs = []
    for path in args.packages:
        package = TVMCPackage(path)
        executor = package.executor()
        executor.set_inputs([feed[name] for name in package.inputs])
        runs.append(executor.call)
    runs.append(onnxruntime_session(args.model, feed, threads))
    openvino = openvino_session(args.model, feed, threads)
    runs += [openvino] if openvino is not None else []
    load = os.getloadavg()[0]
    half = max(args.repeat // 2, 1)
    forward = blocked_median_ms(*runs, repeat=half, rounds=args.rounds)
    backward = blocked_median_ms(runs[1], runs[0], *runs[2:], repeat=half, rounds=args.rounds)
    backward[0], backward[1] = backward[1], backward[0]
    times = [(f + b) / 2 for f, b in zip(forward, backward)]
    best = min(times[2:])
    ov = f"{times[3]:.3f}" if openvino is not None else "-"
    print(f"{os.path.basename(args.model)}: first {times[0]:.3f} ms (ratio {times[0] / best:.2f}), "
          f"second {times[1]:.3f} ms (ratio {times[1] / best:.2f}), onnxruntime {times[2]:.3f}, "
          f"OpenVINO {ov}; speedup {times[0] / times[1]:.2f}x (by order: "
          f"{forward[0] / forward[1]:.2f}, {backward[0] / backward[1]:.2f}); {threads} threads; "
          f"load average {load:.1f} to {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
