"""tvmc with and without Concat in place (the "before" build refuses every Concat), one process:
both builds alternate over ROUNDS rounds of RUNS runs; medians, and the median per-round ratio,
which slow drifts of a shared machine hit alike.

    .venv/bin/python benchmarks/concat_in_place.py light_squeezenet light_inception_v1
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import onnx
from models import compiled_executor

import tvmc
from tvmc.driver.compiler import CompileOptions
from tvmc.lower.lower import KernelLowering
from tvmc.models import light_model_inputs, randomized_light_model

ROUNDS, RUNS = 40, 5


def builds(name: str, tmp: str) -> dict:
    """The model compiled without and with Concat in place: name -> (executor, calls)."""
    path = f"{tmp}/{name}.onnx"
    onnx_model = randomized_light_model(name)
    onnx.save(onnx_model, path)
    inputs = light_model_inputs(onnx_model)
    graph = tvmc.load(path).graph
    bound = [inputs[n] for n in graph.inputs]
    in_place = KernelLowering.concat_in_place
    out = {}
    try:
        KernelLowering.concat_in_place = lambda self, node: False  # type: ignore[method-assign]
        executor, result = compiled_executor(graph, CompileOptions(), bound)
        out["before"] = executor, len(result.lowered.program.calls)
    finally:
        KernelLowering.concat_in_place = in_place  # type: ignore[method-assign]
    executor, result = compiled_executor(graph, CompileOptions(), bound)
    out["after"] = executor, len(result.lowered.program.calls)
    return out


def main() -> None:
    tmp = tempfile.mkdtemp()
    for name in sys.argv[1:]:
        runs = builds(name, tmp)
        times: dict[str, list[float]] = {"before": [], "after": []}
        for r in range(ROUNDS):
            for key in ("before", "after")[:: 1 if r % 2 else -1]:
                call = runs[key][0].call
                call()
                samples = []
                for _ in range(RUNS):
                    start = time.perf_counter()
                    call()
                    samples.append(time.perf_counter() - start)
                times[key].append(statistics.median(samples) * 1e3)
        ratio = statistics.median(a / b for a, b in zip(times["after"], times["before"]))
        print(f"{name:22s} calls {runs['before'][1]}->{runs['after'][1]}  "
              f"before {statistics.median(times['before']):7.2f} ms  "
              f"after {statistics.median(times['after']):7.2f} ms  "
              f"after/before {ratio:.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
