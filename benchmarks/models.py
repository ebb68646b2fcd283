"""`make bench`: tvmc beside onnxruntime on the ONNX light models (randomized weights).

Today it measures import: tvmc.load (parse, convert, fold constants) against onnxruntime's
session creation, median of several runs. Latency columns join when compile/run land.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import onnx

import tvmc
from tvmc.models import LIGHT_MODELS, randomized_light_model


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(runs: int = 5) -> None:
    import onnxruntime as ort

    print(f"{'model':22} {'nodes':>6} {'tvmc load (s)':>14} {'ort session (s)':>16} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in LIGHT_MODELS:
            path = f"{tmp}/{name}.onnx"
            onnx.save(randomized_light_model(name), path)
            nodes = len(tvmc.load(path).graph.nodes)
            ours = median_seconds(lambda p=path: tvmc.load(p), runs)
            theirs = median_seconds(
                lambda p=path: ort.InferenceSession(p, providers=["CPUExecutionProvider"]), runs
            )
            print(f"{name:22} {nodes:6} {ours:14.3f} {theirs:16.3f} {ours / theirs:6.2f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
